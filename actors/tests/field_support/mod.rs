//! Shared by the field planner's tests: fixtures, engines, a scripted model whose answers are a
//! pure function of (seed, request), a counting wrapper, and checks of the output's invariants.
#![allow(dead_code)]

use planwright::{Engine, ThreadId};
use planwright_actors::field::policy::{
    offline::OfflineFieldPolicy, DecideRequest, DecomposeRequest, ExtractAnswer, ExtractRequest,
    FieldPolicy, PolicyError, PolicyReply, ReflectRequest, Reflection,
};
use planwright_actors::field::runner::{self, AcquireRun, Start};
use planwright_actors::field::schema::{Decomposition, Schema};
use planwright_actors::field::state::{Action, FieldState, PlannerDecision};
use planwright_actors::field::{formula, input, GraphOptions, Topology};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A fixture file's text.
pub fn fixture(name: &str, part: &str) -> String {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../fixtures/field/{name}.{part}.json"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A fixture scenario: schema, corpus and answers.
pub struct Scenario {
    pub schema: Schema,
    pub corpus: Vec<planwright_actors::tools::bm25::Document>,
    pub answers: BTreeMap<String, String>,
}

/// Loads a fixture scenario.
pub fn scenario(name: &str) -> Scenario {
    let schema = Schema::from_json(&fixture(name, "schema")).unwrap();
    let corpus = input::parse_corpus(&fixture(name, "corpus")).unwrap();
    let answers = input::parse_answers(&fixture(name, "answers"), Some(&schema)).unwrap();
    Scenario {
        schema,
        corpus,
        answers,
    }
}

/// An engine over `policy` (no checkpointer unless given).
pub async fn engine(
    policy: Arc<dyn FieldPolicy>,
    options: &GraphOptions,
    checkpointer: Option<Arc<dyn planwright::checkpoint::Checkpointer>>,
) -> Engine<FieldState> {
    let g = planwright_actors::field::graph(policy, options).unwrap();
    let mut b = Engine::builder(g).migration(runner::migration);
    if let Some(cp) = checkpointer {
        b = b.checkpointer(cp);
    }
    b.build().await
}

/// Runs a scenario to its end on a fresh engine, answering from its answers.
pub async fn run_scenario(
    policy: Arc<dyn FieldPolicy>,
    topology: Topology,
    sc: &Scenario,
    conversation: &str,
) -> AcquireRun {
    let options = GraphOptions {
        topology,
        model_retry: fast_retry(),
        ..GraphOptions::default()
    };
    let e = engine(policy, &options, None).await;
    let update = input::initial_update(
        conversation,
        "size it",
        sc.schema.clone(),
        sc.corpus.clone(),
    );
    let mut answers = sc.answers.clone();
    let run = runner::run(
        &e,
        topology,
        conversation,
        Start::Input(Box::new(update)),
        &mut answers,
    )
    .await
    .unwrap();
    e.shutdown().await;
    run
}

/// Model-call retries with millisecond backoff, for tests.
pub fn fast_retry() -> planwright::RetryPolicy {
    planwright::RetryPolicy::exponential(3, std::time::Duration::from_millis(1))
}

/// The offline model.
pub fn offline() -> Arc<dyn FieldPolicy> {
    Arc::new(OfflineFieldPolicy)
}

fn hash_of(seed: u64, v: &impl serde::Serialize) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    seed.hash(&mut h);
    serde_json::to_string(v).unwrap().hash(&mut h);
    h.finish()
}

/// A scripted model whose every answer is a pure function of (seed, request): any topology that
/// sends the same requests gets the same answers. Its decisions are deliberately unruly (derived,
/// core and unknown targets, repeated queries, early finishes, failures) so the policy stage's
/// rules all fire; extraction is the offline extractor's.
pub struct ScriptedPolicy {
    pub seed: u64,
    /// Requests already failed once with a transient error (about one in five fails once first).
    pub flaked: Mutex<std::collections::HashSet<u64>>,
}

