//! The calculator's formula language: numbers, field names, `+ - * /`, unary minus and
//! parentheses, e.g. `population * dentists_per_100k / 100000 / dentists_per_clinic`.
//!
//! Parsing and evaluation never panic: a formula that does not parse, names an unknown field,
//! divides by zero, or overflows gives a [`FormulaError`] that says where and why. Depth is
//! bounded, so a hostile formula cannot exhaust the stack.

use std::collections::BTreeMap;

/// Deepest nesting accepted.
const MAX_DEPTH: usize = 64;
/// The most binary operators a formula may have: evaluation recurses once per operator, so this
/// bounds the stack as `MAX_DEPTH` does for parentheses.
const MAX_OPERATORS: usize = 256;

/// A parsed formula.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A number.
    Num(f64),
    /// A field's value.
    Field(String),
    /// `-e`.
    Neg(Box<Expr>),
    /// `a op b`.
    Bin(Op, Box<Expr>, Box<Expr>),
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
}

/// Why a formula cannot be computed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FormulaError {
    /// The text is not a formula.
    #[error("parse error at column {column}: {reason}")]
    Parse {
        /// 1-based column.
        column: usize,
        /// What was expected.
        reason: String,
    },
    /// A name that is not a field of the schema.
    #[error("unknown field `{0}`")]
    UnknownField(String),
    /// A field that has no value yet.
    #[error("field `{0}` has no value yet")]
    Missing(String),
    /// Division by zero.
    #[error("division by zero in `{0}`")]
    DivisionByZero(String),
    /// The result is not a finite number.
    #[error("the result of `{0}` is not a finite number")]
    NotFinite(String),
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
    depth: usize,
    operators: usize,
}

