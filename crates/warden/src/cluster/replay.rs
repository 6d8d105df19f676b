//! Replays refused: each signer's sequence numbers are taken once.

/// Sequence numbers a receiver has seen from one signer, to refuse
/// replays: frames of an instance older than the newest heard are
/// refused, and within the newest each number is taken once. Frames may
/// arrive a little out of order (they are sent from several tasks), so
/// numbers up to [`Window::SPAN`] below the highest are still taken if
/// they were not seen.
#[derive(Debug, Clone, Default)]
pub struct Window {
    instance: u64,
    highest: u64,
    /// Bit `i` set: `highest - i` was seen.
    seen: [u64; Window::WORDS],
}

impl Window {
    const WORDS: usize = 16;
    /// How far below the highest number a frame may arrive.
    pub const SPAN: u64 = 64 * Self::WORDS as u64;

    /// Takes `(instance, seq)` if it was not taken before.
    pub fn take(&mut self, instance: u64, seq: u64) -> bool {
        if instance < self.instance {
            return false;
        }
        if instance > self.instance {
            *self = Window {
                instance,
                highest: seq,
                seen: [0; Self::WORDS],
            };
            self.seen[0] = 1;
            return true;
        }
        if seq > self.highest {
            self.shift(seq - self.highest);
            self.highest = seq;
            self.seen[0] |= 1;
            return true;
        }
        let back = self.highest - seq;
        if back >= Self::SPAN {
            return false;
        }
        let (word, bit) = ((back / 64) as usize, back % 64);
        let fresh = self.seen[word] & (1 << bit) == 0;
        self.seen[word] |= 1 << bit;
        fresh
    }

    /// Moves every seen bit `by` places further from the highest.
    fn shift(&mut self, by: u64) {
        if by >= Self::SPAN {
            self.seen = [0; Self::WORDS];
            return;
        }
        let (words, bits) = ((by / 64) as usize, (by % 64) as u32);
        for i in (0..Self::WORDS).rev() {
            let from = i.checked_sub(words);
            let low = from.map_or(0, |f| self.seen[f]);
            let lower = from
                .and_then(|f| f.checked_sub(1))
                .map_or(0, |f| self.seen[f]);
            self.seen[i] = if bits == 0 {
                low
            } else {
                (low << bits) | (lower >> (64 - bits))
            };
        }
    }
}

/// An instance number: the process's start time in ms, then 16 random
/// bits, so that a restarted node's is the larger.
pub fn instance_number() -> u64 {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    (ms << 16) | u64::from(rand::random::<u16>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_take_each_number_once_and_no_older_instance() {
        let mut w = Window::default();
        assert!(w.take(5, 10));
        assert!(!w.take(5, 10), "a replay");
        assert!(w.take(5, 8) && w.take(5, 9), "late, not seen");
        assert!(!w.take(5, 8), "late, seen");
        assert!(w.take(5, 10 + Window::SPAN));
        assert!(!w.take(5, 10), "fell out of the window");
        assert!(w.take(5, 11), "just inside it");
        assert!(!w.take(4, 1_000_000), "an older instance");
        assert!(w.take(6, 1), "a newer one starts again");
        assert!(!w.take(5, 1_000_000));
        // Out of order across word boundaries.
        let mut w = Window::default();
        let order: Vec<u64> = (1..=300).rev().step_by(3).chain(1..=300).collect();
        let taken = order.iter().filter(|&&s| w.take(1, s)).count();
        assert_eq!(taken, 300, "each number once");
    }

    #[test]
    fn instances_grow_with_time() {
        let a = instance_number();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(instance_number() > a);
    }
}
