//! The research state's `plan` field: its steps in order, and the two ways a node writes them.
//!
//! The planning nodes (`create_plan`, `repair_plan`, `replan`, a reviewer's edit) write a whole
//! plan. `assess_progress` only marks the statuses of the steps it assessed, and it runs after
//! every batch of steps: written as a whole plan, its checkpoint would carry every step's
//! description, parameters and criteria again (~1.7 KB of JSON per assessment, the largest part
//! of a research conversation's stored deltas, and of what was compressed per conversation). A
//! [`Plan::Statuses`] write carries only `{"statuses": {"s1": "complete", ...}}`, and the reducer
//! ([`write()`]) applies it to the plan the state holds.
//!
//! The state always holds [`Plan::Steps`]: a status write applied to it marks its steps. So a
//! snapshot, the API's state and an interrupt's payload show the plan as the array of steps it
//! always was; only a delta (and the `updates` stream) shows a status write as it was made.

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// Where a plan step stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not run yet (or waiting to run again).
    #[default]
    Pending,
    /// Ran and met its acceptance criteria.
    Complete,
    /// Ran and did not meet its acceptance criteria (or its tool failed).
    Failed,
    /// An optional step that failed; the rest of the plan goes on without it.
    Skipped,
    /// Superseded by a replan: its result stays in `step_results` for the record.
    Replaced,
}

/// A deterministic acceptance criterion of a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// The step used at least this many distinct notes.
    MinSources(u32),
    /// Every term is mentioned (as a word or word prefix) by at least one note the step used.
    Covers(Vec<String>),
}

/// Tool parameters of a step. Which ones a tool needs is checked by validation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StepParams {
    /// `search`: the section (aspect) of the brief the step gathers notes for. A found note must
    /// be about it; the brief puts the step's findings under it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aspect: Option<String>,
    /// `search`: the ranking query.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// `search`: a note is used only if it mentions at least one of these terms (keeps a
    /// broadened query on the goal's topic). Empty: no filter.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub require_any: Vec<String>,
    /// `search`: how many notes at most (default 3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// `compare`: the dimensions to compare findings along.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dimensions: Vec<String>,
    /// `summarize`: how many sentences at most (default 4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sentences: Option<u32>,
    /// `mcp`: the tool server to call (default: the first connected server with `tool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// `mcp`: the server's tool to call. Absent: the executor chooses one whose description fits
    /// the step's `aspect` and `query` (`tools::mcp::choose`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// `mcp`: the tool's arguments (with `tool`; absent: filled from `query` by the schema).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Map<String, serde_json::Value>>,
}

/// One step of a plan. Its parameters and criteria are shared (`Arc`, the same JSON): a plan is
/// copied whenever a node marks a step's status (`assess_progress` copies every step of it), and
/// copying them would be most of what copying a step costs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanStep {
    /// Unique id within the plan.
    pub id: String,
    /// What the step does, for people.
    pub description: String,
    /// Ids of the steps that must complete first.
    pub depends_on: Vec<String>,
    /// The tool it runs (see `tools::CATALOG`; `mcp` calls a tool server's tool).
    pub tool: String,
    /// The tool's parameters (`Arc::make_mut` to change one).
    pub params: Arc<StepParams>,
    /// Deterministic checks of the step's result (`Arc::make_mut` to change them).
    pub acceptance_criteria: Arc<Vec<Criterion>>,
    /// An optional step may fail without blocking the brief (its gap is still reported).
    pub optional: bool,
    /// Where it stands.
    pub status: StepStatus,
}

impl PlanStep {
    /// The section a search step serves: its `aspect` parameter, else the first term of its
    /// `Covers` criterion (plans written before steps named their aspect).
    pub fn aspect(&self) -> Option<&str> {
        if self.tool != "search" {
            return None;
        }
        if let Some(a) = self.params.aspect.as_deref() {
            return Some(a);
        }
        self.acceptance_criteria.iter().find_map(|c| match c {
            Criterion::Covers(terms) => terms.first().map(String::as_str),
            Criterion::MinSources(_) => None,
        })
    }
}

