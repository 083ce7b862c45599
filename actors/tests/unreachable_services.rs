//! An unreachable PostgreSQL or model server is said at once on stderr — what is retried, why,
//! and for how long — while the command is still waiting, not only when it gives up. Both point
//! at 127.0.0.1:1, where nothing listens.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `planwright args` and returns it with its first stderr line.
fn first_stderr_line(
    args: &[&str],
    env: &[(&str, &str)],
) -> (Running, BufReader<std::process::ChildStderr>, String) {
    let mut child = Running(
        Command::new(env!("CARGO_BIN_EXE_planwright"))
            .args(args)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stderr = BufReader::new(child.0.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    (child, stderr, line)
}

#[test]
fn an_unreachable_postgresql_is_said_at_once_with_how_long_it_is_retried() {
    let (mut child, mut stderr, line) = first_stderr_line(
        &[
            "research",
            "--checkpoint",
            "postgres://postgres@127.0.0.1:1/test?retry_for=3s",
            "--goal",
            "pet insurance in Australia",
        ],
        &[],
    );
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "said while still retrying: {line}"
    );
    assert!(
        line.contains("PostgreSQL is unreachable") && line.contains("refused"),
        "what and why: {line}"
    );
    assert!(line.contains("retrying for 3s"), "how long: {line}");
    let status = child.0.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(!status.success());
    assert!(
        rest.contains("gave up after"),
        "then the final error: {rest}"
    );
    assert_eq!(
        rest.matches("retrying").count(),
        0,
        "one line while it waits, not one per attempt: {rest}"
    );
}

#[test]
fn an_unreachable_model_server_is_said_at_once_with_its_cause() {
    let (mut child, mut stderr, line) = first_stderr_line(
        &[
            "research",
            "--model",
            "openai",
            "--goal",
            "pet insurance in Australia",
        ],
        &[
            ("PLANWRIGHT_MODEL", "test-model"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:1/v1"),
        ],
    );
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "said while still retrying: {line}"
    );
    assert!(
        line.contains("the model server at http://127.0.0.1:1/v1 failed"),
        "{line}"
    );
    assert!(line.contains("refused"), "the cause: {line}");
    assert!(
        line.contains("retrying 4 times over at most 7.5s"),
        "{line}"
    );
    // The model's retries are the only ones: the node does not call it again (each call would
    // start the model's retries anew, warn again, and outlast the wait announced).
    let status = child.0.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(
        status.success() || status.code() == Some(1),
        "{status:?}: {rest}"
    );
    assert_eq!(
        rest.matches("retrying").count(),
        0,
        "one warning for the run, not one per node attempt: {rest}"
    );
}
