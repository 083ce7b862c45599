//! Which currency a figure is in. A code (`AUD`) or a sign only one currency writes (`A$`, `R$`,
//! `€`) says it outright. `$`, `kr`, `£`, `¥` and `R` are shared by several currencies, and a
//! reader takes them by context, as [`by_context`] does: first the note's own words — a currency
//! it names anywhere (`All prices are in New Zealand dollars.`), then the places the quote names,
//! then the places the rest of the note names, then the note's language — and only when the note
//! says nothing, what the person gave (their currency, their region) and the schema's own words.
//! The answer is the currency with the words that settled it, or the currencies it could be (the
//! planner then asks). It is a pure function of its [`Setting`], so it is tested on its own.

use serde::{Deserialize, Serialize};

/// How a currency is written beside a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// A code, sign or name only one currency uses (`AUD`, `A$`, `R$`, `€`, `kronor`).
    Known(&'static str),
    /// A sign or name several currencies share, by its family's sign (`$`, `kr`, `£`, `¥`, `R`).
    Shared(&'static str),
}

/// The currencies sharing each sign, the most widely quoted first.
const FAMILIES: &[(&str, &[&str])] = &[
    ("$", &["USD", "AUD", "NZD", "CAD", "SGD", "HKD", "MXN"]),
    ("kr", &["SEK", "NOK", "DKK", "ISK"]),
    ("£", &["GBP", "EGP"]),
    ("¥", &["JPY", "CNY"]),
    ("R", &["ZAR"]),
];

/// ISO codes read as written (upper case only: `Aud` is not a code).
const CODES: &[&str] = &[
    "EUR", "USD", "GBP", "CHF", "JPY", "NOK", "SEK", "DKK", "ISK", "CAD", "AUD", "NZD", "SGD",
    "HKD", "CNY", "INR", "PLN", "CZK", "BRL", "MXN", "ZAR", "EGP",
];

/// Places, their people and a few of their cities and native names, by currency. A name is
/// matched as a whole word, with an optional plural `s`.
const PLACES: &[(&str, &[&str])] = &[
    (
        "USD",
        &["United States", "U.S.", "US", "USA", "America", "American"],
    ),
    ("AUD", &["Australia", "Australian", "Sydney", "Melbourne"]),
    ("NZD", &["New Zealand", "New Zealander", "Auckland", "Kiwi"]),
    ("CAD", &["Canada", "Canadian", "Toronto"]),
    ("SGD", &["Singapore", "Singaporean"]),
    ("HKD", &["Hong Kong"]),
    ("MXN", &["Mexico", "Mexican"]),
    (
        "SEK",
        &[
            "Sweden",
            "Swedish",
            "Swede",
            "Sverige",
            "svenska",
            "Stockholm",
        ],
    ),
    (
        "NOK",
        &["Norway", "Norwegian", "Norge", "norske", "norsk", "Oslo"],
    ),
    (
        "DKK",
        &[
            "Denmark",
            "Danish",
            "Dane",
            "Danmark",
            "danske",
            "dansk",
            "Copenhagen",
            "København",
        ],
    ),
    ("ISK", &["Iceland", "Icelandic", "Reykjavik"]),
    (
        "GBP",
        &[
            "United Kingdom",
            "UK",
            "U.K.",
            "Britain",
            "British",
            "England",
            "Scotland",
            "Wales",
            "London",
        ],
    ),
    ("EGP", &["Egypt", "Egyptian", "Cairo"]),
    ("JPY", &["Japan", "Japanese", "Tokyo"]),
    ("CNY", &["China", "Chinese", "Beijing", "Shanghai"]),
    (
        "ZAR",
        &["South Africa", "South African", "Johannesburg", "Cape Town"],
    ),
];

/// Words that make `American` another continent's (`Latin American`).
const NOT_US: &[&str] = &["Latin", "South", "Central", "North"];

/// Words only one Nordic language uses often, by the currency its `kr` means.
const LANGUAGES: &[(&str, &str, &[&str])] = &[
    (
        "SEK",
        "Swedish",
        &["och", "inte", "kostar", "genomsnitt", "ungefär"],
    ),
    (
        "NOK",
        "Norwegian",
        &["gjennomsnitt", "etter", "mellom", "rundt", "ikkje"],
    ),
    (
        "DKK",
        "Danish",
        &["gennemsnit", "efter", "mellem", "omkring"],
    ),
];

/// Reads a token as a currency: `AUD`, `A$`, `$`, `kr.`, `kronor`, `dollars`, `R`.
pub fn written(token: &str) -> Option<Written> {
    let t = token.trim_matches(|c: char| !c.is_alphanumeric() && !"$€£¥".contains(c));
    if let Some(code) = CODES.iter().find(|c| **c == t) {
        return Some(Written::Known(code));
    }
    let known = match t {
        "US$" | "USD$" => Some("USD"),
        "A$" | "AU$" | "AUD$" => Some("AUD"),
        "NZ$" => Some("NZD"),
        "S$" | "SG$" => Some("SGD"),
        "C$" | "CA$" | "CAD$" => Some("CAD"),
        "HK$" => Some("HKD"),
        "R$" => Some("BRL"),
        "MX$" => Some("MXN"),
        "€" => Some("EUR"),
        "R" => return Some(Written::Shared("R")),
        _ => None,
    };
    if let Some(code) = known {
        return Some(Written::Known(code));
    }
    Some(match t.to_lowercase().as_str() {
        "euro" | "euros" => Written::Known("EUR"),
        "yen" => Written::Known("JPY"),
        "yuan" | "rmb" | "renminbi" => Written::Known("CNY"),
        "rand" => Written::Known("ZAR"),
        "reais" => Written::Known("BRL"),
        "kronor" | "krona" => Written::Known("SEK"),
        "kr" | "kroner" | "krone" => Written::Shared("kr"),
        "$" | "dollar" | "dollars" => Written::Shared("$"),
        "£" | "pound" | "pounds" => Written::Shared("£"),
        "¥" => Written::Shared("¥"),
        _ => return None,
    })
}

/// The currencies a shared sign can be (empty for a sign that is not shared).
pub fn members(sign: &str) -> &'static [&'static str] {
    FAMILIES
        .iter()
        .find(|(s, _)| *s == sign)
        .map_or(&[], |(_, m)| m)
}

