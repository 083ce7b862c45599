//! `load` on the command line: the run, its summary on stdout, the report written last, and
//! Ctrl-C. The summary is printed before the report is written, so a report that cannot be
//! written at the end still leaves the figures on the screen. The first Ctrl-C stops arrivals,
//! gives the conversations in flight `--grace` to end (then cuts them off), and prints and writes
//! what was measured, marked interrupted; a second Ctrl-C exits at once.
//!
//! Exit codes: 0 when every threshold held (without thresholds: no conversation failed or was cut
//! off and no worker died), 1 when a threshold was crossed (or, without thresholds, a conversation
//! failed or was cut off, or a worker died), the run could not complete or the report could not be written, 2 for bad input (flags,
//! scenario file, model spec, malformed checkpoint URL, a `--report` folder that is missing or
//! not writable), 130 when interrupted.

use super::{LoadArgs, LoadError};
use std::process::ExitCode;
use tokio::sync::watch;

/// The exit code of an interrupted run (128 + SIGINT, as shells report it).
pub const INTERRUPTED: u8 = 130;

/// Says why `command` could not run and gives its exit code: 2 for bad input (a usage error, a
/// model spec, a malformed checkpoint URL: the error alone), 1 for anything else (with its causes).
fn failed(command: &str, e: &LoadError) -> ExitCode {
    match e {
        LoadError::Usage(_)
        | LoadError::Model(_)
        | LoadError::Checkpoint(planwright::checkpoint::CheckpointError::BadUrl { .. }) => {
            eprintln!("{command}: {e}");
            ExitCode::from(2)
        }
        _ => {
            eprintln!("{command}: {}", planwright::ErrorChain(e));
            ExitCode::from(1)
        }
    }
}

/// Runs `load` as the command does and gives its exit code.
pub async fn run(args: &LoadArgs) -> ExitCode {
    if let Some(addr) = &args.worker {
        return match super::workers::serve(addr).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("load --worker: {e}");
                ExitCode::from(2)
            }
        };
    }
    let interrupt = on_ctrl_c();
    let measured = if args.coordinator {
        let argv = super::workers::worker_argv(std::env::args());
        super::workers::coordinate(args, argv, Some(interrupt)).await
    } else {
        super::measure(args, Some(interrupt)).await
    };
    let report = match measured {
        Ok(r) => r,
        Err(e) => return failed("load", &e),
    };
    println!("{}", report.to_text());
    if let Err(e) = super::write_report(args.report.as_deref(), &report) {
        eprintln!("load: {e}");
        return ExitCode::from(1);
    }
    if report.interrupted {
        return ExitCode::from(INTERRUPTED);
    }
    let ok = if report.thresholds.is_empty() {
        report.failed == 0 && report.cut_off == 0 && report.workers.iter().all(|w| w.died.is_none())
    } else {
        report.thresholds_passed()
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Runs `load sweep` and gives its exit code: 0 when the first rate held (a later rate breaking
/// is what a sweep looks for), 1 when not even the first held or the report could not be
/// written, 2 for bad input, 130 when interrupted. The summary is printed first, the report
/// (`--report`) written after.
pub async fn sweep(args: &super::sweep::SweepArgs) -> ExitCode {
    let interrupt = on_ctrl_c();
    let report = match super::sweep::run(args, Some(interrupt)).await {
        Ok(r) => r,
        Err(e) => return failed("load sweep", &e),
    };
    println!("{}", report.to_text());
    if let Err(e) = super::write_sweep(args.run.report.as_deref(), &report) {
        eprintln!("load sweep: {e}");
        return ExitCode::from(1);
    }
    if report.interrupted {
        ExitCode::from(INTERRUPTED)
    } else if report.highest_rate_held.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Listens for Ctrl-C: the first sets the returned flag (and says so on stderr), the second exits
/// the process at once.
fn on_ctrl_c() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            // No signal handler could be installed: Ctrl-C keeps its default (exit at once).
            return;
        }
        eprintln!(
            "load: interrupted; no new conversations start, those in flight get --grace to end, then the summary and report follow (Ctrl-C again to exit at once)"
        );
        let _ = tx.send(true);
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("load: interrupted twice; exiting without a report");
            std::process::exit(i32::from(INTERRUPTED));
        }
    });
    rx
}
