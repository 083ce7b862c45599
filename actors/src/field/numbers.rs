//! Reading numbers out of text the way a corpus phrases them: thousands separators
//! (`12,400`), decimals, scale words (`1.2 million`, `3 billion`, `40k`), and percentages
//! (`35%`, `35 percent`, read as ratios for ratio fields). Each reading keeps the verbatim sentence
//! it came from, so the offline extractor can cite it as the quote.

use super::schema::ValueType;

/// A number found in a text.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    /// The value, scaled (`1.2 million` → 1,200,000; `35%` → 0.35 for a ratio, 35 otherwise).
    pub value: f64,
    /// The sentence it appears in, verbatim.
    pub quote: String,
    /// Byte offset of the number in the text.
    pub offset: usize,
    /// Written as a percentage (`35%`, `35 percent`).
    pub percent: bool,
}

/// Splits `text` into sentences (on `.`, `!`, `?` followed by whitespace, and on newlines),
/// keeping their byte offsets.
pub fn sentences(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    let b = text.as_bytes();
    for i in 0..b.len() {
        let end = match b[i] {
            b'\n' => Some(i),
            b'.' | b'!' | b'?' if b.get(i + 1).is_none_or(|c| c.is_ascii_whitespace()) => {
                Some(i + 1)
            }
            _ => None,
        };
        if let Some(e) = end {
            let s = text[start..e].trim();
            if !s.is_empty() {
                out.push((
                    start + (text[start..e].len() - text[start..e].trim_start().len()),
                    s,
                ));
            }
            start = e;
        }
    }
    let s = text[start..].trim();
    if !s.is_empty() {
        out.push((
            start + (text[start..].len() - text[start..].trim_start().len()),
            s,
        ));
    }
    out
}

fn scale_word(word: &str) -> Option<f64> {
    match word
        .trim_end_matches(['.', ',', ';'])
        .to_ascii_lowercase()
        .as_str()
    {
        "thousand" | "k" => Some(1e3),
        "million" | "millions" | "m" | "mn" => Some(1e6),
        "billion" | "billions" | "bn" | "b" => Some(1e9),
        _ => None,
    }
}

/// Every number in `text`, read for a field of type `ty`.
pub fn readings(text: &str, ty: ValueType) -> Vec<Reading> {
    let mut out = Vec::new();
    for (s_off, sentence) in sentences(text) {
        let b = sentence.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let starts = b[i].is_ascii_digit()
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'.'));
            if !starts {
                i += 1;
                continue;
            }
            let start = i;
            let mut digits = String::new();
            while i < b.len() {
                let c = b[i];
                if c.is_ascii_digit() {
                    digits.push(c as char);
                } else if c == b','
                    && b.get(i + 1).is_some_and(u8::is_ascii_digit)
                    && b.get(i + 3).is_some_and(u8::is_ascii_digit)
                    && !b.get(i + 4).is_some_and(u8::is_ascii_digit)
                {
                    // a thousands separator: `12,400`
                } else if c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                    digits.push('.');
                } else {
                    break;
                }
                i += 1;
            }
            let Ok(mut value) = digits.parse::<f64>() else {
                continue;
            };
            let rest = &sentence[i..];
            let trimmed = rest.trim_start();
            let next_word = trimmed.split_whitespace().next().unwrap_or("");
            let mut percent = false;
            if trimmed.starts_with('%')
                || next_word.eq_ignore_ascii_case("percent")
                || next_word.eq_ignore_ascii_case("per")
                    && trimmed[3..].trim_start().starts_with("cent")
            {
                percent = true;
                if ty == ValueType::Ratio {
                    value /= 100.0;
                }
            } else if let Some(scale) = rest
                .chars()
                .next()
                .filter(|c| c.is_ascii_alphabetic())
                .and_then(|_| {
                    let word: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphabetic())
                        .collect();
                    scale_word(&word)
                })
            {
                value *= scale; // `40k`, `3bn`
            } else if let Some(scale) = scale_word(next_word) {
                value *= scale;
            }
            if value.is_finite() {
                out.push(Reading {
                    value,
                    quote: sentence.to_string(),
                    offset: s_off + start,
                    percent,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str, ty: ValueType) -> Vec<f64> {
        readings(text, ty).into_iter().map(|r| r.value).collect()
    }

    #[test]
    fn varied_phrasing_reads_the_same_numbers() {
        assert_eq!(
            values("There are 12,400 dental clinics.", ValueType::Number),
            [12_400.0]
        );
        assert_eq!(
            values("The region has 1.2 million residents.", ValueType::Number),
            [1_200_000.0]
        );
        assert_eq!(
            values("Revenue reached 3bn last year.", ValueType::Number),
            [3e9]
        );
        assert_eq!(
            values("About 40k practices exist.", ValueType::Number),
            [40_000.0]
        );
        assert_eq!(
            values("Roughly 35% of clinics use software.", ValueType::Ratio),
            [0.35]
        );
        assert_eq!(
            values("Roughly 35 percent of clinics.", ValueType::Ratio),
            [0.35]
        );
        assert_eq!(values("Roughly 35% of clinics.", ValueType::Number), [35.0]);
        assert_eq!(values("Über 40 % der Praxen.", ValueType::Ratio), [0.4]);
        assert_eq!(
            values("A licence costs 1,200.50 EUR per year.", ValueType::Number),
            [1_200.5]
        );
        assert_eq!(
            values("Version v2 has no numbers worth reading", ValueType::Number),
            Vec::<f64>::new()
        );
    }

    #[test]
    fn quotes_are_verbatim_sentences_of_the_text() {
        let text =
            "Dentistry is local. The country counts 60 dentists per 100,000 people! Prices vary.";
        let r = readings(text, ValueType::Number);
        assert_eq!(
            r.iter().map(|r| r.value).collect::<Vec<_>>(),
            [60.0, 100_000.0]
        );
        assert_eq!(
            r[0].quote,
            "The country counts 60 dentists per 100,000 people!"
        );
        assert!(text.contains(&r[0].quote));
        assert_eq!(&text[r[0].offset..r[0].offset + 2], "60");
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_quotes_are_substrings(text in "\\PC{0,120}") {
            for r in readings(&text, ValueType::Ratio) {
                proptest::prop_assert!(text.contains(&r.quote));
                proptest::prop_assert!(r.value.is_finite());
            }
        }
    }
}