/// What can settle a shared sign.
#[derive(Clone, Copy, Debug, Default)]
pub struct Setting<'a> {
    /// The sentence the figure is in.
    pub quote: &'a str,
    /// The whole note (document, with its title) the sentence is in.
    pub note: &'a str,
    /// The currency the person gave (`AUD`, or words such as `Australian dollars`).
    pub currency: Option<&'a str>,
    /// The region the person gave.
    pub region: Option<&'a str>,
    /// The schema's own words (its name, the goal, the field's description).
    pub schema: &'a str,
}

/// Where the words that settled a currency are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// A currency the note names (`in New Zealand dollars`, `AUD`).
    NamedInNote,
    /// A place the quote names.
    Quote,
    /// A place another sentence of the note names.
    Note,
    /// The note's language (`kr` in a Swedish text).
    Language,
    /// The currency the person gave.
    YourCurrency,
    /// The region the person gave.
    YourRegion,
    /// The schema's words.
    Schema,
}

impl Basis {
    /// How it reads in a sentence (`the quote says`).
    pub fn describe(self) -> &'static str {
        match self {
            Basis::NamedInNote => "the note names the currency",
            Basis::Quote => "the quote says",
            Basis::Note => "the note says",
            Basis::Language => "the note is written in",
            Basis::YourCurrency => "your currency is",
            Basis::YourRegion => "your region is",
            Basis::Schema => "the schema says",
        }
    }
}

/// What the context makes of a shared sign.
#[derive(Clone, Debug, PartialEq)]
pub enum ByContext {
    /// One currency, with the words that settled it and where they are.
    Settled {
        /// The currency (`AUD`).
        currency: String,
        /// The words (`Australian`).
        words: String,
        /// Where they are.
        basis: Basis,
    },
    /// Nothing settles it: the currencies it could be, the likeliest first, and why.
    Open {
        /// The currencies to offer.
        options: Vec<String>,
        /// Why the context does not settle it.
        why: String,
    },
}

