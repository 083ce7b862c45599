//! Shared helpers of the research planner's tests: a scripted policy, small note sets, step
//! builders, and a one-call runner.
#![allow(dead_code)]

use planwright::{Engine, RunOptions, RunOutcome, ThreadId};
use planwright_actors::research::notes::Note;
use planwright_actors::research::policy::{
    OfflineResearchPolicy, PlanRequest, PolicyError, PolicyReply, RepairRequest, ReplanRequest,
    Report, ResearchPolicy, SynthesisRequest,
};
use planwright_actors::research::state::{Criterion, PlanStep, StepParams};
use planwright_actors::research::{
    graph, initial_update, GraphOptions, ResearchInput, ResearchState,
};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

type Queue<T> = Mutex<VecDeque<Result<T, PolicyError>>>;

/// A policy answering from queues; an empty queue falls back to the offline policy. Counts calls.
#[derive(Default)]
pub struct ScriptedPolicy {
    pub plans: Queue<Vec<PlanStep>>,
    pub repairs: Queue<Vec<PlanStep>>,
    pub replans: Queue<Vec<PlanStep>>,
    pub reports: Queue<Report>,
    pub calls: AtomicUsize,
}

fn next<T>(q: &Queue<T>) -> Option<Result<T, PolicyError>> {
    q.lock().unwrap().pop_front()
}

impl ScriptedPolicy {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    pub fn plan(self: &Arc<Self>, p: Vec<PlanStep>) -> Arc<Self> {
        self.plans.lock().unwrap().push_back(Ok(p));
        self.clone()
    }
    pub fn repair(self: &Arc<Self>, p: Vec<PlanStep>) -> Arc<Self> {
        self.repairs.lock().unwrap().push_back(Ok(p));
        self.clone()
    }
    pub fn replan(self: &Arc<Self>, p: Vec<PlanStep>) -> Arc<Self> {
        self.replans.lock().unwrap().push_back(Ok(p));
        self.clone()
    }
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl ResearchPolicy for ScriptedPolicy {
    fn name(&self) -> &str {
        "scripted"
    }
    async fn create_plan(
        &self,
        r: &PlanRequest,
    ) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match next(&self.plans) {
            Some(x) => x.map(PolicyReply::offline),
            None => OfflineResearchPolicy.create_plan(r).await,
        }
    }
    async fn repair_plan(
        &self,
        r: &RepairRequest,
    ) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match next(&self.repairs) {
            Some(x) => x.map(PolicyReply::offline),
            None => OfflineResearchPolicy.repair_plan(r).await,
        }
    }
    async fn replan(&self, r: &ReplanRequest) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match next(&self.replans) {
            Some(x) => x.map(PolicyReply::offline),
            None => OfflineResearchPolicy.replan(r).await,
        }
    }
    async fn synthesize_report(
        &self,
        r: &SynthesisRequest,
    ) -> Result<PolicyReply<Report>, PolicyError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match next(&self.reports) {
            Some(x) => x.map(PolicyReply::offline),
            None => OfflineResearchPolicy.synthesize_report(r).await,
        }
    }
}

pub fn note(id: &str, title: &str, text: &str) -> Note {
    Note {
        id: id.into(),
        title: title.into(),
        text: text.into(),
        tags: [].into(),
    }
}

/// Six notes on "solar batteries": cost and lifetime covered, nothing on recycling.
pub fn battery_notes() -> Vec<Note> {
    vec![
        note("b1", "Battery cost", "Solar batteries cost 700 EUR per kWh installed. Prices fell each year."),
        note("b2", "Battery payback", "A solar battery pays back its cost in about ten years at current tariffs."),
        note("b3", "Battery lifetime", "Solar batteries keep 80 percent of capacity after 6000 cycles, a lifetime of about fifteen years."),
        note("b4", "Battery warranty", "Most solar battery warranties cover ten years or a fixed energy throughput, whichever comes first."),
        note("b5", "Self-consumption", "A solar battery raised self-consumption of rooftop power from 30 to 70 percent in a typical home."),
        note("b6", "Backup power", "Some solar batteries supply backup power in an outage, which needs an extra switch."),
    ]
}

pub fn search(id: &str, query: &str, deps: &[&str], criteria: Vec<Criterion>) -> PlanStep {
    PlanStep {
        id: id.into(),
        description: format!("search {query}"),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        tool: "search".into(),
        params: Arc::new(StepParams {
            query: Some(query.into()),
            ..StepParams::default()
        }),
        acceptance_criteria: criteria.into(),
        ..PlanStep::default()
    }
}

pub fn summarize(id: &str, deps: &[&str]) -> PlanStep {
    PlanStep {
        id: id.into(),
        description: "summarize".into(),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        tool: "summarize".into(),
        acceptance_criteria: vec![Criterion::MinSources(1)].into(),
        ..PlanStep::default()
    }
}

pub fn input(goal: &str, constraints: Value, notes: Option<Vec<Note>>) -> ResearchInput {
    ResearchInput {
        input: goal.into(),
        constraints,
        source_notes: notes,
    }
}

pub async fn engine(
    policy: Arc<dyn ResearchPolicy>,
    options: GraphOptions,
) -> Engine<ResearchState> {
    Engine::new(graph(policy, options).unwrap()).await
}

/// Runs one request to its end (or pause) on thread `t`.
pub async fn run(policy: Arc<dyn ResearchPolicy>, req: ResearchInput) -> RunOutcome<ResearchState> {
    let e = engine(policy, GraphOptions::default()).await;
    e.run(
        ThreadId::new("t"),
        initial_update(req).unwrap(),
        RunOptions::default(),
    )
    .await
    .unwrap()
}

pub const BATTERY_GOAL: &str = "Research brief on solar batteries for homes";

pub fn events(s: &ResearchState) -> Vec<&str> {
    s.execution_history
        .iter()
        .map(|h| h.event.as_ref())
        .collect()
}
