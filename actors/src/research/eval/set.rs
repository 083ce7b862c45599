//! A labelled evaluation set: goals over corpora, each with the notes a careful reader would cite
//! per aspect, the aspects the corpus cannot support (gaps), and the notes that must never be cited.
//!
//! The file format is described in `fixtures/research/eval/README.md`. Corpora are JSON arrays of
//! notes, named relative to the set file; `bundled` is the planner's own corpus.

use crate::research::notes::{self, Note, NotesError};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a goal's brief should contain.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// For each required section, the ids of every note that is about it (empty for a gap).
    pub aspects: BTreeMap<String, Vec<String>>,
    /// The sections the corpus cannot support: the brief must report them as gaps.
    #[serde(default)]
    pub gaps: Vec<String>,
    /// Notes that must never be cited for this goal.
    #[serde(default)]
    pub distractors: Vec<String>,
}

/// One labelled goal.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalGoal {
    /// A short unique name.
    pub id: String,
    /// The corpus: a file name under `corpora/` without `.json`, or `bundled`.
    pub corpus: String,
    /// The research goal as a user would type it.
    pub input: String,
    /// The run's constraints.
    #[serde(default)]
    pub constraints: serde_json::Value,
    /// The labels.
    pub expect: Expect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetFile {
    goals: Vec<EvalGoal>,
}

/// A loaded set: the goals and every corpus they name.
#[derive(Clone, Debug)]
pub struct EvalSet {
    /// The goals, in file order.
    pub goals: Vec<EvalGoal>,
    /// Notes by corpus name.
    pub corpora: HashMap<String, Arc<Vec<Note>>>,
}

/// Why a set could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum EvalSetError {
    /// The set file or a corpus could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The set file is not the expected JSON.
    #[error("{path}: malformed evaluation set: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What serde said.
        reason: String,
    },
    /// A corpus is not a valid list of notes.
    #[error("corpus `{corpus}`: {source}")]
    Corpus {
        /// The corpus name.
        corpus: String,
        /// What was wrong.
        source: NotesError,
    },
    /// A label names a note the goal's corpus does not have, or a section is unlabelled.
    #[error("goal `{goal}`: {problem}")]
    Label {
        /// The goal.
        goal: String,
        /// What is wrong.
        problem: String,
    },
    /// The set has no goal, or two goals share an id.
    #[error("evaluation set: {0}")]
    Goals(String),
}

impl EvalSet {
    /// Loads `path` and the corpora it names (from `corpora/` beside it).
    pub fn load(path: &Path) -> Result<Self, EvalSetError> {
        let raw = std::fs::read_to_string(path).map_err(|source| EvalSetError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let file: SetFile = serde_json::from_str(&raw).map_err(|e| EvalSetError::Malformed {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut corpora = HashMap::new();
        for goal in &file.goals {
            if corpora.contains_key(&goal.corpus) {
                continue;
            }
            let notes = load_corpus(dir, &goal.corpus)?;
            corpora.insert(goal.corpus.clone(), Arc::new(notes));
        }
        let set = Self {
            goals: file.goals,
            corpora,
        };
        set.check()?;
        Ok(set)
    }

    /// Every goal's labels name notes of its corpus, every required section is labelled, ids are
    /// unique.
    pub fn check(&self) -> Result<(), EvalSetError> {
        if self.goals.is_empty() {
            return Err(EvalSetError::Goals("no goal".into()));
        }
        let mut seen = std::collections::HashSet::new();
        for g in &self.goals {
            if !seen.insert(g.id.as_str()) {
                return Err(EvalSetError::Goals(format!("goal id `{}` repeats", g.id)));
            }
            let label = |problem: String| EvalSetError::Label {
                goal: g.id.clone(),
                problem,
            };
            let notes = self
                .corpora
                .get(&g.corpus)
                .ok_or_else(|| label(format!("unknown corpus `{}`", g.corpus)))?;
            let named = g
                .expect
                .aspects
                .values()
                .flatten()
                .chain(&g.expect.distractors);
            for id in named {
                if !notes.iter().any(|n| *n.id == **id) {
                    return Err(label(format!("note `{id}` is not in `{}`", g.corpus)));
                }
            }
            for gap in &g.expect.gaps {
                if g.expect.aspects.get(gap).is_some_and(|ids| !ids.is_empty()) {
                    return Err(label(format!("gap `{gap}` has labelled notes")));
                }
            }
            let sections = g
                .constraints
                .get("required_sections")
                .and_then(|v| v.as_array())
                .cloned()
                .unwrap_or_default();
            for s in sections.iter().filter_map(|s| s.as_str()) {
                if !g.expect.aspects.contains_key(s) {
                    return Err(label(format!("section `{s}` has no `aspects` entry")));
                }
            }
        }
        Ok(())
    }
}

fn load_corpus(dir: &Path, name: &str) -> Result<Vec<Note>, EvalSetError> {
    let corpus = |source| EvalSetError::Corpus {
        corpus: name.to_string(),
        source,
    };
    if name == "bundled" {
        return notes::bundled().map_err(corpus);
    }
    if name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(EvalSetError::Goals(format!(
            "corpus name `{name}` must be a plain file name under corpora/"
        )));
    }
    let path = dir.join("corpora").join(format!("{name}.json"));
    let raw = std::fs::read_to_string(&path).map_err(|source| EvalSetError::Read {
        path: path.clone(),
        source,
    })?;
    notes::parse_notes(&raw).map_err(corpus)
}
