//! A figure found in a source that a person must settle before the planner takes it: several
//! readings the field cannot choose between, a shared currency sign the context does not settle,
//! or a figure in another currency with no rate. The planner asks **with what was found** — the
//! source, the quote, the value as read — so the person can answer in a word (`yes`, `AUD`,
//! `0.65`), and [`settle`] turns that answer into a reading whose conversions record it. Both are
//! pure functions, tested on their own.

use super::currency::{written, Written};
use super::{Conversion, FieldReading};
use crate::field::numbers::readings;
use crate::field::people::number;
use crate::field::schema::ValueType;
use serde::{Deserialize, Serialize};

/// What a person must settle about a figure beyond choosing among readings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Open {
    /// A shared sign (`$`, `kr`, `£`, `¥`, `R`) the context does not settle: which currency is it?
    Currency {
        /// The sign as written.
        sign: String,
        /// The currencies offered, the likeliest first (`yes` takes the first).
        options: Vec<String>,
    },
    /// The figure's currency is not the person's and no rate is known: what is the rate?
    Rate {
        /// The figure's currency.
        from: String,
        /// The person's currency.
        to: String,
    },
}

/// A figure found in a source that waits for a person: the source, the quote, the readings it
/// offers (the value as read), why the planner cannot take it alone, and what is open.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The document id.
    pub source_id: String,
    /// The sentence, verbatim.
    pub quote: String,
    /// The readings it offers (one when only the currency or the rate is open).
    pub candidates: Vec<FieldReading>,
    /// Why the planner cannot take it alone.
    pub why: String,
    /// The currency or the rate to settle, when that is what is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<Open>,
}

/// A reading as the question shows it: `1,290 ("1,290 dental clinics", …)`.
fn shown(r: &FieldReading) -> String {
    let how = r.describe();
    if how.is_empty() {
        format!("{} (\"{}\")", number(r.value), r.span)
    } else {
        format!("{} (\"{}\", {how})", number(r.value), r.span)
    }
}

impl Finding {
    /// The readings as a question lists them, joined by `or`.
    pub fn options(&self) -> String {
        self.candidates
            .iter()
            .map(shown)
            .collect::<Vec<_>>()
            .join(" or ")
    }

    /// The question about it, after `field_question` (the field's own question): the source, the
    /// quote, the figure as read, and what to answer.
    pub fn question(&self, field_question: &str) -> String {
        let said = format!("{} says \"{}\"", self.source_id, self.quote);
        let span = self
            .candidates
            .first()
            .map_or(String::new(), |r| r.span.clone());
        match &self.open {
            None => format!(
                "{field_question} — {said}, which could mean {}. Which is right?",
                self.options()
            ),
            Some(Open::Currency { options, .. }) => {
                let first = options.first().cloned().unwrap_or_default();
                let choices = match options.as_slice() {
                    [one] => one.clone(),
                    many => format!("{}, or something else", many.join(", ")),
                };
                format!(
                    "{field_question} — {said}: {span} — is that {choices}? (yes for {first}, or name the currency)"
                )
            }
            Some(Open::Rate { from, to }) => {
                let read = self
                    .candidates
                    .first()
                    .and_then(|r| {
                        r.conversions.iter().find_map(|c| match c {
                            Conversion::CurrencyByContext {
                                currency, words, ..
                            } => Some(format!(" (read as {currency}: \"{words}\")")),
                            _ => None,
                        })
                    })
                    .unwrap_or_default();
                format!(
                    "{field_question} — {said}: {span} in {from}{read}. How many {to} is 1 {from}? (give the rate, or the value itself followed by {to})"
                )
            }
        }
    }
}

/// What an answer to a finding's question does.
#[derive(Clone, Debug, PartialEq)]
pub enum Settlement {
    /// Take this reading of the source (its conversions record the answer).
    Take(FieldReading),
    /// The answer is the person's own value for the field: read it as any answer.
    Own,
    /// Ask again about this (the rate, once the currency is named; another currency after `no`).
    Ask(Finding),
    /// The answer cannot be used, and why.
    Unusable(String),
}

const YES: &[&str] = &[
    "yes", "y", "yep", "yeah", "correct", "right", "ja", "oui", "si", "sí",
];
const NO: &[&str] = &["no", "n", "nope", "nein", "non", "nej", "nei"];

