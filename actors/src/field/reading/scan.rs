//! Numbers as a sentence writes them: the document's separator convention, separators that
//! cannot be read either way, scale words, percentages written several ways, and ranges.
//! Positions are byte offsets in the sentence, so every mention's text is a verbatim slice.

/// Which character a document uses for decimals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// `1,234.5` (English and most of Asia).
    DecimalDot,
    /// `1.234,5` (German, French, Spanish, Nordic, …).
    DecimalComma,
    /// Nothing in the document says.
    Unknown,
}

/// Words of languages that write decimals with a comma (a few frequent ones each).
const COMMA_LANGUAGE: &[&str] = &[
    "der",
    "die",
    "das",
    "und",
    "ist",
    "mit",
    "von",
    "nicht",
    "les",
    "des",
    "est",
    "une",
    "dans",
    "pour",
    "los",
    "las",
    "del",
    "una",
    "para",
    "gli",
    "della",
    "sono",
    "het",
    "een",
    "zijn",
    "og",
    "och",
    "att",
    "ikke",
    "inte",
    "av",
    "til",
    "rund",
    "etwa",
    "environ",
    "jährlich",
    "pro",
    "ca",
];
/// Words of English.
const DOT_LANGUAGE: &[&str] = &[
    "the", "and", "is", "of", "with", "are", "was", "per", "about", "around", "each", "has", "had",
];

/// The decimal convention of `text`: first from numbers only one convention can read (`1.234,5`,
/// `12,5`, `1,234.5`, `5.2`, `1.234.567`), then from its language's frequent words.
pub fn style_of(text: &str) -> Style {
    let (mut dot, mut comma) = (0, 0);
    for tok in number_tokens(text) {
        match decisive(tok) {
            Some(Style::DecimalDot) => dot += 1,
            Some(Style::DecimalComma) => comma += 1,
            _ => {}
        }
    }
    if dot != comma {
        return if dot > comma {
            Style::DecimalDot
        } else {
            Style::DecimalComma
        };
    }
    let (mut en, mut eu) = (0, 0);
    for w in text
        .split(|c: char| !c.is_alphabetic())
        .map(str::to_lowercase)
    {
        en += DOT_LANGUAGE.contains(&w.as_str()) as u32;
        eu += COMMA_LANGUAGE.contains(&w.as_str()) as u32;
    }
    match (en, eu) {
        (0, 0) => Style::Unknown,
        (en, eu) if en > eu => Style::DecimalDot,
        (en, eu) if eu > en => Style::DecimalComma,
        _ => Style::Unknown,
    }
}

/// The digit-and-separator runs of `text`.
fn number_tokens(text: &str) -> impl Iterator<Item = &str> {
    let b = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() {
            if b[i].is_ascii_digit() {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_digit()
                        || (matches!(b[i], b'.' | b',')
                            && b.get(i + 1).is_some_and(u8::is_ascii_digit)))
                {
                    i += 1;
                }
                return Some(&text[start..i]);
            }
            i += 1;
        }
        None
    })
}

/// The convention a token can only be read by, if any.
fn decisive(tok: &str) -> Option<Style> {
    let dots = tok.matches('.').count();
    let commas = tok.matches(',').count();
    match (dots, commas) {
        (0, 0) => None,
        (d, c) if d > 0 && c > 0 => {
            if tok.rfind('.') > tok.rfind(',') {
                Some(Style::DecimalDot)
            } else {
                Some(Style::DecimalComma)
            }
        }
        (d, 0) if d > 1 => Some(Style::DecimalComma),
        (0, c) if c > 1 => Some(Style::DecimalDot),
        (1, 0) => (digits_after(tok, '.') != 3).then_some(Style::DecimalDot),
        (0, 1) => (digits_after(tok, ',') != 3).then_some(Style::DecimalComma),
        _ => None,
    }
}

fn digits_after(tok: &str, sep: char) -> usize {
    tok.rsplit(sep).next().map_or(0, str::len)
}