impl ScriptedPolicy {
    /// A scripted model with this seed.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            flaked: Mutex::new(Default::default()),
        }
    }

    /// A transient error the first time some requests are seen (a rate limit, say): the retry
    /// within the model call must absorb it the same way in both topologies.
    fn flake(&self, h: u64) -> Result<(), PolicyError> {
        if (h >> 40) % 5 == 0 && self.flaked.lock().unwrap().insert(h) {
            return Err(PolicyError::Transient("scripted: rate limited".into()));
        }
        Ok(())
    }

    fn pick<'a, T>(&self, h: u64, k: u64, items: &'a [T]) -> &'a T {
        &items[((h >> (k * 7)) as usize) % items.len()]
    }
}

#[async_trait::async_trait]
impl FieldPolicy for ScriptedPolicy {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn decide(
        &self,
        req: &DecideRequest,
    ) -> Result<PolicyReply<PlannerDecision>, PolicyError> {
        let h = hash_of(self.seed, req);
        self.flake(h)?;
        let roll = h % 100;
        if roll < 3 {
            return Err(PolicyError::Failed("scripted: malformed decision".into()));
        }
        let mut targets: Vec<String> = req.schema.fields.iter().map(|f| f.name.clone()).collect();
        targets.push("no_such_field".into());
        let target = if !req.missing.is_empty() && (h >> 20) % 3 != 0 {
            self.pick(h, 4, &req.missing).clone()
        } else {
            self.pick(h, 5, &targets).clone()
        };
        let action = match roll {
            3..=47 => Action::Search,
            48..=72 => Action::AskUser,
            73..=80 => Action::Reflect,
            81..=93 => Action::Calculate,
            _ => Action::Finish,
        };
        let query = self
            .pick(h, 6, &["fixed query", "", "alpha beta"])
            .to_string();
        let mut d = PlannerDecision::new(action, Some(&target), "scripted");
        if !query.is_empty() {
            d = d.query(query);
        }
        Ok(PolicyReply::offline(d))
    }

    async fn decompose(
        &self,
        req: &DecomposeRequest,
    ) -> Result<PolicyReply<Decomposition>, PolicyError> {
        let h = hash_of(self.seed, req);
        let field = req
            .field
            .as_ref()
            .map(|f| f.name.clone())
            .unwrap_or_default();
        if h % 5 == 0 {
            return Err(PolicyError::Failed("scripted: no decomposition".into()));
        }
        let (p, q) = (format!("{field}_p"), format!("{field}_q"));
        let formula = if h % 7 == 0 {
            format!("{p} * unknown_thing")
        } else {
            format!("{p} * {q}")
        };
        Ok(PolicyReply::offline(Decomposition {
            field,
            components: vec![p.clone(), q.clone()],
            formula,
            descriptions: BTreeMap::from([
                (p.clone(), format!("{p} measure")),
                (q.clone(), format!("{q} measure")),
            ]),
            types: BTreeMap::new(),
        }))
    }

    async fn extract(
        &self,
        req: &ExtractRequest,
    ) -> Result<PolicyReply<ExtractAnswer>, PolicyError> {
        OfflineFieldPolicy.extract(req).await
    }

    async fn reflect(&self, req: &ReflectRequest) -> Result<PolicyReply<Reflection>, PolicyError> {
        Ok(PolicyReply::offline(Reflection {
            note: format!("scripted reflection on {} missing", req.missing.len()),
        }))
    }
}

/// Wraps a policy and records every request by call kind.
pub struct Counting {
    pub inner: Arc<dyn FieldPolicy>,
    pub seen: Mutex<HashMap<String, Vec<String>>>,
}

