//! Reading a number as the field means it. A quote can hold the right number and still be read
//! wrong: two years in one sentence, a monthly price for a yearly field, a range, a price in
//! another currency, a figure for the neighbouring region, `72.000` written the European way.
//! So extraction returns a [`FieldReading`] — the value in the field's unit, the span it came
//! from, and every conversion made (period, scale, range midpoint, percentage, currency rate, the
//! year picked and why) — or, when the quote offers several candidates the field's description
//! cannot decide between, [`Verdict::Ask`] naming them: a wrong number is worse than a question.
//!
//! [`scan`] finds the numbers; [`context`] says what each is about (year, region, period,
//! currency, the noun after it); [`currency`] reads a sign several currencies share (`$`, `kr`,
//! `£`, `¥`, `R`) by the note's words and the person's; [`read_field`] picks. A figure only a
//! person can settle (which reading, which currency, what rate) becomes a [`finding::Finding`]
//! the planner asks about, quote and all. The planner checks any reading, offline or from a chat
//! model, with [`verify`]: the span must be in the quote, and the value must follow from the
//! span's number by the stated conversions.

pub mod context;
pub mod currency;
pub mod finding;
pub mod scan;

use context::{Context, Period};
use currency::{by_context, ByContext, Setting, Written};
use finding::Open;
use scan::{mentions, Style};
use serde::{Deserialize, Serialize};

/// One step from the number as written to the field's value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Conversion {
    /// A scale word (`1.4 million` → × 1,000,000).
    Scale {
        /// The word.
        word: String,
        /// Its factor.
        factor: f64,
    },
    /// A percentage read as a ratio (÷ 100).
    Percent,
    /// A range read as its midpoint; both ends kept.
    Range {
        /// The low end.
        low: f64,
        /// The high end.
        high: f64,
    },
    /// A period converted to the field's (`per month` → `per year`: × 12).
    Period {
        /// The period written.
        from: String,
        /// The field's period.
        to: String,
        /// The factor applied.
        factor: f64,
    },
    /// A currency converted at a rate the corpus or the person gave.
    Currency {
        /// The currency written.
        from: String,
        /// The schema's currency.
        to: String,
        /// `1 from = rate to`.
        rate: f64,
        /// Where the rate comes from (a document id, or `user`).
        source: String,
    },
    /// A sign several currencies share (`$`, `kr`, `£`, `¥`, `R`), read as one by its context.
    #[serde(rename = "currency-by-context")]
    CurrencyByContext {
        /// The sign as written.
        sign: String,
        /// The currency it is read as.
        currency: String,
        /// The words that settled it (`Australian`, `New Zealand dollars`, `AUD`).
        words: String,
        /// Where those words are (the quote, the note, the person's currency, …).
        basis: currency::Basis,
    },
    /// A sign several currencies share, read as the currency the person named when asked.
    #[serde(rename = "currency-by-answer")]
    CurrencyByAnswer {
        /// The sign as written.
        sign: String,
        /// The currency the person named.
        currency: String,
        /// Their answer (`yes`, `AUD`).
        answer: String,
    },
    /// One of several years in the quote, picked by the field's description.
    Year {
        /// The year picked.
        year: i32,
        /// The years offered.
        offered: Vec<i32>,
        /// Why this one.
        why: String,
    },
}

impl Conversion {
    /// How it reads in text output (`× 12`, `midpoint of 30–40`, …).
    pub fn describe(&self) -> String {
        match self {
            Conversion::Scale { word, .. } => format!("{word} applied"),
            Conversion::Percent => "÷ 100".into(),
            Conversion::Range { low, high } => {
                format!(
                    "midpoint of {}–{}",
                    crate::field::people::number(*low),
                    crate::field::people::number(*high)
                )
            }
            Conversion::Period { from, to, factor } if *factor >= 1.0 => {
                format!(
                    "× {} (per {from} → per {to})",
                    crate::field::people::number(*factor)
                )
            }
            Conversion::Period { from, to, factor } => {
                format!(
                    "÷ {} (per {from} → per {to})",
                    crate::field::people::number(1.0 / factor)
                )
            }
            Conversion::Currency {
                from,
                to,
                rate,
                source,
            } => {
                format!("× {rate} {from}→{to} (rate from {source})")
            }
            Conversion::CurrencyByContext {
                sign,
                currency,
                words,
                basis,
            } => format!(
                "{sign} read as {currency} ({} \"{words}\")",
                basis.describe()
            ),
            Conversion::CurrencyByAnswer {
                sign,
                currency,
                answer,
            } => format!("{sign} read as {currency} (the person answered \"{answer}\")"),
            Conversion::Year { year, why, .. } => format!("{year}: {why}"),
        }
    }