/// Puts back every complete or replaced step of `old` that `new` dropped or changed; returns the
/// ids restored.
pub fn preserve_completed(old: &[PlanStep], new: &mut Vec<PlanStep>) -> Vec<String> {
    let mut restored = Vec::new();
    for (i, kept) in old.iter().enumerate() {
        if !matches!(kept.status, StepStatus::Complete | StepStatus::Replaced) {
            continue;
        }
        match new.iter().position(|s| s.id == kept.id) {
            Some(j) if new[j] == *kept => {}
            Some(j) => {
                new[j] = kept.clone();
                restored.push(kept.id.clone());
            }
            None => {
                new.insert(i.min(new.len()), kept.clone());
                restored.push(kept.id.clone());
            }
        }
    }
    restored
}

/// The plan, or a write that marks some of its steps' statuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// The steps, in order (shared: views of the state copy the `Arc`, not the steps). What the
    /// state holds, and what a planning node writes.
    Steps(Arc<Vec<PlanStep>>),
    /// New statuses by step id; the rest of the plan stays as it is. Only ever a write: applied
    /// to the state (or to a `Steps` write before it), it becomes the marked steps. An id the
    /// plan does not have is ignored (the plan it was assessed against has been replaced).
    Statuses(BTreeMap<String, StepStatus>),
}

impl Default for Plan {
    fn default() -> Self {
        Plan::Steps(Arc::default())
    }
}

impl From<Vec<PlanStep>> for Plan {
    fn from(steps: Vec<PlanStep>) -> Self {
        Plan::Steps(Arc::new(steps))
    }
}

impl From<Arc<Vec<PlanStep>>> for Plan {
    fn from(steps: Arc<Vec<PlanStep>>) -> Self {
        Plan::Steps(steps)
    }
}

impl Deref for Plan {
    type Target = [PlanStep];

    /// The steps; a status write has none.
    fn deref(&self) -> &[PlanStep] {
        match self {
            Plan::Steps(steps) => steps,
            Plan::Statuses(_) => &[],
        }
    }
}

impl Plan {
    /// The steps, shared (a status write: none).
    pub fn shared(&self) -> Arc<Vec<PlanStep>> {
        match self {
            Plan::Steps(steps) => steps.clone(),
            Plan::Statuses(_) => Arc::default(),
        }
    }

    /// The steps to change in place (copied first if shared; a status write becomes an empty
    /// plan).
    pub fn to_mut(&mut self) -> &mut Vec<PlanStep> {
        if let Plan::Statuses(_) = self {
            *self = Plan::default();
        }
        match self {
            Plan::Steps(steps) => Arc::make_mut(steps),
            Plan::Statuses(_) => unreachable!("replaced by steps above"),
        }
    }
}

/// The reducer of the `plan` field (and how two writes of one superstep combine): steps replace
/// what was there; statuses mark the steps there (or, on another status write, add to it,
/// the later status winning per step).
pub fn write(slot: &mut Plan, value: Plan) {
    match (slot, value) {
        (slot, Plan::Steps(steps)) => *slot = Plan::Steps(steps),
        (Plan::Statuses(held), Plan::Statuses(more)) => held.extend(more),
        (Plan::Steps(steps), Plan::Statuses(marks)) => {
            if marks.is_empty() {
                return;
            }
            for step in Arc::make_mut(steps).iter_mut() {
                if let Some(status) = marks.get(&step.id) {
                    step.status = *status;
                }
            }
        }
    }
}

/// The key of a status write's JSON object.
const STATUSES: &str = "statuses";

impl Serialize for Plan {
    /// Steps as the array they always were; a status write as `{"statuses": {id: status}}`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Plan::Steps(steps) => steps.serialize(serializer),
            Plan::Statuses(marks) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(STATUSES, marks)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Plan {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(PlanVisitor)
    }
}

struct PlanVisitor;