impl Counting {
    pub fn new(inner: Arc<dyn FieldPolicy>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            seen: Mutex::new(HashMap::new()),
        })
    }

    fn note(&self, call: &str, req: &impl serde::Serialize) {
        self.seen
            .lock()
            .unwrap()
            .entry(call.to_string())
            .or_default()
            .push(serde_json::to_string(req).unwrap());
    }

    /// Total calls.
    pub fn calls(&self) -> usize {
        self.seen.lock().unwrap().values().map(Vec::len).sum()
    }

    /// Requests sent more than once, by call kind.
    pub fn repeated(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (call, reqs) in self.seen.lock().unwrap().iter() {
            let mut sorted = reqs.clone();
            sorted.sort();
            for w in sorted.windows(2) {
                if w[0] == w[1] {
                    out.push((call.clone(), w[0].clone()));
                }
            }
        }
        out
    }
}

#[async_trait::async_trait]
impl FieldPolicy for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    async fn decide(
        &self,
        req: &DecideRequest,
    ) -> Result<PolicyReply<PlannerDecision>, PolicyError> {
        self.note("decide", req);
        self.inner.decide(req).await
    }
    async fn decompose(
        &self,
        req: &DecomposeRequest,
    ) -> Result<PolicyReply<Decomposition>, PolicyError> {
        self.note("decompose", req);
        self.inner.decompose(req).await
    }
    async fn extract(
        &self,
        req: &ExtractRequest,
    ) -> Result<PolicyReply<ExtractAnswer>, PolicyError> {
        self.note("extract", req);
        self.inner.extract(req).await
    }
    async fn reflect(&self, req: &ReflectRequest) -> Result<PolicyReply<Reflection>, PolicyError> {
        self.note("reflect", req);
        self.inner.reflect(req).await
    }
}

/// Checks the output contract's invariants: every target equals its formula over the output's
/// own fields (exact values: a rounded number's is in `exact`); every search quote appears
/// verbatim in its document; no derived field was searched for or asked about.
pub fn check_invariants(run: &AcquireRun, corpus: &[planwright_actors::tools::bm25::Document]) {
    let out = run.output_json();
    let fields = out["fields"].as_object().unwrap();
    let values: BTreeMap<String, Option<f64>> = fields
        .iter()
        .map(|(k, v)| {
            let exact = out["exact"]["fields"][k].as_f64();
            (k.clone(), exact.or(v["value"].as_f64()))
        })
        .collect();
    for t in &run.state.schema.targets {
        let f = run.state.schema.field(t).unwrap();
        if let Some(text) = &f.formula {
            let expect = formula::evaluate(text, &values).ok();
            let got = out["exact"]["targets"][t]
                .as_f64()
                .or(out["targets"][t].as_f64());
            match (expect, got) {
                (Some(e), Some(g)) => {
                    assert!((e - g).abs() <= 1e-9 * e.abs().max(1.0), "{t}: {e} vs {g}")
                }
                (None, None) => {}
                other => panic!(
                    "target {t}: formula gives {:?}, output says {:?}",
                    other.0, other.1
                ),
            }
        }
    }
    for (name, v) in fields {
        if v["provenance"]["kind"] == "search" {
            let id = v["provenance"]["source_id"].as_str().unwrap();
            let quote = v["provenance"]["quote"].as_str().unwrap();
            let doc = corpus
                .iter()
                .find(|d| d.id == id)
                .unwrap_or_else(|| panic!("{name}: unknown doc {id}"));
            assert!(doc.text.contains(quote), "{name}: quote not in {id}");
        }
    }
    for d in &run.state.decisions {
        if matches!(d.action, Action::Search | Action::AskUser) {
            let t = d.target.as_deref().unwrap_or("");
            let derived = run
                .state
                .schema
                .field(t)
                .is_some_and(|f| f.kind == planwright_actors::field::schema::Kind::Derived);
            assert!(
                !derived,
                "derived field `{t}` was the target of {:?}",
                d.action
            );
        }
    }
}

/// The output without the thread id (which differs by topology namespace).
pub fn comparable(run: &AcquireRun) -> Value {
    let mut out = run.output_json();
    out.as_object_mut().unwrap().remove("thread_id");
    out
}

/// A thread id helper.
pub fn thread(conversation: &str) -> ThreadId {
    runner::thread_for(conversation, Topology::Staged)
}
