//! What a number in a sentence is about: the year and the region of its clause, the period and
//! the currency written with it, the nouns after it, and whether it is a denominator
//! (`per 100,000 people`). Also the exchange rates a corpus states (`1 USD = 0.92 EUR`).

use super::currency::{written, Written};
use super::scan::{mentions, style_of, Mention};
use crate::field::policy::offline_extract::stem;

/// A period a rate is given per.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    /// Per day.
    Day,
    /// Per week.
    Week,
    /// Per month.
    Month,
    /// Per quarter.
    Quarter,
    /// Per year.
    Year,
}

impl Period {
    /// How many fit in a year.
    pub fn per_year(self) -> f64 {
        match self {
            Period::Day => 365.0,
            Period::Week => 52.0,
            Period::Month => 12.0,
            Period::Quarter => 4.0,
            Period::Year => 1.0,
        }
    }

    /// Its name (`month`).
    pub fn name(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
            Period::Quarter => "quarter",
            Period::Year => "year",
        }
    }

    /// The period a unit like `currency/year` or `count/month` is per.
    pub fn of_unit(unit: &str) -> Option<Period> {
        let per = unit.rsplit_once('/')?.1.trim().to_lowercase();
        period_word(&per)
    }
}

fn period_word(w: &str) -> Option<Period> {
    Some(match w {
        "day" | "days" | "daily" | "tag" | "jour" | "día" | "dia" => Period::Day,
        "week" | "weeks" | "weekly" | "woche" | "semaine" | "semana" => Period::Week,
        "month" | "months" | "monthly" | "mo" | "monat" | "monatlich" | "mois" | "mes"
        | "månad" | "måned" | "mnd" => Period::Month,
        "quarter" | "quarterly" | "quartal" | "trimestre" => Period::Quarter,
        "year" | "years" | "yearly" | "annually" | "annual" | "annum" | "yr" | "jahr"
        | "jährlich" | "an" | "año" | "ano" | "år" => Period::Year,
        _ => return None,
    })
}

/// The context of one mention.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Context {
    /// The year of its clause.
    pub year: Option<i32>,
    /// The place its clause names (`in Sørland`).
    pub region: Option<String>,
    /// The period written after it (`per month`).
    pub period: Option<Period>,
    /// Where that period's words end.
    pub period_end: usize,
    /// Its currency as written: a code, sign or word one currency uses (`EUR`, `A$`), or a sign
    /// several share (`$`, `kr`), which [`super::currency::by_context`] reads.
    pub currency: Option<Written>,
    /// Where the currency written before it starts (the mention's start when none is).
    pub currency_start: usize,
    /// Where the currency written after it ends.
    pub currency_end: usize,
    /// The content nouns right after it, stemmed.
    pub nouns: Vec<String>,
    /// It follows `per` (`per 100,000 people`).
    pub denominator: bool,
}

const STOP: &[&str] = &[
    "the", "a", "an", "of", "in", "on", "at", "for", "to", "and", "or", "with", "that", "by", "is",
    "are", "was", "were", "each", "than", "more", "from", "as", "its", "their", "it", "be", "has",
    "have", "had", "this", "these", "those", "there", "on", "average", "about", "around", "some",
    "der", "die", "das", "und", "de", "la", "le", "les", "des", "el", "los",
];

const YEAR_BEFORE: &[&str] = &[
    "in", "by", "since", "until", "till", "of", "from", "for", "year", "jahr", "im", "seit", "bis",
    "en", "depuis", "desde", "to", "and", "between", "as",
];

const PLACE_BEFORE: &[&str] = &[
    "in",
    "for",
    "across",
    "within",
    "throughout",
    "neighbouring",
    "neighboring",
    "nearby",
    "im",
    "en",
    "dans",
    "i",
];

/// Capitalised words after `in` that are not places (German capitalises every noun).
const NOT_PLACES: &[&str] = &[
    "Jahr",
    "Jahre",
    "Region",
    "Land",
    "Stadt",
    "Summe",
    "Durchschnitt",
    "Zeit",
    "Monat",
    "Total",
    "Year",
    "Region",
    "Country",
    "State",
    "Area",
    "Total",
    "Practice",
    "Praxis",
];

