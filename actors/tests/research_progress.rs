//! `research` while nodes run: a spinner naming the running nodes on stderr when stderr is a
//! terminal (through `script`, which gives the command a pseudo-terminal), and nothing extra on
//! stderr when it is piped.

use std::process::Command;

const GOAL: &str = "pet insurance market in Australia";

#[test]
fn piped_stderr_stays_empty() {
    let out = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args(["research", "--model", "sim:p50=20ms,p99=50ms,seed=1"])
        .args(["--checkpoint", "memory:", "--goal", GOAL])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("Plan from create_plan:"), "{stdout}");
    assert_eq!(stderr, "", "nothing extra when piped");
    assert!(!stdout.contains("running create_plan"), "{stdout}");
}

#[test]
fn a_terminal_sees_the_running_nodes() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` to give the command a terminal");
        return;
    }
    let cmd = format!(
        "{} research --model sim:p50=100ms,p99=200ms,seed=1 --checkpoint memory: --goal '{GOAL}'",
        env!("CARGO_BIN_EXE_planwright")
    );
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{screen}");
    assert!(screen.contains("running create_plan"), "{screen}");
    assert!(screen.contains("Plan from create_plan:"), "{screen}");
}
