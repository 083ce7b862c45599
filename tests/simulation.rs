//! The simulator's CI mode (docs/reliability.md, "Simulation"): a few hundred seeds of the real
//! engine, writer, run store, leases and event log under seeded faults, each checked against
//! the invariants; a seed replayed gives the same digest; each bug switch is caught. The
//! workload's nodes call a simulated tool through the effect journal (`NodeContext::effect`):
//! the tool counts calls by key, and a key called again outside the window the journal cannot
//! close is a violation (docs/reliability.md, "Simulation").
//!
//! A failure names the seed and the command that replays it exactly.

use planwright::sim::{run_seed, Bug, SeedReport, SimConfig};

/// Runs `seeds` and fails with every violated invariant, its seed and its replay command.
fn hold(seeds: std::ops::Range<u64>, cfg: &SimConfig) -> Vec<SeedReport> {
    let reports: Vec<SeedReport> = seeds.map(|s| run_seed(s, cfg)).collect();
    let failed: Vec<String> = reports
        .iter()
        .filter(|r| !r.ok())
        .map(|r| {
            format!(
                "seed {}: {}\n  replay: {}",
                r.seed,
                r.violations.join("\n  "),
                r.replay_command(cfg)
            )
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    reports
}

#[test]
fn seeds_0_to_150_keep_every_invariant() {
    let reports = hold(0..150, &SimConfig::default());
    // The faults really happen: crashes, lost replies, takeovers.
    let total = |k: &str| -> u64 { reports.iter().filter_map(|r| r.counts.get(k)).sum() };
    assert!(total("crash") > 50, "crashes: {}", total("crash"));
    assert!(
        total("lost reply") > 50,
        "lost replies: {}",
        total("lost reply")
    );
    assert!(total("takeover") > 50, "takeovers: {}", total("takeover"));
    assert!(reports.iter().any(|r| r.replicas == 2));
    // The tool is called through the journal, and some calls are made again inside the window
    // (each counted with its reason; any other repeat is a violation `hold` reports).
    let (calls, keys) = reports
        .iter()
        .fold((0, 0), |(c, k), r| (c + r.tool_calls.0, k + r.tool_calls.1));
    let repeats = total("tool repeat");
    println!(
        "{calls} tool calls, {keys} keys, {repeats} repeats: {} reply lost, {} journal write \
         failed, {} process died, {} task stopped, {} overlapping run",
        total("tool repeat: reply lost"),
        total("tool repeat: journal write failed"),
        total("tool repeat: process died"),
        total("tool repeat: task stopped"),
        total("tool repeat: overlapping run"),
    );
    assert!(keys > 1_000, "{keys} keys");
    assert_eq!(calls - keys, repeats);
    // 56 of 1,207 when written: repeats are the exception.
    assert!(repeats > 0 && repeats * 10 < calls, "{repeats} of {calls}");
}

#[test]
fn seeds_150_to_300_keep_every_invariant() {
    hold(150..300, &SimConfig::default());
}

#[test]
fn a_world_without_faults_ends_as_the_reference() {
    let cfg = SimConfig {
        faults: false,
        ..SimConfig::default()
    };
    for r in hold(0..5, &cfg) {
        assert_eq!(r.counts.get("crash"), None, "seed {}", r.seed);
    }
}

#[test]
fn a_seed_replays_exactly() {
    // Forty seeds, and two that once hung or failed (574 broke an invariant before the tool
    // calls changed every seed's world).
    for seed in (0..40).chain([574, 1138]) {
        let cfg = SimConfig::default();
        let (a, b) = (run_seed(seed, &cfg), run_seed(seed, &cfg));
        assert_eq!(a.trace, b.trace, "seed {seed}: the traces differ");
        assert_eq!(a.digest, b.digest, "seed {seed}");
        assert_eq!(a.violations, b.violations, "seed {seed}");
    }
    // And another seed is another world.
    let cfg = SimConfig::default();
    assert_ne!(run_seed(3, &cfg).digest, run_seed(4, &cfg).digest);
}

/// The first seed from 0 at which the simulator catches `bug`, within `limit` seeds.
fn caught(bug: Bug, cfg: SimConfig, limit: u64) -> u64 {
    caught_in(bug, cfg, 0..limit)
}

/// The first seed of `seeds` at which the simulator catches `bug`.
fn caught_in(bug: Bug, cfg: SimConfig, seeds: std::ops::Range<u64>) -> u64 {
    let cfg = SimConfig {
        bugs: vec![bug],
        ..cfg
    };
    seeds
        .clone()
        .find(|s| !run_seed(*s, &cfg).ok())
        .unwrap_or_else(|| panic!("{bug:?} was not caught in seeds {seeds:?}"))
}

#[test]
fn forgetting_finished_tasks_is_caught() {
    // Found first at seed 3; in 14 of seeds 0..100.
    let at = caught(Bug::ForgetFinishedTasks, SimConfig::default(), 40);
    println!("forget-finished-tasks caught at seed {at}");
}

#[test]
fn appending_anywhere_in_a_run_log_is_caught() {
    // Found first at seed 0; in 37 of seeds 0..100.
    let at = caught(Bug::AppendAnywhere, SimConfig::default(), 40);
    println!("append-anywhere caught at seed {at}");
}

#[test]
fn writing_without_a_fence_after_a_takeover_is_caught() {
    // Needs a process that lost a run and writes on (cut off, paused, its clock behind): two
    // replicas in every seed.
    let cfg = SimConfig {
        replicas: Some(2),
        ..SimConfig::default()
    };
    // Found first at seed 675 (seeds 0 to 674 keep every invariant with the switch on: the
    // search from 0 takes about 30 s of a debug build); in 10 of seeds 0..2,300. The test
    // searches from seed 600 to keep CI short (`simulate --seeds 700 --replicas 2 --bug
    // no-fence` shows the rest).
    let at = caught_in(Bug::NoFence, cfg, 600..800);
    println!("no-fence caught at seed {at}");
}

#[test]
fn ignoring_the_effect_journal_lookup_is_caught() {
    // Found first at seed 1; in 32 of seeds 0..100.
    let at = caught(Bug::SkipEffectLookup, SimConfig::default(), 20);
    println!("skip-effect-lookup caught at seed {at}");
}

#[test]
fn skipping_the_effect_journal_write_is_caught() {
    // Found first at seed 10; in 23 of seeds 0..100.
    let at = caught(Bug::SkipEffectWrite, SimConfig::default(), 30);
    println!("skip-effect-write caught at seed {at}");
}

#[test]
fn a_crash_at_every_storage_call_keeps_every_invariant() {
    // One process, two conversations (one fans out, one does not); the process crashes once,
    // at each storage call in turn, before the statement and after it commits; a new process
    // takes the runs over.
    let base = SimConfig {
        replicas: Some(1),
        conversations: 2,
        ..SimConfig::default()
    };
    let clean = SimConfig {
        faults: false,
        ..base.clone()
    };
    let reference = hold(1..2, &clean).remove(0);
    let calls = reference.storage_calls;
    assert!(calls > 20, "{calls} storage calls");
    // Three `work` tasks and one `solo`: four keys, each called once.
    assert_eq!(reference.tool_calls, (4, 4));
    let (mut crashes, mut tool_calls, mut again) = (0, 0, 0);
    let mut reasons = std::collections::BTreeMap::<String, u64>::new();
    for at in 0..calls {
        for after in [false, true] {
            let cfg = SimConfig {
                crash_at: Some((at, after)),
                ..base.clone()
            };
            let r = hold(1..2, &cfg).remove(0);
            crashes += r.counts.get("crash").copied().unwrap_or(0);
            // Counted at the tool, by key: the same four keys, each applied once (`hold`
            // checks it), called again only where the crash fell inside a call's window.
            let (c, keys) = r.tool_calls;
            assert!(keys <= 4, "crash at {at} (after: {after}): {keys} keys");
            tool_calls += c;
            again += c - keys;
            for (k, n) in &r.counts {
                if k.starts_with("tool repeat: ") {
                    *reasons.entry(k.clone()).or_default() += n;
                }
            }
        }
    }
    println!(
        "{calls} storage calls, {crashes} crashes; {tool_calls} tool calls, {again} made again \
         ({reasons:?})"
    );
    assert!(crashes as f64 >= calls as f64 * 1.5, "{crashes} crashes");
    // A crash between a call and its journal write makes it again; most crashes fall elsewhere.
    assert!(
        again > 0 && again * 10 < tool_calls,
        "{again} of {tool_calls}"
    );
}