/// Whole-word occurrences (a plural `s` allowed) of the places of `members` in `text`, in order:
/// (currency, the words as written).
fn places_in(text: &str, members: &[&str]) -> Vec<(usize, &'static str, String)> {
    let mut out = Vec::new();
    for (code, names) in PLACES.iter().filter(|(c, _)| members.contains(c)) {
        for name in *names {
            let mut from = 0;
            while let Some(p) = text[from..].find(name) {
                let at = from + p;
                from = at + name.len();
                let before_ok = text[..at]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !c.is_alphanumeric());
                let mut end = at + name.len();
                if text[end..].starts_with('s') {
                    end += 1;
                }
                let after_ok = text[end..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_alphanumeric());
                let not_us = *name == "American"
                    && text[..at]
                        .split_whitespace()
                        .next_back()
                        .is_some_and(|w| NOT_US.contains(&w));
                if before_ok && after_ok && !not_us {
                    out.push((at, *code, text[at..end].to_string()));
                }
            }
        }
    }
    out.sort_by_key(|(at, _, _)| *at);
    out
}

/// Currencies of `members` the text names: a code or a sign of one (`AUD`, `A$`), or a place's
/// currency word (`New Zealand dollars`, `Swedish kronor`). (currency, the words as written).
fn named_in(text: &str, members: &[&str]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for w in text.split_whitespace() {
        if let Some(Written::Known(code)) = written(w) {
            if members.contains(&code) {
                let bare = w.trim_matches(|c: char| !c.is_alphanumeric() && !"$€£¥".contains(c));
                out.push((code, bare.to_string()));
            }
        }
    }
    for (at, code, name) in places_in(text, members) {
        let rest = &text[at + name.len()..];
        let next: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphabetic())
            .collect();
        let currency_word = matches!(
            next.to_lowercase().as_str(),
            "dollar" | "dollars" | "krona" | "kronor" | "krone" | "kroner" | "pound" | "pounds"
        );
        if currency_word && !rest.starts_with(|c: char| !c.is_whitespace()) {
            let end = at + name.len() + (rest.len() - rest.trim_start().len()) + next.len();
            out.push((code, text[at..end].to_string()));
        }
    }
    out
}

/// Every currency `text` names in words or as a code (`Australian dollars`, `AUD`, `kronor`).
pub fn named(text: &str) -> Vec<&'static str> {
    let all: Vec<&str> = CODES.to_vec();
    distinct(&named_in(text, &all))
}

