//! Numbers at the edge: the values `acquire --json`, the text output and the server answer are
//! rounded to what the field means, so a product of floats reads `705669.12`, not
//! `705669.1199999999`. A field's `precision` (decimal places) wins; an amount of money gets 2
//! decimals; anything else twelve significant digits, which drops the binary noise and keeps every
//! digit a source could have given. The exact values stay in the output's `exact` object.
//!
//! A field is money when its unit starts with `currency` (`currency`, `currency/year`), or, for a
//! derived field without a unit, when its formula makes one: a product or quotient with exactly
//! one money factor in the numerator and none in the denominator (`clinics * annual_price`,
//! `tam * share`), or a sum of amounts of money. Its unit for people replaces `currency` with the
//! run's currency (`AUD/year`).

use super::formula::{self, Expr, Op};
use super::schema::{Kind, Schema};

/// Deepest chain of derived fields followed when inferring a unit (the schema is acyclic;
/// this bounds the work on a long chain).
const MAX_DEPTH: usize = 32;

/// The unit of `field` as the schema declares it, or as its formula makes it (money only),
/// still with `currency` in it.
pub fn unit(schema: &Schema, field: &str) -> Option<String> {
    unit_at(schema, field, 0)
}

fn unit_at(schema: &Schema, field: &str, depth: usize) -> Option<String> {
    let f = schema.field(field)?;
    if let Some(u) = &f.unit {
        return Some(u.clone());
    }
    if f.kind != Kind::Derived || depth > MAX_DEPTH {
        return None;
    }
    let expr = formula::parse(f.formula.as_deref()?).ok()?;
    money_of(schema, &expr, depth + 1)
}

/// The money unit of an expression, if it is an amount of money.
fn money_of(schema: &Schema, e: &Expr, depth: usize) -> Option<String> {
    match e {
        Expr::Num(_) => None,
        Expr::Field(name) => unit_at(schema, name, depth).filter(|u| is_money(u)),
        Expr::Neg(inner) => money_of(schema, inner, depth),
        Expr::Bin(op, a, b) => {
            let (ma, mb) = (money_of(schema, a, depth), money_of(schema, b, depth));
            match op {
                Op::Mul => match (ma, mb) {
                    (Some(u), None) | (None, Some(u)) => Some(u),
                    _ => None,
                },
                Op::Div => match (ma, mb) {
                    (Some(u), None) => Some(u),
                    _ => None,
                },
                Op::Add | Op::Sub => match (ma, mb) {
                    (Some(u), Some(_)) => Some(u),
                    _ => None,
                },
            }
        }
    }
}

fn is_money(unit: &str) -> bool {
    unit.trim().to_ascii_lowercase().starts_with("currency")
}

/// The unit as a person reads it: `currency` replaced by the run's currency when it is known
/// (`currency/year` → `AUD/year`).
pub fn unit_for_people(schema: &Schema, field: &str, currency: Option<&str>) -> Option<String> {
    let u = unit(schema, field)?;
    match currency {
        Some(c) if is_money(&u) => Some(format!("{c}{}", &u.trim()["currency".len()..])),
        _ => Some(u),
    }
}

/// Decimal places `field`'s value is shown with (`None`: twelve significant digits).
pub fn decimals(schema: &Schema, field: &str) -> Option<u32> {
    if let Some(p) = schema.field(field).and_then(|f| f.precision) {
        return Some(p.min(12));
    }
    unit(schema, field).filter(|u| is_money(u)).map(|_| 2)
}

/// `x` rounded to `decimals` places, or to twelve significant digits without them.
pub fn round(x: f64, decimals: Option<u32>) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let r = match decimals {
        Some(d) => {
            let scale = 10f64.powi(d as i32);
            let r = (x * scale).round() / scale;
            // A scaled value past f64's integers: rounding cannot help; keep it.
            if r.is_finite() {
                r
            } else {
                x
            }
        }
        None => format!("{x:.11e}").parse().unwrap_or(x),
    };
    if r == 0.0 {
        0.0
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dental() -> Schema {
        Schema::from_json(include_str!("../../../fixtures/field/dental.schema.json")).unwrap()
    }

    #[test]
    fn money_rounds_to_cents_and_noise_goes() {
        assert_eq!(round(705669.1199999999, Some(2)), 705669.12);
        assert_eq!(round(1857023.9999999998, Some(2)), 1857024.0);
        assert_eq!(round(35283.456, Some(2)), 35283.46);
        assert_eq!(round(1857023.9999999998, None), 1857024.0);
        assert_eq!(round(0.1 + 0.2, None), 0.3);
        assert_eq!(round(0.051234, None), 0.051234);
        assert_eq!(round(12.5, Some(0)), 13.0);
        assert_eq!(round(f64::MAX, Some(2)), f64::MAX);
        assert_eq!(round(-0.001, Some(2)), 0.0);
        assert_eq!(
            serde_json::json!(round(705669.1199999999, Some(2))).to_string(),
            "705669.12"
        );
    }

    #[test]
    fn a_derived_amount_of_money_is_money() {
        let s = dental();
        for t in ["tam", "sam", "som"] {
            assert_eq!(decimals(&s, t), Some(2), "{t}");
            assert_eq!(
                unit_for_people(&s, t, Some("NOK")).as_deref(),
                Some("NOK/year"),
                "{t}"
            );
        }
        assert_eq!(decimals(&s, "serviceable_share"), None);
        assert_eq!(unit(&s, "region"), None);
    }

    #[test]
    fn precision_in_the_schema_wins() {
        let mut s = dental();
        for f in &mut s.fields {
            if f.name == "tam" {
                f.precision = Some(0);
            }
        }
        assert_eq!(decimals(&s, "tam"), Some(0));
        assert_eq!(round(1857023.6, decimals(&s, "tam")), 1857024.0);
    }
}
