//! The simulator's long mode: runs many seeds on every core (one single-threaded runtime per
//! OS thread) and prints each failure with its seed and the command that replays it.
//!
//! ```text
//! cargo run --release -p planwright --example simulate -- --seeds 10000
//! cargo run -p planwright --example simulate -- --seed 4242 --trace
//! cargo run -p planwright --example simulate -- --seeds 200 --bug no-fence
//! ```
//!
//! Options: `--seeds N` (default 1,000) from `--from S` (default 0); `--seed S` runs one seed;
//! `--trace` prints its trace; `--bug NAME` turns a bug switch on (repeatable; names:
//! `forget-finished-tasks`, `append-anywhere`, `no-fence`, `skip-effect-lookup`,
//! `skip-effect-write`); `--replicas N` fixes the number of processes; `--conversations N`
//! (default 4); `--threads N` (default: every core); `--no-faults`; `--crash-at K
//! --crash-before|--crash-after` crashes the process at storage call K instead of random faults
//! (each seed's report and failure print the exact command). Exits 1 when a seed failed.

use planwright::sim::{run_seed, Bug, SimConfig};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut cfg = SimConfig::default();
    let (mut from, mut seeds, mut one, mut trace) = (0u64, 1_000u64, None, false);
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let num = |v: Option<String>, what: &str| -> u64 {
        v.and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            eprintln!("{what} needs a number");
            std::process::exit(2)
        })
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seeds" => seeds = num(args.next(), "--seeds"),
            "--from" => from = num(args.next(), "--from"),
            "--seed" => one = Some(num(args.next(), "--seed")),
            "--trace" => trace = true,
            "--no-faults" => cfg.faults = false,
            "--crash-at" => {
                let at = num(args.next(), "--crash-at");
                cfg.crash_at = Some((at, cfg.crash_at.is_some_and(|c| c.1)));
            }
            "--crash-after" => cfg.crash_at = cfg.crash_at.map(|(at, _)| (at, true)),
            "--crash-before" => cfg.crash_at = cfg.crash_at.map(|(at, _)| (at, false)),
            "--replicas" => cfg.replicas = Some(num(args.next(), "--replicas") as usize),
            "--conversations" => cfg.conversations = num(args.next(), "--conversations") as usize,
            "--threads" => threads = num(args.next(), "--threads").max(1) as usize,
            "--bug" => match args.next().as_deref().and_then(Bug::parse) {
                Some(b) => cfg.bugs.push(b),
                None => {
                    let names: Vec<&str> = Bug::ALL.iter().map(|b| b.name()).collect();
                    eprintln!("--bug needs one of: {}", names.join(", "));
                    std::process::exit(2)
                }
            },
            other => {
                eprintln!("unknown argument `{other}` (see the example's doc comment)");
                std::process::exit(2)
            }
        }
    }
    if let Some(seed) = one {
        let r = run_seed(seed, &cfg);
        if trace {
            for line in &r.trace {
                println!("{line}");
            }
        }
        println!(
            "seed {seed}: {} replicas, {} runs, {} tool calls under {} keys, digest {:016x}, {:?}",
            r.replicas, r.runs, r.tool_calls.0, r.tool_calls.1, r.digest, r.counts
        );
        for v in &r.violations {
            println!("  violated: {v}");
        }
        std::process::exit(i32::from(!r.ok()));
    }
    let next = AtomicU64::new(from);
    let failed = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= from + seeds {
                    return;
                }
                let r = run_seed(seed, &cfg);
                if !r.ok() {
                    failed.fetch_add(1, Ordering::Relaxed);
                    println!("seed {seed} FAILED:");
                    for v in &r.violations {
                        println!("  violated: {v}");
                    }
                    println!("  replay: {}", r.replay_command(&cfg));
                }
            });
        }
    });
    let failed = failed.into_inner();
    println!(
        "{seeds} seeds from {from} on {threads} threads in {:.1} s: {failed} failed",
        started.elapsed().as_secs_f64()
    );
    std::process::exit(i32::from(failed > 0));
}
