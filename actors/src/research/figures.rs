//! Figures in notes: the numbers a sentence states, with their unit or currency, and how to write
//! them for people.
//!
//! The comparison section puts sources side by side by their figures, so a figure needs its unit
//! ("45 ms", "2,400 USD", "18 percent"); a bare count ("40 trucks") keeps the word after it as its
//! unit. Exact values stay in the JSON (`step_results[*].findings[*].figures`); the brief shows
//! them rounded ([`human`]).

use serde::{Deserialize, Serialize};

/// A number a sentence states.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// The exact value (scaled: "1.2 million" is 1,200,000).
    pub value: f64,
    /// Its unit or currency, as the note writes it ("ms", "EUR", "percent"); empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unit: String,
}

impl Figure {
    /// The figure for people: rounded, with its unit.
    pub fn human(&self) -> String {
        // Money under 100 keeps its cents: "4.10 EUR", not "4.1 EUR".
        let money = self
            .unit
            .split_whitespace()
            .next()
            .is_some_and(|u| CURRENCIES.contains(&u));
        let n = if money && self.value.abs() < 100.0 && self.value.fract() != 0.0 {
            format!("{:.2}", self.value)
        } else {
            human(self.value)
        };
        match self.unit.as_str() {
            "" => n,
            "%" => format!("{n}%"),
            u => format!("{n} {u}"),
        }
    }
}

/// Units that a figure may carry (lower case; currencies are matched upper case as written).
const UNITS: &[&str] = &[
    "ms",
    "milliseconds",
    "seconds",
    "minutes",
    "hours",
    "days",
    "weeks",
    "months",
    "years",
    "percent",
    "%",
    "degrees",
    "litres",
    "liters",
    "km",
    "kg",
    "decibels",
    "db",
    "gb",
    "tb",
];
/// What a rate may be per ("per month", "a year").
const PERIODS: &[&str] = &[
    "hour",
    "day",
    "week",
    "month",
    "year",
    "query",
    "conversation",
];
const CURRENCIES: &[&str] = &["EUR", "USD", "GBP", "CHF", "JPY"];
const SCALES: &[(&str, f64)] = &[
    ("thousand", 1e3),
    ("million", 1e6),
    ("billion", 1e9),
    ("trillion", 1e12),
];

/// The figures `sentence` states, in order. Ordinals and years alone ("2024") are kept: the
/// caller decides what matters by unit.
pub fn extract(sentence: &str) -> Vec<Figure> {
    let words: Vec<&str> = sentence.split_whitespace().collect();
    let mut out = Vec::new();
    for (i, raw) in words.iter().enumerate() {
        let w = raw.trim_matches(|c: char| matches!(c, '(' | ')' | ',' | ';' | ':' | '.'));
        let (prefix_cur, digits) = match w.chars().next() {
            Some('$') => ("USD", &w[1..]),
            Some('€') => ("EUR", &w['€'.len_utf8()..]),
            Some('£') => ("GBP", &w['£'.len_utf8()..]),
            _ => ("", w),
        };
        let (num, pct) = match digits.strip_suffix('%') {
            Some(d) => (d, true),
            None => (digits, false),
        };
        if num.is_empty() || !num.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            continue;
        }
        let cleaned: String = num.chars().filter(|c| *c != ',').collect();
        let Ok(mut value) = cleaned.parse::<f64>() else {
            continue;
        };
        let mut next = i + 1;
        let word = |k: usize| {
            words
                .get(k)
                .map(|x| x.trim_matches(|c: char| !c.is_alphanumeric() && c != '%'))
        };
        if let Some((_, scale)) =
            word(next).and_then(|w| SCALES.iter().find(|(s, _)| s.eq_ignore_ascii_case(w)))
        {
            value *= scale;
            next += 1;
        }
        let (mut unit, after) = if pct {
            ("%".to_string(), next)
        } else if !prefix_cur.is_empty() {
            (prefix_cur.to_string(), next)
        } else {
            match word(next) {
                Some(u) if CURRENCIES.contains(&u) => (u.to_string(), next + 1),
                Some(u) if UNITS.contains(&u.to_lowercase().as_str()) => {
                    (u.to_lowercase(), next + 1)
                }
                _ => (String::new(), next),
            }
        };
        // A rate: "2,400 USD per month", "8,640 EUR a year".
        if !unit.is_empty() && unit != "%" && unit != "percent" {
            let per = word(after).map(str::to_lowercase);
            if matches!(per.as_deref(), Some("per" | "a" | "each")) {
                if let Some(period) = word(after + 1).filter(|p| PERIODS.contains(p)) {
                    unit = format!("{unit} per {period}");
                }
            }
        }
        out.push(Figure { value, unit });
    }
    out
}

/// A number for people: thousands separated, large values in millions, at most three
/// significant digits after the point ("705669.1199999999" → "705,669"; "0.9" stays "0.9";
/// "12500000" → "12.5 million").
pub fn human(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    let abs = value.abs();
    if abs >= 1e6 {
        let (scale, name) = if abs >= 1e9 {
            (1e9, "billion")
        } else {
            (1e6, "million")
        };
        return format!("{} {name}", trim(format!("{:.2}", value / scale)));
    }
    if abs >= 100.0 {
        return group(value.round() as i64);
    }
    let text = if abs >= 10.0 {
        format!("{value:.1}")
    } else if abs >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    };
    trim(text)
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn group(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(value: f64, unit: &str) -> Figure {
        Figure {
            value,
            unit: unit.into(),
        }
    }

    #[test]
    fn figures_carry_their_units_and_scales() {
        assert_eq!(
            extract("p95 latency rose from 38 ms to 61 ms."),
            vec![f(38.0, "ms"), f(61.0, "ms")]
        );
        assert_eq!(
            extract("It costs 2,400 USD per month, or €1,900 a year, and 380 USD once."),
            vec![
                f(2400.0, "USD per month"),
                f(1900.0, "EUR per year"),
                f(380.0, "USD")
            ]
        );
        assert_eq!(
            extract("Spoilage fell by 35 percent (or 18%) across 1.2 million parcels."),
            vec![f(35.0, "percent"), f(18.0, "%"), f(1.2e6, "")]
        );
        assert!(extract("No numbers here.").is_empty());
    }

    #[test]
    fn numbers_are_rounded_for_people() {
        assert_eq!(human(705669.1199999999), "705,669");
        assert_eq!(human(0.9), "0.9");
        assert_eq!(human(4.10), "4.1");
        assert_eq!(human(12.5e6), "12.5 million");
        assert_eq!(human(-1234.4), "-1,234");
        assert_eq!(human(0.05), "0.05");
        assert_eq!(f(18.0, "%").human(), "18%");
        assert_eq!(f(2400.0, "USD").human(), "2,400 USD");
        // Money under 100 keeps its cents; whole amounts and other units do not gain any.
        assert_eq!(f(4.10, "EUR").human(), "4.10 EUR");
        assert_eq!(f(0.9, "EUR per month").human(), "0.90 EUR per month");
        assert_eq!(f(40.0, "USD").human(), "40 USD");
        assert_eq!(f(4.10, "kg").human(), "4.1 kg");
    }
}