const MONTHS: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Whether a year-like mention reads as a year (`in 2015`, `by 2023`, `(2019)`), not a count
/// (`2000 clinics`).
pub fn reads_as_year(sentence: &str, m: &Mention) -> bool {
    let before = sentence[..m.span.0].trim_end();
    let prev = before
        .rsplit(|c: char| c.is_whitespace())
        .next()
        .unwrap_or("")
        .to_lowercase();
    let after = sentence[m.span.1..].trim_start();
    let next: String = after.chars().take_while(|c| c.is_alphabetic()).collect();
    let noun_after = !next.is_empty() && !STOP.contains(&next.to_lowercase().as_str());
    (YEAR_BEFORE.contains(&prev.as_str()) || before.ends_with('(') || before.is_empty())
        && !noun_after
}

/// The clause of `sentence` around byte `at`: between `;`, `, ` (not a digit separator), and
/// the words `while`, `whereas`, `but`, `and`.
fn clause_bounds(sentence: &str, at: usize) -> (usize, usize) {
    let b = sentence.as_bytes();
    let mut cuts = vec![0];
    for (i, c) in sentence.char_indices() {
        let sep = c == ';' || (c == ',' && b.get(i + 1) == Some(&b' ')) || c == '—';
        if sep {
            cuts.push(i + c.len_utf8());
        }
    }
    for w in [
        " while ",
        " whereas ",
        " but ",
        " and ",
        " während ",
        " alors que ",
    ] {
        let mut from = 0;
        while let Some(p) = sentence[from..].find(w) {
            cuts.push(from + p + 1);
            from += p + w.len();
        }
    }
    cuts.push(sentence.len());
    cuts.sort_unstable();
    let start = cuts.iter().copied().filter(|c| *c <= at).max().unwrap_or(0);
    let end = cuts
        .iter()
        .copied()
        .find(|c| *c > at)
        .unwrap_or(sentence.len());
    (start, end)
}

