//! Numbers written for people in the text output: thousands separated, no float noise
//! (`705669.1199999999` prints as `705,669`). The JSON output rounds to each field's precision
//! (`field::rounding`) and keeps the exact values in its `exact` object.

use serde_json::Value;

/// A number as a person reads it: at most two decimals at or above 1 (none from 100,000 up),
/// three significant digits below 1, thousands separated by commas.
pub fn number(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let a = x.abs();
    let decimals = if a >= 100_000.0 {
        0
    } else if a >= 1.0 || a == 0.0 {
        2
    } else {
        // Three significant digits: 0.0512 → 0.0512, 0.38 → 0.38.
        (2 - a.log10().floor() as i32).clamp(0, 12) as usize
    };
    let fixed = format!("{:.*}", decimals, x);
    let (int, frac) = match fixed.split_once('.') {
        Some((i, f)) => (i.to_string(), f.trim_end_matches('0').to_string()),
        None => (fixed.clone(), String::new()),
    };
    let (sign, digits) = match int.strip_prefix('-') {
        Some(d) => ("-", d.to_string()),
        None => ("", int),
    };
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let body = if frac.is_empty() {
        grouped
    } else {
        format!("{grouped}.{frac}")
    };
    if body.chars().all(|c| c == '0' || c == ',' || c == '.') {
        return "0".into();
    }
    format!("{sign}{body}")
}

/// A JSON value as a person reads it: numbers through [`number`], everything else as JSON.
pub fn value(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if v.is_number() => number(x),
        _ => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(number(705669.1199999999), "705,669");
        assert_eq!(number(35283.456), "35,283.46");
        assert_eq!(number(1857023.9999999998), "1,857,024");
        assert_eq!(number(1289.6), "1,289.6");
        assert_eq!(number(1440.0), "1,440");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(0.05), "0.05");
        assert_eq!(number(0.38), "0.38");
        assert_eq!(number(0.0512345), "0.0512");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(-1234.5), "-1,234.5");
        assert_eq!(value(&serde_json::json!("EUR")), "\"EUR\"");
        assert_eq!(value(&serde_json::json!(null)), "null");
    }

    proptest! {
        #[test]
        fn the_printed_number_is_close_to_the_value(x in -1e12f64..1e12) {
            let printed = number(x).replace(',', "");
            let back: f64 = printed.parse().unwrap();
            let tolerance = if x.abs() >= 100_000.0 { 0.5 } else if x.abs() >= 1.0 { 0.005 } else { x.abs() * 0.01 + 1e-12 };
            prop_assert!((back - x).abs() <= tolerance, "{x} printed {printed}");
        }
    }
}