/// A token's value under `style`; `Err` with both readings when the style cannot decide.
pub fn parse_token(tok: &str, style: Style) -> Result<f64, (f64, f64)> {
    let plain = |s: &str| s.parse::<f64>().unwrap_or(f64::NAN);
    let strip = |s: &str, thousands: char, decimal: char| {
        plain(&s.replace(thousands, "").replace(decimal, "."))
    };
    let dots = tok.matches('.').count();
    let commas = tok.matches(',').count();
    match (dots, commas) {
        (0, 0) => Ok(plain(tok)),
        (d, c) if d > 0 && c > 0 => Ok(if tok.rfind('.') > tok.rfind(',') {
            strip(tok, ',', '.')
        } else {
            strip(tok, '.', ',')
        }),
        (d, 0) if d > 1 => Ok(strip(tok, '.', ',')),
        (0, c) if c > 1 => Ok(strip(tok, ',', '.')),
        (1, 0) | (0, 1) => {
            let sep = if dots == 1 { '.' } else { ',' };
            let as_decimal = plain(&tok.replace(sep, "."));
            let as_thousands = plain(&tok.replace(sep, ""));
            let lead = tok.split(sep).next().unwrap_or("");
            if digits_after(tok, sep) != 3 || lead == "0" {
                return Ok(as_decimal);
            }
            // One separator before exactly three digits: the convention decides.
            match (style, sep) {
                (Style::DecimalDot, ',') | (Style::DecimalComma, '.') => Ok(as_thousands),
                _ => Err((as_decimal, as_thousands)),
            }
        }
        _ => Ok(f64::NAN),
    }
}

/// A number in a sentence.
#[derive(Clone, Debug, PartialEq)]
pub struct Mention {
    /// Its value with scale and range applied (a range's midpoint); a percentage as written (35).
    pub value: f64,
    /// Start and end (bytes) of its text in the sentence, scale word and `%` included.
    pub span: (usize, usize),
    /// Written as a percentage.
    pub percent: bool,
    /// The scale word and its factor (`million`, 1e6).
    pub scale: Option<(String, f64)>,
    /// Both ends of a range (`between 30% and 40%`, `2–3 million`), scaled.
    pub range: Option<(f64, f64)>,
    /// The two readings when the separator convention cannot decide (`1,234` in a comma-decimal
    /// text).
    pub ambiguous: Option<(f64, f64)>,
    /// Digits only, 1900–2100: possibly a year.
    pub year_like: bool,
}

fn scale_of(word: &str) -> Option<f64> {
    match word
        .trim_end_matches(['.', ',', ';', ':'])
        .to_lowercase()
        .as_str()
    {
        "thousand" | "k" | "tsd" | "tausend" => Some(1e3),
        "million" | "millions" | "m" | "mn" | "mio" | "millionen" | "millones" => Some(1e6),
        "billion" | "billions" | "bn" | "b" | "mrd" | "milliarden" | "milliards" => Some(1e9),
        _ => None,
    }
}

const PERCENT_WORDS: &[&str] = &["percent", "pct", "prozent", "procent", "per", "por", "pour"];