    /// Applies it to `v`.
    pub fn apply(&self, v: f64) -> f64 {
        match self {
            Conversion::Scale { .. }
            | Conversion::Range { .. }
            | Conversion::Year { .. }
            | Conversion::CurrencyByContext { .. }
            | Conversion::CurrencyByAnswer { .. } => v,
            Conversion::Percent => v / 100.0,
            Conversion::Period { factor, .. } => v * factor,
            Conversion::Currency { rate, .. } => v * rate,
        }
    }
}

/// A value read for a field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldReading {
    /// The value in the field's unit.
    pub value: f64,
    /// The text it was read from, verbatim (a part of the quote).
    pub span: String,
    /// What was done to the number as written, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversions: Vec<Conversion>,
}

impl FieldReading {
    /// The conversions, for people (empty when the number was taken as written).
    pub fn describe(&self) -> String {
        self.conversions
            .iter()
            .filter(|c| !matches!(c, Conversion::Scale { .. }))
            .map(Conversion::describe)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What a field needs to read a quote.
#[derive(Clone, Debug, Default)]
pub struct FieldSpec {
    /// A ratio (0–1).
    pub ratio: bool,
    /// An amount of money.
    pub money: bool,
    /// The period of its unit (`currency/year` → year).
    pub period: Option<Period>,
    /// Its content terms (name and description, stemmed).
    pub terms: std::collections::BTreeSet<String>,
    /// The head noun of its name.
    pub head: String,
    /// Its description asks for the latest figure.
    pub latest: bool,
    /// A year its description names.
    pub year: Option<i32>,
    /// The schema's region, when known.
    pub region: Option<String>,
    /// The schema's currency, when known.
    pub currency: Option<String>,
    /// Exchange rates known: (from, to, rate, source).
    pub rates: Vec<(String, String, f64, String)>,
    /// The schema's own words (its name, the goal, the field's description): the last context
    /// for a shared currency sign.
    pub about: String,
}

/// What a quote gives a field.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// One reading.
    Read(FieldReading),
    /// Several candidates (or one that can be read two ways): a person must say.
    Ask {
        /// The candidates.
        candidates: Vec<FieldReading>,
        /// Why the planner cannot pick.
        why: String,
    },
    /// One figure the field can use once a person settles its currency (which one, or the
    /// rate): the reading in the currency as written.
    Confirm {
        /// The figure as read.
        reading: FieldReading,
        /// What is open.
        open: Open,
        /// Why the planner cannot settle it.
        why: String,
    },
    /// Nothing for this field.
    Nothing,
}

/// A mention's value for the field, as [`convert`] makes it.
enum Converted {
    /// Read, in the field's unit and currency.
    Read(FieldReading),
    /// Read, but its currency (or the rate to the person's) is open.
    Open(FieldReading, Open, String),
    /// Not a value for this field.
    Skip,
}

/// A mention of the quote that fits the field, with what it says about itself.
#[derive(Clone, Debug)]
struct Candidate {
    reading: FieldReading,
    ctx: Context,
    ambiguous: Option<(f64, f64)>,
    /// The noun after it is one of the field's terms.
    strong: bool,
    /// Another content noun follows it (`900 veterinary clinics`).
    other_noun: bool,
    /// Its currency or rate is open (with why).
    open: Option<(Open, String)>,
}

/// Reads `quote` (a sentence of a document written in `style`) for `field`, the quote being
/// its own note.
pub fn read_field(quote: &str, style: Style, field: &FieldSpec) -> Verdict {
    read_field_in(quote, quote, style, field)
}

/// Reads `quote`, a sentence of `note` (a document written in `style`), for `field`. The note's
/// other sentences can settle a shared currency sign (`All prices are in New Zealand dollars.`).
pub fn read_field_in(quote: &str, note: &str, style: Style, field: &FieldSpec) -> Verdict {
    let ms = mentions(quote, style);
    let years: Vec<(usize, i32)> = ms
        .iter()
        .filter(|m| m.year_like && context::reads_as_year(quote, m))
        .map(|m| (m.span.0, m.value as i32))
        .collect();
    let mut cands: Vec<Candidate> = Vec::new();
    for m in &ms {
        if m.year_like && years.iter().any(|(at, _)| *at == m.span.0) {
            continue;
        }
        let ctx = context::of(quote, m, &years);
        if ctx.denominator {
            continue; // `62 dentists per 100,000 people`: 100,000 is not a count of anything
        }
        let fits = if field.ratio {
            m.percent || (m.range.is_none() && m.value <= 1.0)
        } else {
            !m.percent
        };
        if !fits || (field.money && ctx.currency.is_none()) {
            continue;
        }
        let (reading, open) = match convert(quote, note, m, &ctx, field) {
            Converted::Read(r) => (r, None),
            Converted::Open(r, open, why) => (r, Some((open, why))),
            Converted::Skip => continue,
        };
        if field.ratio && !(0.0..=1.0).contains(&reading.value) {
            continue;
        }
        // The noun right after the number says what it counts.
        let strong = ctx
            .nouns
            .first()
            .is_some_and(|n| *n == field.head || field.terms.contains(n));
        cands.push(Candidate {
            reading,
            other_noun: !strong && !ctx.nouns.is_empty(),
            ctx,
            ambiguous: m.ambiguous,
            strong,
            open,
        });
    }
    // A figure whose currency a person must settle counts only when no other figure does.
    if cands.iter().any(|c| c.open.is_none()) {
        cands.retain(|c| c.open.is_none());
    }
    // Numbers for another region are not this field's.
    if let Some(region) = &field.region {
        let r = region.to_lowercase();
        cands.retain(|c| c.ctx.region.as_ref().is_none_or(|x| x.to_lowercase() == r));
        if cands.iter().any(|c| c.ctx.region.is_some()) {
            cands.retain(|c| c.ctx.region.is_some());
        }
    }
    // A number tied to the field's noun wins over ones tied to other nouns.
    if cands.iter().any(|c| c.strong) {
        cands.retain(|c| !c.other_noun);
    }
    if cands.is_empty() {
        return Verdict::Nothing;
    }
    // Several years: the description decides (the latest, or the one it names), or a person.
    let offered: Vec<i32> = {
        let mut y: Vec<i32> = cands.iter().filter_map(|c| c.ctx.year).collect();
        y.sort_unstable();
        y.dedup();
        y
    };
    if offered.len() > 1 {
        let pick = match (field.year, field.latest) {
            (Some(y), _) if offered.contains(&y) => Some((
                y,
                format!("the year the field names, of {}", list(&offered)),
            )),
            (_, true) => offered.last().map(|y| {
                (
                    *y,
                    format!("the latest of {}, as the field asks", list(&offered)),
                )
            }),
            _ => None,
        };
        match pick {
            Some((year, why)) => {
                cands.retain(|c| c.ctx.year == Some(year));
                for c in &mut cands {
                    c.reading.conversions.push(Conversion::Year {
                        year,
                        offered: offered.clone(),
                        why: why.clone(),
                    });
                }
            }
            None => {
                return Verdict::Ask {
                    candidates: cands.into_iter().map(|c| c.reading).collect(),
                    why: format!(
                        "the quote gives figures for {} and the field does not say which year",
                        list(&offered)
                    ),
                }
            }
        }
    }
    // Figures written in the field's own unit (its period, the schema's currency) win over
    // ones that need converting: `12 USD a month, or 130 USD a year` is 130 for a yearly field.
    let converted = |c: &Candidate| {
        c.reading
            .conversions
            .iter()
            .any(|k| matches!(k, Conversion::Period { .. } | Conversion::Currency { .. }))
    };
    if cands.iter().any(|c| !converted(c)) && cands.iter().any(converted) {
        cands.retain(|c| !converted(c));
    }
    let distinct = {
        let mut v: Vec<f64> = cands.iter().map(|c| c.reading.value).collect();
        v.sort_by(f64::total_cmp);
        v.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * b.abs().max(1.0));
        v.len()
    };
    if distinct > 1 {
        return Verdict::Ask {
            candidates: cands.into_iter().map(|c| c.reading).collect(),
            why: "the quote gives several figures that could be this field".into(),
        };
    }
    let c = cands.swap_remove(0);
    if let Some((open, why)) = c.open {
        return Verdict::Confirm {
            reading: c.reading,
            open,
            why,
        };
    }
    if let Some((a, b)) = c.ambiguous {
        let as_read = |v: f64| FieldReading {
            value: c.reading.conversions.iter().fold(v, |v, k| k.apply(v)),
            ..c.reading.clone()
        };
        return Verdict::Ask {
            candidates: vec![as_read(a), as_read(b)],
            why: format!(
                "`{}` reads as {} or {} depending on the separator convention, and the document does not say which",
                c.reading.span,
                crate::field::people::number(a),
                crate::field::people::number(b)
            ),
        };
    }
    Verdict::Read(c.reading)
}

