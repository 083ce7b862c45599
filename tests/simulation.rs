//! The simulator's CI mode (docs/reliability.md, "Simulation"): a few hundred seeds of the real
//! engine, writer, run store, leases and event log under seeded faults, each checked against
//! the invariants; a seed replayed gives the same digest; each bug switch is caught.
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
    // Forty seeds, and two that once hung or failed (574 breaks an invariant: its failure
    // replays too).
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
    let cfg = SimConfig {
        bugs: vec![bug],
        ..cfg
    };
    (0..limit)
        .find(|s| !run_seed(*s, &cfg).ok())
        .unwrap_or_else(|| panic!("{bug:?} was not caught in {limit} seeds"))
}

#[test]
fn forgetting_finished_tasks_is_caught() {
    // Found first at seed 10; in 15 of seeds 0..100.
    let at = caught(Bug::ForgetFinishedTasks, SimConfig::default(), 40);
    println!("forget-finished-tasks caught at seed {at}");
}

#[test]
fn appending_anywhere_in_a_run_log_is_caught() {
    // Found first at seed 4; in 34 of seeds 0..100.
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
    // Found first at seed 212; in 2 of seeds 0..300.
    let at = caught(Bug::NoFence, cfg, 300);
    println!("no-fence caught at seed {at}");
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
    let calls = hold(1..2, &clean)[0].storage_calls;
    assert!(calls > 20, "{calls} storage calls");
    let mut crashes = 0;
    for at in 0..calls {
        for after in [false, true] {
            let cfg = SimConfig {
                crash_at: Some((at, after)),
                ..base.clone()
            };
            let r = hold(1..2, &cfg).remove(0);
            crashes += r.counts.get("crash").copied().unwrap_or(0);
        }
    }
    println!("{calls} storage calls, {crashes} crashes");
    assert!(crashes as f64 >= calls as f64 * 1.5, "{crashes} crashes");
}
