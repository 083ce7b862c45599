//! Resume validation, pure: given a saved thread and a resume value, what the resume does — or
//! why it is refused, with nothing changed. The engine performs the plan (storing the answers, or
//! the checkpoint that marks a pause consumed).

use crate::events::Interrupt;
use crate::ids::ThreadId;
use crate::runtime::error::RunError;
use crate::runtime::run::Resume;
use crate::runtime::storage::{SavedThread, SavedWrite};
use crate::state::State;

/// What a valid resume does.
#[derive(Debug, PartialEq)]
pub(crate) enum ResumePlan {
    /// The thread paused before or after a node: the pause is consumed (its value unused).
    ConsumePause,
    /// The answers to give, as (task index, value), one per pending interrupt.
    Answer(Vec<(usize, serde_json::Value)>),
    /// No answers ([`Resume::NoAnswer`]): these tasks, paused inside their node, run again.
    Rerun(Vec<usize>),
}

/// The interrupts of `saved` still waiting for an answer at the call they paused on.
/// (Borrowed: an interrupt's value may be a whole plan put to a reviewer, and only ids and
/// positions are read.)
pub(crate) fn pending<S: State>(saved: &SavedThread<S>) -> Vec<(usize, &Interrupt)> {
    saved
        .writes
        .iter()
        .enumerate()
        .filter_map(|(i, w)| match w {
            Some(SavedWrite::Interrupted(int))
                if saved.answers.get(i).map_or(0, Vec::len) <= int.index as usize =>
            {
                Some((i, int))
            }
            _ => None,
        })
        .collect()
}

/// Checks `value` against what `saved` waits for.
pub(crate) fn plan<S: State>(
    thread: &ThreadId,
    saved: &SavedThread<S>,
    value: Resume,
) -> Result<ResumePlan, RunError> {
    let bad = |reason: String| -> RunError {
        crate::runtime::Refusal::BadResume {
            thread: thread.clone(),
            reason,
        }
        .into()
    };
    if saved.paused_before {
        if let Resume::ById(map) = &value {
            let ids: Vec<String> = saved.pauses.iter().map(|p| p.id.0.clone()).collect();
            if let Some(unknown) = map.keys().find(|k| !ids.contains(k)) {
                return Err(bad(format!(
                    "unknown interrupt id `{unknown}`; pending: {}",
                    ids.join(", ")
                )));
            }
        }
        return Ok(ResumePlan::ConsumePause);
    }
    let pending = pending(saved);
    let ids: Vec<&str> = pending.iter().map(|(_, p)| p.id.0.as_str()).collect();
    match value {
        Resume::NoAnswer => Ok(ResumePlan::Rerun(pending.iter().map(|(i, _)| *i).collect())),
        Resume::Value(v) => match pending.as_slice() {
            [(i, _)] => Ok(ResumePlan::Answer(vec![(*i, v)])),
            _ => Err(bad(format!(
                "{} interrupts are pending ({}); resume with a map of id to value",
                pending.len(),
                ids.join(", ")
            ))),
        },
        Resume::ById(map) => {
            if let Some(unknown) = map.keys().find(|k| !ids.contains(&k.as_str())) {
                return Err(bad(format!(
                    "unknown interrupt id `{unknown}`; pending: {}",
                    ids.join(", ")
                )));
            }
            pending
                .iter()
                .map(|(i, p)| {
                    map.get(&p.id.0)
                        .map(|v| (*i, v.clone()))
                        .ok_or_else(|| bad(format!("no value for interrupt `{}`", p.id)))
                })
                .collect::<Result<_, _>>()
                .map(ResumePlan::Answer)
        }
    }
}

#[cfg(test)]
#[allow(dead_code)]
mod tests {
    use super::*;
    use crate::ids::InterruptId;
    use serde_json::json;

    crate::state! {
        /// Nothing but a counter.
        #[allow(dead_code)]
        pub struct Tiny => TinyUpdate {
            /// Counted.
            replace n: u32,
        }
    }

    fn int(id: &str, index: u32) -> Interrupt {
        Interrupt {
            id: InterruptId(id.into()),
            node: "ask".into(),
            value: json!("?"),
            index,
        }
    }

    /// A thread whose tasks 0 and 2 paused (task 2 at its second call, answered once).
    fn paused() -> SavedThread<Tiny> {
        let mut s = SavedThread::<Tiny>::new();
        s.writes = vec![
            Some(SavedWrite::Interrupted(int("a", 0))),
            None,
            Some(SavedWrite::Interrupted(int("b#1", 1))),
        ];
        s.answers = vec![vec![], vec![], vec![json!("first")]];
        s
    }

    #[test]
    fn a_resume_is_checked_against_what_is_pending_and_nothing_else() {
        let t = ThreadId::new("t");
        let s = paused();
        assert_eq!(pending(&s).len(), 2);
        let e = plan(&t, &s, Resume::Value(json!(1))).unwrap_err();
        assert!(
            e.to_string().contains("2 interrupts are pending (a, b#1)"),
            "{e}"
        );
        let by_id = |pairs: &[(&str, i32)]| {
            Resume::ById(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect(),
            )
        };
        assert_eq!(
            plan(&t, &s, by_id(&[("a", 1), ("b#1", 2)])).unwrap(),
            ResumePlan::Answer(vec![(0, json!(1)), (2, json!(2))])
        );
        let e = plan(&t, &s, by_id(&[("a", 1)])).unwrap_err();
        assert!(
            e.to_string().contains("no value for interrupt `b#1`"),
            "{e}"
        );
        let e = plan(&t, &s, by_id(&[("a", 1), ("b#1", 2), ("zz", 3)])).unwrap_err();
        assert!(e.to_string().contains("unknown interrupt id `zz`"), "{e}");
        // Once task 2's second call is answered too, only task 0 waits.
        let mut s2 = paused();
        s2.answers[2].push(json!("second"));
        assert_eq!(
            plan(&t, &s2, Resume::Value(json!(9))).unwrap(),
            ResumePlan::Answer(vec![(0, json!(9))])
        );
        // A pause before a node takes any value and is consumed.
        let mut before = SavedThread::<Tiny>::new();
        before.paused_before = true;
        before.pauses = vec![int("before:1.0", 0)];
        assert_eq!(
            plan(&t, &before, Resume::Value(json!(null))).unwrap(),
            ResumePlan::ConsumePause
        );
        assert!(plan(&t, &before, by_id(&[("nope", 1)])).is_err());
        // No answer consumes a pause before a node, and re-runs the tasks still asking.
        assert_eq!(
            plan(&t, &before, Resume::NoAnswer).unwrap(),
            ResumePlan::ConsumePause
        );
        assert_eq!(
            plan(&t, &s, Resume::NoAnswer).unwrap(),
            ResumePlan::Rerun(vec![0, 2])
        );
    }
}
