//! Spelling: how far apart two words are, and which of a list a
//! misspelt word most likely meant (for "did you mean" hints on
//! manifest keys and command-line flags).

/// The candidate closest to `word` in edits, if it is close enough to be
/// what was meant (at most a third of its letters, and at least one).
pub fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let most = (word.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (distance(word, c), *c))
        .filter(|(d, _)| *d <= most)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, with a swap of two neighbours counting as one.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for j in 0..=b.len() {
        rows[0][j] = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = d;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_count_edits_and_swaps() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("nmae", "name"), 1, "a swap is one edit");
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(nearest("moduel", &["module", "name"]), Some("module"));
        assert_eq!(nearest("xyz", &["module", "name"]), None);
    }
}
