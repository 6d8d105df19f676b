//! Parsing of human-written quantities: byte sizes (`"64MiB"`), rates
//! (`"40MB/s"`) and durations (`"500ms"`), as they appear in manifests and on the command line.

use std::time::Duration;

/// Parses a byte size: a non-negative integer followed by an optional unit.
///
/// Units are binary (`KiB`, `MiB`, `GiB`, `TiB`, also `K`, `M`, `G`, `T`)
/// or decimal (`kB`, `MB`, `GB`, `TB`); `B` or no unit means bytes. Spaces
/// between number and unit are allowed. Overflow is an error.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "bad size {text:?}: expected a number such as \"64MiB\""
        ));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("bad size {text:?}: number too large"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "bad size {text:?}: unknown unit {other:?} (use B, KiB, MiB, GiB, kB, MB, GB)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("bad size {text:?}: too large"))
}

/// Parses a duration: a non-negative decimal number followed by a unit
/// (`ns`, `us`, `ms`, `s`, `m`, `h`). A unit is required, since a bare
/// number is ambiguous.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| {
        format!("bad duration {text:?}: expected a number and unit such as \"500ms\"")
    })?;
    let nanos_per: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "" => {
            return Err(format!(
                "bad duration {text:?}: missing unit (ns, us, ms, s, m, h)"
            ))
        }
        other => return Err(format!("bad duration {text:?}: unknown unit {other:?}")),
    };
    let nanos = n * nanos_per;
    if !nanos.is_finite() || nanos > u64::MAX as f64 {
        return Err(format!("bad duration {text:?}: too large"));
    }
    Ok(Duration::from_nanos(nanos.round() as u64))
}

/// Parses a duration that limits something (a CPU limit, a quota, a
/// timeout): zero is an error, since a limit of nothing would refuse all
/// work, and meaning "unlimited" by it would surprise.
pub fn parse_limit_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        d if d.is_zero() => Err(format!("bad duration {text:?}: must be more than zero")),
        d => Ok(d),
    }
}

/// Parses a rate: a byte size per second, `"40MB/s"` or `"1GiB/s"` (the
/// `/s` is required, so a size is never mistaken for a rate). Zero is an
/// error: a rate of nothing is never what a manifest means.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let Some(size) = t.strip_suffix("/s") else {
        return Err(format!(
            "bad rate {text:?}: expected a size per second such as \"40MB/s\""
        ));
    };
    match parse_size(size).map_err(|e| format!("bad rate {text:?}: {e}"))? {
        0 => Err(format!("bad rate {text:?}: must be more than zero")),
        n => Ok(n),
    }
}

/// Formats a byte count with a binary unit, for messages.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("64 MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("100"), Ok(100));
        assert_eq!(parse_size("2MB"), Ok(2_000_000));
        assert!(parse_size("").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("12 parsecs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_size("-5MiB").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("17000000TiB").unwrap_err().contains("too large"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10us"), Ok(Duration::from_micros(10)));
        assert!(parse_duration("10").unwrap_err().contains("missing unit"));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3 fortnights").is_err());
        assert!(parse_duration("1e400s").is_err());
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert!(parse_limit_duration("0s")
            .unwrap_err()
            .contains("more than zero"));
        assert!(parse_limit_duration("0.0ms").is_err());
        assert_eq!(parse_limit_duration("1ns"), Ok(Duration::from_nanos(1)));
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("40MB/s"), Ok(40_000_000));
        assert_eq!(parse_rate("1GiB/s"), Ok(1 << 30));
        assert_eq!(parse_rate(" 512 KiB/s "), Ok(512 << 10));
        assert!(parse_rate("40MB").unwrap_err().contains("per second"));
        assert!(parse_rate("0MB/s").unwrap_err().contains("more than zero"));
        assert!(parse_rate("fast/s").is_err());
    }

    #[test]
    fn format() {
        assert_eq!(format_size(512), "512 B");
        assert_eq!(format_size(64 << 20), "64.0 MiB");
    }
}