/// The one currency an answer names (`AUD`, `aud`, `A$`, `Australian dollars`), if any.
fn currency_in(answer: &str) -> Option<String> {
    let mut found: Vec<&'static str> = Vec::new();
    for w in answer.split(|c: char| c.is_whitespace() || c == ',') {
        let t = w.trim_matches(|c: char| !c.is_alphanumeric() && !"$€£¥".contains(c));
        let code = match written(t) {
            Some(Written::Known(c)) => Some(c),
            _ if t.len() == 3 && t.chars().all(|c| c.is_ascii_alphabetic()) => {
                match written(&t.to_uppercase()) {
                    Some(Written::Known(c)) => Some(c),
                    _ => None,
                }
            }
            _ => None,
        };
        found.extend(code);
    }
    found.extend(super::currency::named(answer));
    found.sort_unstable();
    found.dedup();
    match found.as_slice() {
        [one] => Some(one.to_string()),
        _ => None,
    }
}

fn first_word(answer: &str) -> String {
    answer
        .split(|c: char| c.is_whitespace() || c == ',' || c == '.' || c == '!')
        .find(|w| !w.is_empty())
        .unwrap_or("")
        .to_lowercase()
}

/// What `answer` does to `finding`, for a field of type `ty` whose person's currency is
/// `currency`, with the exchange rates known (`(from, to, rate, source)`, from the corpus and
/// the person).
pub fn settle(
    finding: &Finding,
    answer: &str,
    ty: ValueType,
    currency: Option<&str>,
    rates: &[(String, String, f64, String)],
) -> Settlement {
    let Some(read) = finding.candidates.first() else {
        return Settlement::Own;
    };
    match &finding.open {
        // A choice among readings: a value one of them gives takes it from the source.
        None => {
            let given: Vec<f64> = readings(answer, ty).iter().map(|r| r.value).collect();
            match given.as_slice() {
                [v] => finding
                    .candidates
                    .iter()
                    .find(|c| (c.value - v).abs() <= 1e-9 * v.abs().max(1.0))
                    .map_or(Settlement::Own, |c| Settlement::Take(c.clone())),
                _ => Settlement::Own,
            }
        }
        Some(Open::Currency { sign, options }) => {
            let word = first_word(answer);
            if !readings(answer, ty).is_empty() {
                return Settlement::Own;
            }
            let chosen = currency_in(answer).or_else(|| {
                YES.contains(&word.as_str())
                    .then(|| options.first().cloned())
                    .flatten()
            });
            let Some(chosen) = chosen else {
                if NO.contains(&word.as_str()) {
                    let rest: Vec<String> = options.iter().skip(1).cloned().collect();
                    if rest.is_empty() {
                        return Settlement::Unusable(format!(
                            "say which currency `{sign}` is here, or give the value yourself"
                        ));
                    }
                    return Settlement::Ask(Finding {
                        why: format!(
                            "not {}: {}",
                            options.first().cloned().unwrap_or_default(),
                            finding.why
                        ),
                        open: Some(Open::Currency {
                            sign: sign.clone(),
                            options: rest,
                        }),
                        ..finding.clone()
                    });
                }
                return Settlement::Unusable(format!(
                    "`{}` names no currency: answer yes for {}, or name the currency",
                    answer.trim(),
                    options.first().cloned().unwrap_or_default()
                ));
            };
            let mut taken = read.clone();
            taken.conversions.push(Conversion::CurrencyByAnswer {
                sign: sign.clone(),
                currency: chosen.clone(),
                answer: answer.trim().to_string(),
            });
            in_currency(finding, taken, &chosen, currency, rates)
        }
        // The value in the person's own currency (`1,400 EUR`) is theirs; a bare number is the rate.
        Some(Open::Rate { to, .. })
            if !answer.contains('=')
                && currency_in(answer).is_some_and(|c| c.eq_ignore_ascii_case(to)) =>
        {
            Settlement::Own
        }
        Some(Open::Rate { from, to }) => match rate_in(answer, from, to) {
            Ok(rate) => {
                let mut taken = read.clone();
                taken.conversions.push(Conversion::Currency {
                    from: from.clone(),
                    to: to.clone(),
                    rate,
                    source: "user".into(),
                });
                taken.value *= rate;
                Settlement::Take(taken)
            }
            Err(why) => Settlement::Unusable(why),
        },
    }
}