fn list(years: &[i32]) -> String {
    years
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The field's value from mention `m`: scale, range, percentage, period and currency applied.
/// A shared currency sign is read by its context; a figure whose currency stays open, or differs
/// from the person's with no rate known, is [`Converted::Open`].
fn convert(
    quote: &str,
    note: &str,
    m: &scan::Mention,
    ctx: &Context,
    field: &FieldSpec,
) -> Converted {
    let mut conversions = Vec::new();
    let mut value = m.value;
    if let Some((word, factor)) = &m.scale {
        conversions.push(Conversion::Scale {
            word: word.clone(),
            factor: *factor,
        });
    }
    if let Some((low, high)) = m.range {
        conversions.push(Conversion::Range { low, high });
    }
    if m.percent && field.ratio {
        conversions.push(Conversion::Percent);
        value /= 100.0;
    }
    let mut end = m.span.1;
    if let (Some(from), Some(to)) = (ctx.period, field.period) {
        if from != to {
            let factor = from.per_year() / to.per_year();
            conversions.push(Conversion::Period {
                from: from.name().into(),
                to: to.name().into(),
                factor,
            });
            value *= factor;
        }
        end = end.max(ctx.period_end);
    }
    let start = ctx.currency_start.min(m.span.0);
    let mut open = None;
    if field.money {
        let Some(w) = ctx.currency else {
            return Converted::Skip;
        };
        end = end.max(ctx.currency_end);
        let written = match w {
            Written::Known(code) => Some(code.to_string()),
            Written::Shared(sign) => {
                let setting = Setting {
                    quote,
                    note,
                    currency: field.currency.as_deref(),
                    region: field.region.as_deref(),
                    schema: &field.about,
                };
                match by_context(sign, &setting) {
                    ByContext::Settled {
                        currency,
                        words,
                        basis,
                    } => {
                        conversions.push(Conversion::CurrencyByContext {
                            sign: sign.to_string(),
                            currency: currency.clone(),
                            words,
                            basis,
                        });
                        Some(currency)
                    }
                    ByContext::Open { options, why } => {
                        open = Some((
                            Open::Currency {
                                sign: sign.to_string(),
                                options,
                            },
                            why,
                        ));
                        None
                    }
                }
            }
        };
        if let (Some(written), Some(want)) = (written, &field.currency) {
            if !written.eq_ignore_ascii_case(want) {
                let known = field.rates.iter().find(|(f, t, _, _)| {
                    f.eq_ignore_ascii_case(&written) && t.eq_ignore_ascii_case(want)
                });
                match known {
                    Some((_, _, rate, source)) => {
                        conversions.push(Conversion::Currency {
                            from: written.clone(),
                            to: want.clone(),
                            rate: *rate,
                            source: source.clone(),
                        });
                        value *= rate;
                    }
                    None => {
                        open = Some((
                            Open::Rate {
                                from: written.clone(),
                                to: want.to_uppercase(),
                            },
                            format!(
                                "the figure is in {written}, and no {written}/{want} rate is known"
                            ),
                        ))
                    }
                }
            }
        }
    }
    let reading = FieldReading {
        value,
        span: quote.get(start..end).unwrap_or_default().to_string(),
        conversions,
    };
    match open {
        Some((o, why)) => Converted::Open(reading, o, why),
        None => Converted::Read(reading),
    }
}

/// Checks a reading against its quote: the span is in the quote, and a number the span states,
/// put through the conversions, gives the value. `Err` says why not.
pub fn verify(quote: &str, r: &FieldReading) -> Result<(), String> {
    if r.span.trim().is_empty() || !quote.contains(&r.span) {
        return Err(format!("the span \"{}\" is not in the quote", r.span));
    }
    if !r.value.is_finite() {
        return Err("the value is not a finite number".into());
    }
    let style = scan::style_of(quote);
    for m in mentions(&r.span, style) {
        let mut bases = vec![m.value];
        if let Some((a, b)) = m.ambiguous {
            bases.extend([a, b]);
        }
        for base in bases {
            let mut v = base;
            let mut consistent = true;
            for c in &r.conversions {
                v = match c {
                    // A midpoint must be of the ends the span gives.
                    Conversion::Range { low, high } => {
                        consistent &= m
                            .range
                            .is_some_and(|(lo, hi)| close(lo, *low) && close(hi, *high));
                        v
                    }
                    // A scale the span writes is in the number already.
                    Conversion::Scale { factor, .. } if m.scale.is_none() => v * factor,
                    other => other.apply(v),
                };
            }
            if consistent && close(v, r.value) {
                return Ok(());
            }
        }
    }
    Err(format!(
        "{} does not follow from \"{}\" by the stated conversions",
        r.value, r.span
    ))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}