/// The context of mention `m` in `sentence`; `years` are the year mentions, as (offset, year).
pub fn of(sentence: &str, m: &Mention, years: &[(usize, i32)]) -> Context {
    let (c0, c1) = clause_bounds(sentence, m.span.0);
    let year = years
        .iter()
        .filter(|(at, _)| (c0..c1).contains(at))
        .min_by_key(|(at, _)| at.abs_diff(m.span.0))
        .map(|(_, y)| *y);
    let before = sentence[..m.span.0].trim_end();
    let prev_word = before
        .rsplit(|c: char| c.is_whitespace())
        .next()
        .unwrap_or("");
    let mut ctx = Context {
        year,
        region: region_in(sentence, c0, c1),
        currency_start: m.span.0,
        currency_end: m.span.1,
        denominator: prev_word.eq_ignore_ascii_case("per") || before.ends_with('/'),
        ..Context::default()
    };
    // A currency before the number: `$12`, `€ 12`, `EUR 1,440`.
    if let Some(w) =
        written(prev_word).or_else(|| before.chars().last().and_then(|c| written(&c.to_string())))
    {
        ctx.currency = Some(w);
        let len = if written(prev_word).is_some() {
            prev_word.len()
        } else {
            before.chars().last().map_or(0, char::len_utf8)
        };
        ctx.currency_start = before.len() - len;
    }
    // After it: currency, nouns, period — up to the next number or the clause's end.
    let next_number = mentions(&sentence[m.span.1..], style_of(sentence))
        .first()
        .map_or(sentence.len(), |n| m.span.1 + n.span.0);
    let stop = c1.min(next_number).max(m.span.1);
    let tail = &sentence[m.span.1..stop];
    let mut pos = m.span.1;
    let mut words = 0;
    let mut after_per = false;
    for raw in tail.split_inclusive(char::is_whitespace) {
        let start = pos;
        pos += raw.len();
        let w = raw.trim();
        let bare = w.trim_matches(|c: char| !c.is_alphanumeric());
        if bare.is_empty() {
            continue;
        }
        words += 1;
        if words > 7 {
            break;
        }
        let lower = bare.to_lowercase();
        // Where the word itself ends (not the punctuation after it).
        let word_end = start
            + raw
                .find(bare)
                .map_or(raw.trim_end().len(), |at| at + bare.len());
        if ctx.currency.is_none() && words <= 2 {
            if let Some(w) = written(bare) {
                ctx.currency = Some(w);
                ctx.currency_end = word_end;
                continue;
            }
        }
        let slash = w
            .split_once('/')
            .map(|(_, p)| p.trim_matches(|c: char| !c.is_alphabetic()).to_lowercase());
        let period = slash.as_deref().and_then(period_word).or_else(|| {
            (after_per
                || matches!(
                    lower.as_str(),
                    "monthly"
                        | "yearly"
                        | "annually"
                        | "weekly"
                        | "daily"
                        | "quarterly"
                        | "jährlich"
                        | "monatlich"
                ))
            .then(|| period_word(&lower))
            .flatten()
        });
        if ctx.period.is_none() {
            if let Some(p) = period {
                ctx.period = Some(p);
                ctx.period_end = word_end;
                continue;
            }
        }
        after_per = matches!(
            lower.as_str(),
            "per" | "a" | "an" | "each" | "every" | "pro" | "im" | "par" | "al" | "por" | "p"
        );
        if after_per || STOP.contains(&lower.as_str()) || lower.chars().all(|c| c.is_numeric()) {
            continue;
        }
        if ctx.nouns.len() < 2 && bare.chars().all(char::is_alphabetic) && words <= 3 {
            ctx.nouns.push(stem(&lower));
        }
    }
    // `The monthly fee is 95 EUR`: a period adjective earlier in the clause.
    if ctx.period.is_none() {
        ctx.period = sentence[c0..m.span.0]
            .split(|c: char| !c.is_alphabetic())
            .map(str::to_lowercase)
            .filter(|w| {
                matches!(
                    w.as_str(),
                    "monthly"
                        | "yearly"
                        | "annual"
                        | "weekly"
                        | "daily"
                        | "quarterly"
                        | "jährlich"
                        | "monatlich"
                )
            })
            .find_map(|w| period_word(&w));
    }
    ctx
}

/// A place the clause `[c0, c1)` names: a capitalised word after `in`, `for`, `across`, … (or
/// the sentence's subject when it is followed by `had`, `has`, `counts`, …).
fn region_in(sentence: &str, c0: usize, c1: usize) -> Option<String> {
    let clause = &sentence[c0..c1];
    let words: Vec<&str> = clause.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        let bare = w.trim_matches(|c: char| !c.is_alphanumeric());
        let capital = bare.chars().next().is_some_and(char::is_uppercase)
            && bare.chars().skip(1).any(char::is_lowercase)
            && !MONTHS.contains(&bare)
            && !NOT_PLACES.contains(&bare);
        if !capital {
            continue;
        }
        let prev = i
            .checked_sub(1)
            .map(|p| words[p].to_lowercase())
            .unwrap_or_default();
        let subject = c0 == 0
            && i == 0
            && words.get(1).is_some_and(|n| {
                matches!(
                    n.to_lowercase().as_str(),
                    "had"
                        | "has"
                        | "counts"
                        | "counted"
                        | "reported"
                        | "recorded"
                        | "hat"
                        | "zählt"
                )
            });
        if PLACE_BEFORE.contains(&prev.as_str()) || subject {
            return Some(bare.to_string());
        }
    }
    None
}