impl Parser<'_> {
    fn err(&self, reason: impl Into<String>) -> FormulaError {
        FormulaError::Parse {
            column: self.pos + 1,
            reason: reason.into(),
        }
    }

    fn skip_ws(&mut self) {
        while self.src.get(self.pos).is_some_and(u8::is_ascii_whitespace) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.src.get(self.pos).copied()
    }

    fn count_operator(&mut self) -> Result<(), FormulaError> {
        self.operators += 1;
        if self.operators > MAX_OPERATORS {
            return Err(self.err(format!("more than {MAX_OPERATORS} operators")));
        }
        Ok(())
    }

    /// The character at the current position (for messages; the source is UTF-8).
    fn current_char(&self) -> char {
        std::str::from_utf8(&self.src[self.pos.min(self.src.len())..])
            .ok()
            .and_then(|s| s.chars().next())
            .unwrap_or('\u{FFFD}')
    }

    fn expr(&mut self) -> Result<Expr, FormulaError> {
        let mut left = self.term()?;
        while let Some(c @ (b'+' | b'-')) = self.peek() {
            self.pos += 1;
            self.count_operator()?;
            let right = self.term()?;
            let op = if c == b'+' { Op::Add } else { Op::Sub };
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn term(&mut self) -> Result<Expr, FormulaError> {
        let mut left = self.factor()?;
        while let Some(c @ (b'*' | b'/')) = self.peek() {
            self.pos += 1;
            self.count_operator()?;
            let right = self.factor()?;
            let op = if c == b'*' { Op::Mul } else { Op::Div };
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn factor(&mut self) -> Result<Expr, FormulaError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        let r = match self.peek() {
            Some(b'-') => {
                self.pos += 1;
                Ok(Expr::Neg(Box::new(self.factor()?)))
            }
            Some(b'(') => {
                self.pos += 1;
                let e = self.expr()?;
                match self.peek() {
                    Some(b')') => {
                        self.pos += 1;
                        Ok(e)
                    }
                    _ => Err(self.err("expected `)`")),
                }
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => Ok(self.name()),
            Some(_) => Err(self.err(format!("unexpected `{}`", self.current_char()))),
            None => Err(self.err("unexpected end of formula")),
        };
        self.depth -= 1;
        r
    }

    fn number(&mut self) -> Result<Expr, FormulaError> {
        let start = self.pos;
        while self
            .src
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_digit() || *c == b'.')
        {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("");
        text.parse::<f64>()
            .map(Expr::Num)
            .map_err(|_| FormulaError::Parse {
                column: start + 1,
                reason: format!("`{text}` is not a number"),
            })
    }

    fn name(&mut self) -> Expr {
        let start = self.pos;
        while self
            .src
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            self.pos += 1;
        }
        Expr::Field(String::from_utf8_lossy(&self.src[start..self.pos]).into_owned())
    }
}

/// Parses a formula.
pub fn parse(text: &str) -> Result<Expr, FormulaError> {
    let mut p = Parser {
        src: text.as_bytes(),
        pos: 0,
        depth: 0,
        operators: 0,
    };
    let e = p.expr()?;
    match p.peek() {
        None => Ok(e),
        Some(_) => Err(p.err(format!(
            "unexpected `{}` after a complete formula",
            p.current_char()
        ))),
    }
}

impl Expr {
    /// The field names it uses, sorted, without duplicates.
    pub fn fields(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out.sort();
        out.dedup();
        out
    }

    fn collect(&self, out: &mut Vec<String>) {
        match self {
            Expr::Num(_) => {}
            Expr::Field(f) => out.push(f.clone()),
            Expr::Neg(e) => e.collect(out),
            Expr::Bin(_, a, b) => {
                a.collect(out);
                b.collect(out);
            }
        }
    }

    /// Evaluates with `values`: every field of the schema, `None` when it has no value yet. A name
    /// not in `values` is an unknown field. `source` is the formula's text, for error messages.
    pub fn eval(
        &self,
        values: &BTreeMap<String, Option<f64>>,
        source: &str,
    ) -> Result<f64, FormulaError> {
        let v = match self {
            Expr::Num(n) => *n,
            Expr::Field(f) => match values.get(f) {
                None => return Err(FormulaError::UnknownField(f.clone())),
                Some(None) => return Err(FormulaError::Missing(f.clone())),
                Some(Some(v)) => *v,
            },
            Expr::Neg(e) => -e.eval(values, source)?,
            Expr::Bin(op, a, b) => {
                let (x, y) = (a.eval(values, source)?, b.eval(values, source)?);
                match op {
                    Op::Add => x + y,
                    Op::Sub => x - y,
                    Op::Mul => x * y,
                    Op::Div if y == 0.0 => {
                        return Err(FormulaError::DivisionByZero(source.to_string()))
                    }
                    Op::Div => x / y,
                }
            }
        };
        if v.is_finite() {
            Ok(v)
        } else {
            Err(FormulaError::NotFinite(source.to_string()))
        }
    }
}

/// Parses and evaluates `text` in one go.
pub fn evaluate(text: &str, values: &BTreeMap<String, Option<f64>>) -> Result<f64, FormulaError> {
    parse(text)?.eval(values, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn vals(pairs: &[(&str, Option<f64>)]) -> BTreeMap<String, Option<f64>> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn the_design_examples_compute() {
        let v = vals(&[
            ("population", Some(5_000_000.0)),
            ("dentists_per_100k", Some(60.0)),
            ("dentists_per_clinic", Some(2.5)),
        ]);
        let r = evaluate(
            "population * dentists_per_100k / 100000 / dentists_per_clinic",
            &v,
        )
        .unwrap();
        assert!((r - 1200.0).abs() < 1e-9);
        assert_eq!(evaluate("-(2 + 3) * 4 - 1", &v).unwrap(), -21.0);
        assert_eq!(evaluate(" 10 / 4 ", &v).unwrap(), 2.5);
        assert_eq!(
            parse("clinics * annual_price").unwrap().fields(),
            ["annual_price", "clinics"]
        );
    }

    #[test]
    fn every_error_names_the_problem() {
        let v = vals(&[("a", Some(1.0)), ("zero", Some(0.0)), ("empty", None)]);
        let e = |t: &str| evaluate(t, &v).unwrap_err().to_string();
        assert_eq!(
            e("a +"),
            "parse error at column 4: unexpected end of formula"
        );
        assert!(e("(a + 1").contains("expected `)`"));
        assert!(e("a $ 1").contains("unexpected `$`"));
        assert!(e("1.2.3").contains("`1.2.3` is not a number"));
        assert!(e("a a").contains("after a complete formula"));
        assert_eq!(e("a * b"), "unknown field `b`");
        assert_eq!(e("a + empty"), "field `empty` has no value yet");
        assert_eq!(e("a / zero"), "division by zero in `a / zero`");
        assert!(e(&"(".repeat(100)).contains("nested deeper"));
        assert!(e(&"-".repeat(100)).contains("nested deeper"));
    }

    #[test]
    fn long_and_non_ascii_formulas_are_parse_errors_not_crashes() {
        let long = vec!["a"; 30_000].join(" + ");
        let e = parse(&long).unwrap_err().to_string();
        assert!(e.contains("more than 256 operators"), "{e}");
        assert!(parse(&vec!["a"; 200].join(" * ")).is_ok());
        let e = parse("a × 2").unwrap_err().to_string();
        assert!(e.contains('×'), "{e}");
    }

    proptest! {
        /// Any text: parse and evaluate return, never panic.
        #[test]
        fn never_panics_on_any_text(text in ".{0,60}") {
            let v = vals(&[("a", Some(2.0)), ("b", Some(0.0))]);
            let _ = evaluate(&text, &v);
        }

        /// Formula-shaped text over + - * / and parentheses evaluates like Rust arithmetic.
        #[test]
        fn agrees_with_direct_arithmetic(x in -1e6f64..1e6, y in 1.0f64..1e3, z in -1e3f64..1e3) {
            let v = vals(&[("x", Some(x)), ("y", Some(y)), ("z", Some(z))]);
            let r = evaluate("(x + z) * y - x / y", &v).unwrap();
            let expected = (x + z) * y - x / y;
            prop_assert!((r - expected).abs() <= 1e-9 * expected.abs().max(1.0));
        }
    }
}