/// `taken`, in `chosen`, for a person whose currency is `currency`: as it is when they agree,
/// converted at a known rate, or a question for the rate.
fn in_currency(
    finding: &Finding,
    mut taken: FieldReading,
    chosen: &str,
    currency: Option<&str>,
    rates: &[(String, String, f64, String)],
) -> Settlement {
    let Some(want) = currency.filter(|w| !w.eq_ignore_ascii_case(chosen)) else {
        return Settlement::Take(taken);
    };
    let known = rates
        .iter()
        .find(|(f, t, _, _)| f.eq_ignore_ascii_case(chosen) && t.eq_ignore_ascii_case(want));
    match known {
        Some((_, _, rate, source)) => {
            taken.conversions.push(Conversion::Currency {
                from: chosen.to_string(),
                to: want.to_string(),
                rate: *rate,
                source: source.clone(),
            });
            taken.value *= rate;
            Settlement::Take(taken)
        }
        None => Settlement::Ask(Finding {
            candidates: vec![taken],
            why: format!("the figure is in {chosen}, and no {chosen}/{want} rate is known"),
            open: Some(Open::Rate {
                from: chosen.to_string(),
                to: want.to_uppercase(),
            }),
            ..finding.clone()
        }),
    }
}

/// The rate an answer gives: one positive number (`0.65`), or `FROM/TO=RATE`.
fn rate_in(answer: &str, from: &str, to: &str) -> Result<f64, String> {
    let ask = || format!("give the rate as a number: how many {to} is 1 {from}");
    let text = match answer.split_once('=') {
        Some((pair, rate)) => {
            let same = pair.split_once('/').is_some_and(|(f, t)| {
                f.trim().eq_ignore_ascii_case(from) && t.trim().eq_ignore_ascii_case(to)
            });
            if !same {
                return Err(format!(
                    "`{}` is not a {from}/{to} rate: {}",
                    answer.trim(),
                    ask()
                ));
            }
            rate
        }
        None => answer,
    };
    let found = readings(text, ValueType::Number);
    match found.as_slice() {
        [one] if one.value > 0.0 && one.value.is_finite() && !text.trim().starts_with('-') => {
            Ok(one.value)
        }
        [] => Err(format!("`{}` is not a rate: {}", answer.trim(), ask())),
        [_] => Err(format!(
            "`{}` is not a positive rate: {}",
            answer.trim(),
            ask()
        )),
        _ => Err(format!(
            "`{}` holds more than one number: {}",
            answer.trim(),
            ask()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn finding(open: Option<Open>) -> Finding {
        Finding {
            source_id: "pet-au".into(),
            quote: "Pet owners paid on average $610 per year.".into(),
            candidates: vec![FieldReading {
                value: 610.0,
                span: "$610 per year".into(),
                conversions: vec![],
            }],
            why: "`$` could be AUD or USD".into(),
            open,
        }
    }

    fn currency_q() -> Finding {
        finding(Some(Open::Currency {
            sign: "$".into(),
            options: vec!["AUD".into(), "USD".into()],
        }))
    }

    fn take(s: Settlement) -> FieldReading {
        match s {
            Settlement::Take(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_question_carries_the_source_the_quote_and_the_figure() {
        let q = currency_q().question("What is `annual_premium`?");
        assert_eq!(
            q,
            "What is `annual_premium`? — pet-au says \"Pet owners paid on average $610 per year.\": $610 per year — is that AUD, USD, or something else? (yes for AUD, or name the currency)"
        );
        let q = finding(Some(Open::Rate {
            from: "AUD".into(),
            to: "USD".into(),
        }))
        .question("Q");
        assert!(
            q.contains("$610 per year in AUD. How many USD is 1 AUD?"),
            "{q}"
        );
    }

    #[test]
    fn yes_takes_the_first_currency_and_a_named_one_takes_that() {
        let r = take(settle(
            &currency_q(),
            "yes",
            ValueType::Number,
            Some("AUD"),
            &[],
        ));
        assert_eq!(r.value, 610.0);
        assert_eq!(
            r.conversions,
            [Conversion::CurrencyByAnswer {
                sign: "$".into(),
                currency: "AUD".into(),
                answer: "yes".into()
            }]
        );
        let r = take(settle(&currency_q(), "Yes.", ValueType::Number, None, &[]));
        assert_eq!(r.value, 610.0);
        let r = take(settle(
            &currency_q(),
            "aud",
            ValueType::Number,
            Some("AUD"),
            &[],
        ));
        assert_eq!(r.value, 610.0);
        let r = take(settle(
            &currency_q(),
            "Australian dollars",
            ValueType::Number,
            Some("AUD"),
            &[],
        ));
        assert_eq!(r.value, 610.0);
    }

    #[test]
    fn another_currency_converts_only_at_a_rate_and_otherwise_asks_for_it() {
        let rates = [("USD".into(), "AUD".into(), 1.5, "user-rates".into())];
        let r = take(settle(
            &currency_q(),
            "USD",
            ValueType::Number,
            Some("AUD"),
            &rates,
        ));
        assert_eq!(r.value, 915.0);
        let asked = settle(&currency_q(), "USD", ValueType::Number, Some("AUD"), &[]);
        let Settlement::Ask(f) = asked else {
            panic!("{asked:?}")
        };
        assert_eq!(
            f.open,
            Some(Open::Rate {
                from: "USD".into(),
                to: "AUD".into()
            })
        );
        let r = take(settle(&f, "1.5", ValueType::Number, Some("AUD"), &[]));
        assert_eq!(r.value, 915.0);
        assert!(matches!(
            r.conversions.as_slice(),
            [Conversion::CurrencyByAnswer { .. }, Conversion::Currency { source, .. }] if source == "user"
        ));
        let r = take(settle(
            &f,
            "USD/AUD=1.5",
            ValueType::Number,
            Some("AUD"),
            &[],
        ));
        assert_eq!(r.value, 915.0);
        assert_eq!(
            settle(&f, "950 AUD", ValueType::Number, Some("AUD"), &[]),
            Settlement::Own,
            "the value in the person's currency is theirs"
        );
        for bad in ["yes", "0", "-2", "1.5 or 1.6", "EUR/AUD=1.5"] {
            assert!(
                matches!(
                    settle(&f, bad, ValueType::Number, Some("AUD"), &[]),
                    Settlement::Unusable(_)
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn no_offers_the_other_currencies_a_number_is_the_persons_own_value() {
        let Settlement::Ask(f) = settle(&currency_q(), "no", ValueType::Number, Some("AUD"), &[])
        else {
            panic!()
        };
        assert_eq!(
            f.open,
            Some(Open::Currency {
                sign: "$".into(),
                options: vec!["USD".into()]
            })
        );
        assert!(matches!(
            settle(&f, "no", ValueType::Number, Some("AUD"), &[]),
            Settlement::Unusable(_)
        ));
        for own in ["950", "950 AUD"] {
            assert_eq!(
                settle(&currency_q(), own, ValueType::Number, Some("AUD"), &[]),
                Settlement::Own
            );
        }
        assert!(matches!(
            settle(&currency_q(), "maybe", ValueType::Number, Some("AUD"), &[]),
            Settlement::Unusable(why) if why.contains("names no currency")
        ));
    }

    #[test]
    fn a_chosen_candidate_is_taken_from_the_source() {
        let mut f = finding(None);
        f.candidates.push(FieldReading {
            value: 700.0,
            span: "700".into(),
            conversions: vec![],
        });
        assert_eq!(
            take(settle(&f, "700", ValueType::Number, None, &[])).span,
            "700"
        );
        assert_eq!(
            settle(&f, "650", ValueType::Number, None, &[]),
            Settlement::Own
        );
    }

    proptest! {
        /// Any answer settles without panicking; a taken currency reading keeps the source's span.
        #[test]
        fn any_answer_settles(answer in "\\PC{0,40}") {
            for f in [currency_q(), finding(Some(Open::Rate { from: "AUD".into(), to: "USD".into() })), finding(None)] {
                if let Settlement::Take(r) = settle(&f, &answer, ValueType::Number, Some("AUD"), &[]) {
                    prop_assert_eq!(r.span, "$610 per year");
                    prop_assert!(r.value.is_finite() && r.value > 0.0);
                }
            }
        }
    }
}