/// Exchange rates the documents state (`1 USD = 0.92 EUR`, `1 USD is worth 0.92 EUR`, `one
/// euro buys 1.08 USD`), both ways: (from, to, rate, document id).
pub fn rates<'a>(
    docs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<(String, String, f64, String)> {
    let mut out = Vec::new();
    for (id, text) in docs {
        let style = style_of(text);
        let words: Vec<&str> = text.split_whitespace().collect();
        for i in 0..words.len() {
            let one = matches!(words[i].to_lowercase().as_str(), "1" | "one");
            let known = |w: &str| match written(w) {
                Some(Written::Known(code)) => Some(code),
                _ => None,
            };
            let Some(from) = words.get(i + 1).and_then(|w| known(w)) else {
                continue;
            };
            if !one {
                continue;
            }
            // `= 0.92 EUR`, `is worth 0.92 EUR`, `buys 0.92 EUR`, `equals 0.92 EUR`
            let rest: Vec<&str> = words[i + 2..].iter().take(4).copied().collect();
            let Some(k) = rest
                .iter()
                .position(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
            else {
                continue;
            };
            let verb = rest[..k].join(" ").to_lowercase();
            if !matches!(
                verb.as_str(),
                "=" | "is" | "is worth" | "equals" | "buys" | "was" | "costs" | "traded at"
            ) {
                continue;
            }
            let Some(to) = rest.get(k + 1).and_then(|w| known(w)) else {
                continue;
            };
            let Some(rate) = mentions(rest[k], style).first().map(|m| m.value) else {
                continue;
            };
            if rate > 0.0 && from != to {
                out.push((from.to_string(), to.to_string(), rate, id.to_string()));
                out.push((to.to_string(), from.to_string(), 1.0 / rate, id.to_string()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::scan::Style;
    use super::*;

    fn ctx(s: &str, nth: usize) -> Context {
        let ms = mentions(s, Style::DecimalDot);
        let years: Vec<(usize, i32)> = ms
            .iter()
            .filter(|m| m.year_like && reads_as_year(s, m))
            .map(|m| (m.span.0, m.value as i32))
            .collect();
        let m = ms
            .iter()
            .filter(|m| !years.iter().any(|(at, _)| *at == m.span.0))
            .nth(nth)
            .unwrap();
        of(s, m, &years)
    }

    #[test]
    fn years_regions_periods_and_currencies_are_tied_to_their_numbers() {
        let s = "In 2015 the region had 8,000 dentists; by 2023 there were 9,400.";
        assert_eq!(ctx(s, 0).year, Some(2015));
        assert_eq!(ctx(s, 1).year, Some(2023));
        assert_eq!(ctx(s, 0).nouns, ["dentist"]);
        let s = "It costs 12 USD per seat per month.";
        let c = ctx(s, 0);
        assert_eq!(
            (c.currency, c.period),
            (Some(Written::Known("USD")), Some(Period::Month))
        );
        let s = "Nordland had 5.2 million residents, while in Sørland there were 3.1 million.";
        assert_eq!(ctx(s, 0).region.as_deref(), Some("Nordland"));
        assert_eq!(ctx(s, 1).region.as_deref(), Some("Sørland"));
        assert!(ctx("There are 62 dentists per 100,000 people.", 1).denominator);
        assert_eq!(
            ctx("A licence is €1,440 a year.", 0).currency,
            Some(Written::Known("EUR"))
        );
        assert_eq!(
            ctx("Owners pay $610 per year.", 0).currency,
            Some(Written::Shared("$"))
        );
        assert_eq!(
            ctx("Owners pay R450 a month.", 0).currency,
            Some(Written::Shared("R"))
        );
        let c = ctx("Hundeforsikring koster 350 kr per måned.", 0);
        assert_eq!(
            (c.currency, c.period),
            (Some(Written::Shared("kr")), Some(Period::Month))
        );
        assert_eq!(Period::of_unit("currency/year"), Some(Period::Year));
    }

    #[test]
    fn stated_exchange_rates_are_read_both_ways() {
        let r = rates([("fx-1", "At the time, 1 USD = 0.92 EUR on average.")]);
        assert_eq!(r[0], ("USD".into(), "EUR".into(), 0.92, "fx-1".into()));
        assert_eq!(r[1].0, "EUR");
        assert!(rates([("x", "We sold 1 USD coin.")]).is_empty());
    }
}
