//! The research planner's checkpoint dictionary, checked where it was not trained: the bundled
//! goals on the bundled corpus (the ones `load` and the README use; the dictionary is trained on
//! the evaluation set's other corpora). Its records name it, read back, and take well under what
//! plain zstd makes of them — a dictionary gone stale (the state's shape changed, say) fails
//! here before it costs bytes in production.

use planwright::checkpoint::body_codec::{self, dictionary, encode, encode_with};
use planwright_actors::load::load_goals;
use planwright_actors::research::dictionary::{sample_records, DICTIONARY};
use planwright_actors::research::ResearchInput;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dictionary_shrinks_records_of_goals_it_was_not_trained_on() {
    let goals: Vec<ResearchInput> = load_goals(None)
        .unwrap()
        .into_iter()
        .map(|g| serde_json::from_value(g).unwrap())
        .collect();
    assert!(goals.len() >= 5, "the bundled goals");
    let samples = sample_records(
        &goals,
        &["offline", "sim:p50=1ms,p99=2ms,errors=0.05,seed=9"],
    )
    .await
    .unwrap();
    let dict = dictionary(DICTIONARY).unwrap();
    let (mut json, mut plain, mut with_dict) = (0usize, 0usize, 0usize);
    for s in &samples {
        let stored = encode_with(s.clone(), Some(dict));
        assert_eq!(body_codec::decode(&stored).unwrap().as_ref(), s.as_slice());
        if stored.len() < s.len() {
            assert_eq!(
                zstd::zstd_safe::get_dict_id_from_frame(&stored).map(|i| i.get()),
                Some(dict.id()),
                "a compressed record names the dictionary"
            );
        }
        json += s.len();
        plain += encode(s.clone()).len();
        with_dict += stored.len();
    }
    eprintln!(
        "{} records: JSON {json} B, zstd {plain} B, zstd with the dictionary {with_dict} B",
        samples.len()
    );
    // Measured when the dictionary was trained: ~49 % of plain zstd on the load's records.
    assert!(
        with_dict * 10 <= plain * 6,
        "the dictionary saves too little: {with_dict} B against {plain} B without it — retrain it \
         (cargo run --release -p planwright-actors --example research_dictionary)"
    );
}

#[test]
fn the_research_graph_compresses_against_the_shipped_dictionary() {
    let graph = planwright_actors::research::graph(
        std::sync::Arc::new(planwright_actors::research::OfflineResearchPolicy),
        Default::default(),
    )
    .unwrap();
    assert_eq!(
        graph.body_dictionary().map(|d| d.id()),
        Some(dictionary(DICTIONARY).unwrap().id())
    );
}