/// Every number in `sentence`, read by `style`.
pub fn mentions(sentence: &str, style: Style) -> Vec<Mention> {
    let b = sentence.as_bytes();
    let mut out: Vec<Mention> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        // A number starts after a non-word character, or right after a lone `R` (`R450`, rand).
        let glued_rand = i > 0 && b[i - 1] == b'R' && (i == 1 || !b[i - 2].is_ascii_alphanumeric());
        let starts = b[i].is_ascii_digit()
            && (i == 0
                || glued_rand
                || !(b[i - 1].is_ascii_alphanumeric() || matches!(b[i - 1], b'.' | b',')));
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len()
            && (b[i].is_ascii_digit()
                || (matches!(b[i], b'.' | b',') && b.get(i + 1).is_some_and(u8::is_ascii_digit)))
        {
            i += 1;
        }
        let tok = &sentence[start..i];
        let (mut value, mut ambiguous) = match parse_token(tok, style) {
            Ok(v) => (v, None),
            Err((a, b)) => (a, Some((a, b))),
        };
        if !value.is_finite() {
            continue;
        }
        let mut end = i;
        let rest = &sentence[i..];
        let trimmed = rest.trim_start();
        let gap = rest.len() - trimmed.len();
        let word: String = trimmed
            .chars()
            .take_while(|c| c.is_alphabetic() || *c == '.')
            .collect();
        let glued: String = rest.chars().take_while(|c| c.is_alphabetic()).collect();
        let mut percent = false;
        let mut scale = None;
        if trimmed.starts_with('%') {
            percent = true;
            end = i + gap + 1;
        } else if PERCENT_WORDS.contains(&word.trim_end_matches('.').to_lowercase().as_str()) {
            let w = word.trim_end_matches('.');
            let after = trimmed[w.len()..].trim_start();
            // `per cent`, `pour cent`, `por ciento`; a bare `per` is a rate, not a percentage.
            let cent = ["cent", "ciento"]
                .iter()
                .find(|c| after.to_lowercase().starts_with(*c));
            match (w.to_lowercase().as_str(), cent) {
                ("percent" | "pct" | "prozent" | "procent", _) => {
                    percent = true;
                    end = i + gap + w.len();
                }
                (_, Some(c)) => {
                    percent = true;
                    end = sentence.len() - after.len() + c.len();
                }
                _ => {}
            }
        } else if let Some(f) = (!glued.is_empty()).then(|| scale_of(&glued)).flatten() {
            scale = Some((glued.clone(), f));
            end = i + glued.len();
        } else if let Some(f) = scale_of(&word) {
            let w = word.trim_end_matches(['.', ',']);
            scale = Some((w.to_string(), f));
            end = i + gap + w.len();
        }
        if let Some((_, f)) = &scale {
            value *= f;
            ambiguous = ambiguous.map(|(a, b)| (a * f, b * f));
        }
        let year_like = !tok.contains(['.', ','])
            && scale.is_none()
            && !percent
            && (1900.0..=2100.0).contains(&value)
            && tok.len() == 4;
        out.push(Mention {
            value,
            span: (start, end),
            percent,
            scale,
            range: None,
            ambiguous,
            year_like,
        });
        i = end.max(i);
    }
    join_ranges(sentence, out)
}