/// The distinct currencies in `found`, in order of appearance.
fn distinct<T>(found: &[(&'static str, T)]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (c, _) in found {
        if !out.contains(c) {
            out.push(c);
        }
    }
    out
}

/// The person's currency as a code: a code as given, or the one currency their words name.
fn code_of(text: &str) -> Option<String> {
    let t = text.trim();
    if t.len() == 3 && t.chars().all(|c| c.is_ascii_alphabetic()) {
        return Some(t.to_uppercase());
    }
    let all: Vec<&str> = FAMILIES
        .iter()
        .flat_map(|(_, m)| m.iter().copied())
        .collect();
    match distinct(&named_in(t, &all)).as_slice() {
        [one] => Some(one.to_string()),
        _ => None,
    }
}

/// Reads the shared sign `sign` (`$`, `kr`, `£`, `¥`, `R`) by its setting.
pub fn by_context(sign: &str, s: &Setting) -> ByContext {
    let members = members(sign);
    let settled = |currency: &str, words: String, basis: Basis| ByContext::Settled {
        currency: currency.to_string(),
        words,
        basis,
    };
    let several = |codes: &[&str], words: &str| ByContext::Open {
        options: codes.iter().map(|c| c.to_string()).collect(),
        why: format!("`{sign}` could be {} ({words})", codes.join(" or ")),
    };
    // 1. A currency of the family the note names anywhere.
    let named = named_in(s.note, members);
    match distinct(&named).as_slice() {
        [one] => {
            let words = named.iter().find(|(c, _)| c == one).map(|(_, w)| w.clone());
            return settled(one, words.unwrap_or_default(), Basis::NamedInNote);
        }
        [] => {}
        many => return several(many, "the note names each"),
    }
    // 2. The places the quote names, then those of the rest of the note.
    for (text, basis) in [(s.quote, Basis::Quote), (s.note, Basis::Note)] {
        let found: Vec<(&'static str, String)> = places_in(text, members)
            .into_iter()
            .map(|(_, c, w)| (c, w))
            .collect();
        match distinct(&found).as_slice() {
            [one] => return settled(one, found[0].1.clone(), basis),
            [] => {}
            many => {
                let words: Vec<&str> = found.iter().map(|(_, w)| w.as_str()).collect();
                return several(many, &format!("the note names {}", words.join(", ")));
            }
        }
    }
    // 3. The note's language (for `kr`).
    let words: Vec<String> = s
        .note
        .split(|c: char| !c.is_alphabetic())
        .map(str::to_lowercase)
        .collect();
    let languages: Vec<(&'static str, String)> = LANGUAGES
        .iter()
        .filter(|(code, _, _)| members.contains(code))
        .filter_map(|(code, name, markers)| {
            let hits: Vec<&str> = markers
                .iter()
                .copied()
                .filter(|m| words.iter().any(|w| w == m))
                .collect();
            (!hits.is_empty()).then(|| (*code, format!("{name} ({})", hits.join(", "))))
        })
        .collect();
    if let [(code, why)] = languages.as_slice() {
        return settled(code, why.clone(), Basis::Language);
    }
    // 4. What the person gave, and the schema's words: settled only when they agree.
    let mut person: Vec<(&'static str, String, Basis)> = Vec::new();
    for (text, basis) in [
        (s.region.unwrap_or(""), Basis::YourRegion),
        (s.schema, Basis::Schema),
    ] {
        for (_, code, w) in places_in(text, members) {
            person.push((code, w, basis));
        }
    }
    if let Some(code) = s.currency.and_then(code_of) {
        if let Some(m) = members.iter().find(|m| **m == code) {
            person.push((m, code.clone(), Basis::YourCurrency));
        }
    }
    let codes: Vec<&'static str> = {
        let mut out: Vec<&'static str> = Vec::new();
        for (c, _, _) in &person {
            if !out.contains(c) {
                out.push(c);
            }
        }
        out
    };
    match codes.as_slice() {
        [one] => {
            let (_, words, basis) = person[0].clone();
            settled(one, words, basis)
        }
        [] => ByContext::Open {
            options: members.iter().take(2).map(|m| m.to_string()).collect(),
            why: format!("the note does not say which currency its `{sign}` is"),
        },
        many => {
            let words: Vec<String> = person
                .iter()
                .map(|(c, w, b)| format!("{} {w} ({c})", b.describe()))
                .collect();
            ByContext::Open {
                options: many.iter().map(|c| c.to_string()).collect(),
                why: format!(
                    "the note does not say which currency its `{sign}` is, and {}",
                    words.join(" but ")
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(sign: &str, quote: &str, note: &str, currency: Option<&str>) -> ByContext {
        by_context(
            sign,
            &Setting {
                quote,
                note,
                currency,
                ..Setting::default()
            },
        )
    }

    fn currency(r: &ByContext) -> Option<(&str, &str, Basis)> {
        match r {
            ByContext::Settled {
                currency,
                words,
                basis,
            } => Some((currency.as_str(), words.as_str(), *basis)),
            ByContext::Open { .. } => None,
        }
    }

    #[test]
    fn signs_and_words_are_read_as_known_or_shared() {
        assert_eq!(written("AUD"), Some(Written::Known("AUD")));
        assert_eq!(written("A$"), Some(Written::Known("AUD")));
        assert_eq!(written("(US$"), Some(Written::Known("USD")));
        assert_eq!(written("R$"), Some(Written::Known("BRL")));
        assert_eq!(written("kronor"), Some(Written::Known("SEK")));
        assert_eq!(written("$"), Some(Written::Shared("$")));
        assert_eq!(written("dollars,"), Some(Written::Shared("$")));
        assert_eq!(written("kr."), Some(Written::Shared("kr")));
        assert_eq!(written("R"), Some(Written::Shared("R")));
        assert_eq!(written("r"), None);
        assert_eq!(written("Aud"), None);
        assert_eq!(written("dogs"), None);
    }

    #[test]
    fn the_notes_words_settle_a_shared_sign() {
        let q = "Australian pet owners paid on average $610 per year to insure a dog or cat.";
        assert_eq!(
            currency(&read("$", q, q, Some("USD"))),
            Some(("AUD", "Australian", Basis::Quote)),
            "the note's place wins over the person's currency"
        );
        let note =
            "All prices in this survey are in New Zealand dollars. A policy costs $38 a month.";
        let q = "A policy costs $38 a month.";
        assert_eq!(
            currency(&read("$", q, note, Some("AUD"))),
            Some(("NZD", "New Zealand dollars", Basis::NamedInNote))
        );
        let note = "Figures are quoted in AUD. The premium is $610 per year.";
        assert_eq!(
            currency(&read("$", "The premium is $610 per year.", note, None)),
            Some(("AUD", "AUD", Basis::NamedInNote))
        );
        let note = "The survey covered Sweden. Owners pay 3,400 kr per year.";
        assert_eq!(
            currency(&read("kr", "Owners pay 3,400 kr per year.", note, None)),
            Some(("SEK", "Sweden", Basis::Note))
        );
        let q = "En hundförsäkring kostar i genomsnitt 3400 kr per år.";
        assert_eq!(
            currency(&read("kr", q, q, None)).map(|c| (c.0, c.2)),
            Some(("SEK", Basis::Language))
        );
        let q = "South African owners pay R450 a month.";
        assert_eq!(currency(&read("R", q, q, None)).map(|c| c.0), Some("ZAR"));
        let q = "Latin American owners pay $20 a month.";
        assert!(currency(&read("$", q, q, Some("EUR"))).is_none());
        let q = "Owners in the U.S. pay $56 a month.";
        assert_eq!(currency(&read("$", q, q, None)).map(|c| c.1), Some("U.S."));
    }

    #[test]
    fn without_the_notes_words_the_person_settles_it_only_when_their_words_agree() {
        let q = "The average premium is $600 per year.";
        assert_eq!(
            currency(&read("$", q, q, Some("USD"))),
            Some(("USD", "USD", Basis::YourCurrency))
        );
        assert_eq!(
            currency(&read("$", q, q, Some("Australian dollars"))).map(|c| c.0),
            Some("AUD")
        );
        let both = |currency, region| {
            by_context(
                "$",
                &Setting {
                    quote: q,
                    note: q,
                    currency: Some(currency),
                    region: Some(region),
                    schema: "",
                },
            )
        };
        assert_eq!(
            currency(&both("AUD", "Australia")).map(|c| c.0),
            Some("AUD")
        );
        match both("USD", "Australia") {
            ByContext::Open { options, why } => {
                assert_eq!(options, ["AUD", "USD"]);
                assert!(why.contains("Australia"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        match read("$", q, q, Some("EUR")) {
            ByContext::Open { options, .. } => assert_eq!(options, ["USD", "AUD"]),
            other => panic!("{other:?}"),
        }
        let schema = by_context(
            "$",
            &Setting {
                quote: q,
                note: q,
                schema: "pet-insurance in Australia",
                ..Setting::default()
            },
        );
        assert_eq!(currency(&schema), Some(("AUD", "Australia", Basis::Schema)));
    }

    #[test]
    fn a_note_naming_two_places_of_the_family_is_not_settled() {
        let q = "Owners in Australia and New Zealand pay $600 per year.";
        match read("$", q, q, Some("AUD")) {
            ByContext::Open { options, .. } => assert_eq!(options, ["AUD", "NZD"]),
            other => panic!("{other:?}"),
        }
    }

    proptest! {
        /// Whatever the text, a settled currency is one the sign can be and its words are in the
        /// setting; an open one offers at least one currency.
        #[test]
        fn any_setting_gives_a_member_or_options(
            note in "\\PC{0,120}",
            place in proptest::sample::select(vec!["", "Australia", "Sweden", "Denmark", "UK", "Japan", "South Africa", "United States"]),
            sign in proptest::sample::select(vec!["$", "kr", "£", "¥", "R"]),
            currency in proptest::option::of(proptest::sample::select(vec!["USD", "AUD", "SEK", "EUR", "GBP", "ZAR"])),
        ) {
            let note = format!("{note} {place}");
            let s = Setting { quote: &note, note: &note, currency, region: None, schema: "" };
            match by_context(sign, &s) {
                ByContext::Settled { currency: c, words, basis } => {
                    prop_assert!(members(sign).contains(&c.as_str()), "{c} for {sign}");
                    let in_setting = note.contains(&words) || s.currency.is_some_and(|x| x.contains(&words) || words.contains(x));
                    prop_assert!(in_setting || basis == Basis::Language, "{words:?}");
                }
                ByContext::Open { options, why } => {
                    prop_assert!(!options.is_empty());
                    prop_assert!(!why.is_empty());
                }
            }
        }
    }
}
