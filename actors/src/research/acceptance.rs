//! Deterministic acceptance checks: did a step's result meet its criteria?

use super::corpus::{Corpus, Prepared, Term};
use super::state::Criterion;

/// Checks `criteria` against the notes a step used; returns each criterion that failed, named.
pub fn check(criteria: &[Criterion], sources: &[String], corpus: &Corpus) -> Vec<String> {
    let used: Vec<&Prepared> = sources
        .iter()
        .filter_map(|id| corpus.position(id).map(|i| corpus.prepared(i)))
        .collect();
    let mut unmet = Vec::new();
    for c in criteria {
        match c {
            Criterion::MinSources(n) => {
                if used.len() < *n as usize {
                    unmet.push(format!(
                        "min_sources: used {} note(s), needs at least {n}",
                        used.len()
                    ));
                }
            }
            Criterion::Covers(terms) => {
                for t in terms {
                    // Split once, not once per note.
                    let term = Term::new(t);
                    if !used.iter().any(|n| n.mentions_term(&term)) {
                        unmet.push(format!("covers: no note used mentions `{t}`"));
                    }
                }
            }
        }
    }
    unmet
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::research::notes::Note;

    #[test]
    fn names_each_unmet_criterion() {
        let notes = Corpus::new(vec![Note {
            id: "a".into(),
            title: "Cost".into(),
            text: "Licences cost money.".into(),
            tags: [].into(),
        }]);
        let criteria = vec![
            Criterion::MinSources(2),
            Criterion::Covers(vec!["cost".into(), "risk".into()]),
        ];
        let unmet = check(&criteria, &["a".into()], &notes);
        assert_eq!(unmet.len(), 2, "{unmet:?}");
        assert!(unmet[0].contains("needs at least 2"));
        assert!(unmet[1].contains("`risk`"));
        assert!(check(&criteria[1..1], &[], &notes).is_empty());
    }
}