impl<'de> Visitor<'de> for PlanVisitor {
    type Value = Plan;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of plan steps, or {\"statuses\": {step id: status}}")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Plan, A::Error> {
        let mut steps = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(step) = seq.next_element()? {
            steps.push(step);
        }
        Ok(Plan::from(steps))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Plan, A::Error> {
        let mut marks = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key != STATUSES {
                return Err(de::Error::unknown_field(&key, &[STATUSES]));
            }
            if marks.is_some() {
                return Err(de::Error::duplicate_field(STATUSES));
            }
            marks = Some(map.next_value()?);
        }
        marks
            .map(Plan::Statuses)
            .ok_or_else(|| de::Error::missing_field(STATUSES))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn step(id: &str, status: StepStatus) -> PlanStep {
        PlanStep {
            id: id.into(),
            description: format!("step {id}"),
            tool: "search".into(),
            status,
            ..PlanStep::default()
        }
    }

    fn status() -> impl Strategy<Value = StepStatus> {
        prop_oneof![
            Just(StepStatus::Pending),
            Just(StepStatus::Complete),
            Just(StepStatus::Failed),
            Just(StepStatus::Skipped),
            Just(StepStatus::Replaced),
        ]
    }

    /// A write: a plan of steps `s0..`, or statuses of ids among them and beyond.
    fn a_write() -> impl Strategy<Value = Plan> {
        prop_oneof![
            proptest::collection::vec(status(), 0..5).prop_map(|st| Plan::from(
                st.into_iter()
                    .enumerate()
                    .map(|(i, s)| step(&format!("s{i}"), s))
                    .collect::<Vec<_>>()
            )),
            proptest::collection::btree_map("s[0-6]", status(), 0..4).prop_map(Plan::Statuses),
        ]
    }

    /// The plan `writes` leave when applied one by one to `start`, as whole plans.
    fn applied(start: &Plan, writes: &[Plan]) -> Plan {
        let mut state = start.clone();
        for w in writes {
            write(&mut state, w.clone());
        }
        state
    }

    #[test]
    fn a_status_write_marks_the_steps_it_names_and_leaves_the_rest() {
        let mut plan = Plan::from(vec![
            step("a", StepStatus::Pending),
            step("b", StepStatus::Pending),
        ]);
        let before = plan.clone();
        write(
            &mut plan,
            Plan::Statuses(BTreeMap::from([
                ("b".to_string(), StepStatus::Failed),
                ("gone".to_string(), StepStatus::Complete),
            ])),
        );
        assert_eq!(plan[0], before[0]);
        assert_eq!(plan[1].status, StepStatus::Failed);
        assert_eq!(plan[1].description, "step b");
        assert_eq!(plan.len(), 2, "an unknown id adds nothing");
        // The plan the write was applied to is shared, not changed.
        assert_eq!(before[1].status, StepStatus::Pending);
    }

    #[test]
    fn the_json_of_steps_is_the_array_and_of_statuses_an_object() {
        let steps = Plan::from(vec![step("a", StepStatus::Complete)]);
        let json = serde_json::to_value(&steps).unwrap();
        assert!(json.is_array(), "{json}");
        assert_eq!(json[0]["status"], "complete");
        let marks = Plan::Statuses(BTreeMap::from([("a".into(), StepStatus::Skipped)]));
        assert_eq!(
            serde_json::to_string(&marks).unwrap(),
            r#"{"statuses":{"a":"skipped"}}"#
        );
    }

    #[test]
    fn json_that_is_neither_is_refused_by_name() {
        for (bad, says) in [
            (r#"{"steps": []}"#, "unknown field `steps`"),
            (r#"{}"#, "missing field `statuses`"),
            (r#"{"statuses": {"a": "done"}}"#, "unknown variant `done`"),
            (r#""a plan""#, "an array of plan steps"),
        ] {
            let err = serde_json::from_str::<Plan>(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    proptest! {
        /// Writes combined with `then` (two writes of one superstep, or a node's steps) leave
        /// the plan that applying them one by one leaves; JSON round trips every write.
        #[test]
        fn combined_writes_apply_like_the_writes_in_order(
            start in a_write().prop_filter("the state holds steps", |p| matches!(p, Plan::Steps(_))),
            writes in proptest::collection::vec(a_write(), 1..5),
        ) {
            let mut combined = writes[0].clone();
            for w in &writes[1..] {
                write(&mut combined, w.clone());
            }
            let mut state = start.clone();
            write(&mut state, combined);
            prop_assert_eq!(&state, &applied(&start, &writes));
            prop_assert!(matches!(state, Plan::Steps(_)), "the state holds steps");
            for w in &writes {
                let json = serde_json::to_string(w).unwrap();
                prop_assert_eq!(&serde_json::from_str::<Plan>(&json).unwrap(), w);
            }
        }
    }
}