/// Joins `30` and `40%` in `30–40%`, `between 30% and 40%`, `from 2 to 3 million` into one
/// mention of their midpoint; the first end takes the second's scale and percent sign when it
/// has none of its own.
fn join_ranges(sentence: &str, ms: Vec<Mention>) -> Vec<Mention> {
    let mut out: Vec<Mention> = Vec::new();
    let mut it = ms.into_iter().peekable();
    while let Some(a) = it.next() {
        let lead_word = {
            let before = sentence[..a.span.0].trim_end();
            let w = before.rsplit(char::is_whitespace).next().unwrap_or("");
            matches!(
                w.to_lowercase().as_str(),
                "between" | "from" | "zwischen" | "entre"
            )
            .then(|| before.len() - w.len())
        };
        let joined = it.peek().map(|b| {
            let between = sentence[a.span.1..b.span.0].trim().to_lowercase();
            let before = sentence[..a.span.0].trim_end().to_lowercase();
            let dash = matches!(between.as_str(), "-" | "–" | "—");
            let worded = (between == "and" && before.ends_with("between"))
                || (between == "to" && (before.ends_with("from") || a.scale.is_none()))
                || (between == "bis" && before.ends_with("zwischen"))
                || (between == "und" && before.ends_with("zwischen"))
                || (between == "et" && before.ends_with("entre"))
                || (between == "y" && before.ends_with("entre"));
            (!a.year_like || !b.year_like)
                && (dash || worded)
                && a.ambiguous.is_none()
                && b.ambiguous.is_none()
        });
        if joined == Some(true) {
            let b = it.next().expect("peeked");
            let mut lo = a.value;
            if a.scale.is_none() {
                if let Some((_, f)) = &b.scale {
                    lo *= f;
                }
            }
            let percent = a.percent || b.percent;
            // The span keeps the word that makes it a range (`between 30% and 40%`).
            let worded = !matches!(sentence[a.span.1..b.span.0].trim(), "-" | "–" | "—");
            let start = lead_word.filter(|_| worded).unwrap_or(a.span.0);
            out.push(Mention {
                value: (lo + b.value) / 2.0,
                span: (start, b.span.1),
                percent,
                scale: b.scale.clone().or(a.scale.clone()),
                range: Some((lo, b.value)),
                ambiguous: None,
                year_like: false,
            });
        } else {
            out.push(a);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(s: &str, style: Style) -> Vec<f64> {
        mentions(s, style).into_iter().map(|m| m.value).collect()
    }

    #[test]
    fn the_convention_decides_one_separator_before_three_digits() {
        assert_eq!(parse_token("72.000", Style::DecimalComma), Ok(72_000.0));
        assert_eq!(parse_token("1.234,5", Style::Unknown), Ok(1_234.5));
        assert_eq!(parse_token("1,234.5", Style::Unknown), Ok(1_234.5));
        assert_eq!(parse_token("12,5", Style::Unknown), Ok(12.5));
        assert_eq!(parse_token("1.234.567", Style::Unknown), Ok(1_234_567.0));
        assert_eq!(parse_token("100,000", Style::DecimalDot), Ok(100_000.0));
        assert_eq!(
            parse_token("1,234", Style::DecimalComma),
            Err((1.234, 1234.0))
        );
        assert_eq!(parse_token("72.000", Style::Unknown), Err((72.0, 72_000.0)));
        assert_eq!(parse_token("0,125", Style::DecimalDot), Ok(0.125));
    }

    #[test]
    fn a_document_says_its_convention_by_its_numbers_or_its_words() {
        assert_eq!(style_of("Es gibt 1.234,5 Praxen."), Style::DecimalComma);
        assert_eq!(
            style_of("Der Preis liegt bei 72.000 Euro und mehr."),
            Style::DecimalComma
        );
        assert_eq!(
            style_of("The region has 5.2 million residents."),
            Style::DecimalDot
        );
        assert_eq!(style_of("The price is 72.000 per unit."), Style::DecimalDot);
        assert_eq!(style_of("72.000"), Style::Unknown);
    }

    #[test]
    fn scales_percentages_and_ranges() {
        assert_eq!(values("About 2.3k clinics.", Style::DecimalDot), [2_300.0]);
        assert_eq!(
            values("Some 1.4 million people.", Style::DecimalDot),
            [1_400_000.0]
        );
        assert_eq!(
            values("Rund 1,2 Mio. Einwohner.", Style::DecimalComma),
            [1_200_000.0]
        );
        let m = &mentions("Between 30% and 40% of clinics.", Style::DecimalDot)[0];
        assert_eq!(
            (m.value, m.range, m.percent),
            (35.0, Some((30.0, 40.0)), true)
        );
        let m = &mentions("It costs 2–3 million EUR.", Style::DecimalDot)[0];
        assert_eq!(m.range, Some((2e6, 3e6)));
        assert!(mentions("12,5 % der Praxen", Style::DecimalComma)[0].percent);
        assert!(mentions("35 per cent of them", Style::DecimalDot)[0].percent);
        assert!(!mentions("12 USD per seat", Style::DecimalDot)[0].percent);
        assert_eq!(values("It costs R450 a month.", Style::DecimalDot), [450.0]);
        assert!(values("Model XR450 ships.", Style::DecimalDot).is_empty());
        let s = "In 2015 there were 8,000; by 2023 9,400.";
        let ms = mentions(s, Style::DecimalDot);
        assert_eq!(ms.iter().filter(|m| m.year_like).count(), 2);
        for m in ms {
            assert!(s.get(m.span.0..m.span.1).is_some());
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_gives_finite_values_and_spans_inside_it(text in "\\PC{0,80}") {
            for style in [Style::DecimalDot, Style::DecimalComma, Style::Unknown] {
                for m in mentions(&text, style) {
                    proptest::prop_assert!(m.value.is_finite());
                    proptest::prop_assert!(text.get(m.span.0..m.span.1).is_some());
                }
            }
            let _ = style_of(&text);
        }
    }
}
