//! Trains the research planner's checkpoint dictionary (`fixtures/research/checkpoints.zdict`).
//!
//! Samples: the checkpoints of the evaluation set's goals on its own corpora — every corpus but
//! the bundled one, which `load`, the README and `tests/research_dictionary.rs` use, so the
//! saving measured there is not the dictionary remembering its own training text — under the
//! offline policy and under the simulated model (its errors and retries write other records).
//!
//! ```sh
//! cargo run --release -p planwright-actors --example research_dictionary
//! ```

use planwright_actors::research::dictionary::sample_records;
use planwright_actors::research::eval::EvalSet;
use planwright_actors::research::ResearchInput;
use std::path::Path;

/// The dictionary's size: 16 KiB took a research conversation's bodies from 4,956 to ~2,400
/// bytes, 8 KiB to ~2,600, 32 KiB to ~2,300 (measured on the bundled goals).
const SIZE: usize = 16 * 1024;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("the workspace root")?;
    let set = EvalSet::load(&root.join("fixtures/research/eval/set.json"))?;
    let goals: Vec<ResearchInput> = set
        .goals
        .iter()
        .filter(|g| g.corpus != "bundled")
        .map(|g| ResearchInput {
            input: g.input.clone(),
            constraints: g.constraints.clone(),
            source_notes: set.corpora.get(&g.corpus).map(|n| n.as_ref().clone()),
        })
        .collect();
    let models = [
        "offline",
        "sim:p50=1ms,p99=2ms,errors=0.05,seed=1",
        "sim:p50=1ms,p99=2ms,errors=0.05,seed=2",
        "sim:p50=1ms,p99=2ms,errors=0.05,seed=3",
    ];
    let samples = sample_records(&goals, &models).await?;
    let dict = zstd::dict::from_samples(&samples, SIZE)?;
    let out = root.join("fixtures/research/checkpoints.zdict");
    std::fs::write(&out, &dict)?;
    println!(
        "{} goals, {} samples ({} bytes) -> {} ({} bytes, id {})",
        goals.len(),
        samples.len(),
        samples.iter().map(Vec::len).sum::<usize>(),
        out.display(),
        dict.len(),
        zstd::zstd_safe::get_dict_id_from_dict(&dict).map_or(0, |i| i.get())
    );
    Ok(())
}
