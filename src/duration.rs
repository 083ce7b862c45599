//! Durations as people write them in flags, URLs and specs: `250us`, `500ms`, `1.5s`, `2m`, `3h`,
//! `7d`. One parser for every place that reads one (server limits, retention, database URL
//! options, the simulated model, load scenarios); each caller says what a bare number means and
//! which range it accepts.

use std::time::Duration;

/// What a number without a unit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BareUnit {
    /// Milliseconds (`200` is 200 ms).
    Millis,
    /// Seconds (`5` is 5 s).
    Seconds,
}

/// Parses `text`: a non-negative number, optionally followed by `us`/`µs`, `ms`, `s`, `m`/`min`,
/// `h` or `d` (spaces allowed between). `None` for anything else, a negative or non-finite
/// number, or more than a hundred years.
pub fn parse(text: &str, bare: BareUnit) -> Option<Duration> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .trim()
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    let secs = match unit.trim() {
        "" => match bare {
            BareUnit::Millis => n / 1e3,
            BareUnit::Seconds => n,
        },
        "us" | "µs" => n / 1e6,
        "ms" => n / 1e3,
        "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3_600.0,
        "d" => n * 86_400.0,
        _ => return None,
    };
    (secs <= 100.0 * 365.0 * 86_400.0)
        .then(|| Duration::try_from_secs_f64(secs).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_bare_numbers() {
        let s = |t| parse(t, BareUnit::Seconds);
        assert_eq!(s("250us"), Some(Duration::from_micros(250)));
        assert_eq!(s("250µs"), Some(Duration::from_micros(250)));
        assert_eq!(s("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(s("1.5 s"), Some(Duration::from_millis(1500)));
        assert_eq!(s("2m"), Some(Duration::from_secs(120)));
        assert_eq!(s("3h"), Some(Duration::from_secs(10_800)));
        assert_eq!(s("7d"), Some(Duration::from_secs(604_800)));
        assert_eq!(s("5"), Some(Duration::from_secs(5)));
        assert_eq!(
            parse("200", BareUnit::Millis),
            Some(Duration::from_millis(200))
        );
        for bad in ["", "-1s", "1x", "s", "1e400s", "nan", "1000000000d"] {
            assert_eq!(s(bad), None, "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,16}") {
            let _ = parse(&text, BareUnit::Seconds);
        }
    }
}
