//! Where the commands keep threads, on the real binary in a scratch working directory: `research`
//! and `acquire` keep them by default in a SQLite file under `.planwright/`, and the command line
//! a paused run prints, run as printed by a shell, answers it and finishes (with the default, and
//! with `--checkpoint` pointing elsewhere); a SQLite path whose directory does not exist is refused
//! naming it and creates nothing unless `?create_dirs=true`; a command that fails before it does
//! work (a resume of an unknown thread, `serve` on a busy port) leaves no file behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GOAL: &str =
    "Should our support team adopt retrieval-augmented generation for customer support?";

/// A fresh, empty working directory.
fn workdir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-storage-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn planwright(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_planwright"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The line after `heading` in `out`'s stdout: the command a paused run prints.
fn printed_command(out: &Output, heading: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with(heading));
    assert!(lines.next().is_some(), "no `{heading}` in {}", text(out));
    lines.next().unwrap_or_default().trim().to_string()
}

/// Runs `line` with a POSIX shell in `dir`, as a person pasting it would.
fn shell(dir: &Path, line: &str) -> Output {
    Command::new("sh")
        .current_dir(dir)
        .args(["-c", line])
        .output()
        .unwrap()
}

/// Every entry of `dir`, for "nothing was created" checks.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Pauses a research run for approval in `dir` with `extra` flags, runs the approval command it
/// prints, and checks the run finished from the stored thread.
fn research_pauses_and_the_printed_command_finishes_it(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "research",
        "--goal",
        GOAL,
        "--constraints",
        r#"{"require_approval": true}"#,
    ];
    args.extend(extra);
    let paused = planwright(dir, &args);
    assert_eq!(paused.status.code(), Some(0), "{}", text(&paused));
    let stderr = String::from_utf8_lossy(&paused.stderr);
    assert!(
        !stderr.contains("not saved") && !stderr.contains("lost"),
        "{stderr}"
    );
    let line = printed_command(&paused, "Approve with:");
    assert!(line.contains("--resume"), "{line}");
    let done = shell(dir, &line);
    assert_eq!(done.status.code(), Some(0), "`{line}`: {}", text(&done));
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(stdout.contains("Status: ok"), "`{line}`: {}", text(&done));
    assert!(stdout.contains("# Research brief"), "{}", text(&done));
    line
}

#[test]
fn research_keeps_threads_under_dot_planwright_and_its_printed_command_resumes() {
    let dir = workdir("research-default");
    let line = research_pauses_and_the_printed_command_finishes_it(&dir, &[]);
    assert!(
        !line.contains("--checkpoint"),
        "the default needs no flag: {line}"
    );
    assert!(dir.join(".planwright/research.db").is_file());
}

#[test]
fn research_with_checkpoint_elsewhere_prints_a_command_that_names_it() {
    let dir = workdir("research-elsewhere");
    let store = workdir("research-elsewhere-store");
    let url = format!("sqlite:{}", store.join("my threads.db").display());
    let line = research_pauses_and_the_printed_command_finishes_it(
        &dir,
        &["--checkpoint", &url, "--thread", "t1"],
    );
    assert!(line.contains("--checkpoint"), "{line}");
    assert!(line.contains("--thread t1"), "{line}");
    assert!(store.join("my threads.db").is_file());
    assert!(
        entries(&dir).is_empty(),
        "nothing under the working directory"
    );
}

#[test]
fn acquire_prints_a_command_that_names_its_checkpoint_and_answers_the_question() {
    let dir = workdir("acquire-elsewhere");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/field");
    std::fs::write(
        dir.join("answers.json"),
        r#"{"region": "Rivertown", "currency": "EUR"}"#,
    )
    .unwrap();
    let fx = |name: &str| fixtures.join(name).display().to_string();
    let paused = planwright(
        &dir,
        &[
            "acquire",
            "--schema",
            &fx("bikes.schema.json"),
            "--corpus",
            &fx("bikes.corpus.json"),
            "--answers",
            "answers.json",
            "--checkpoint",
            "sqlite:mine.db",
        ],
    );
    assert_eq!(paused.status.code(), Some(0), "{}", text(&paused));
    let line = printed_command(&paused, "Answer with");
    assert!(line.contains("--checkpoint sqlite:mine.db"), "{line}");
    let answered = line.replace("--resume ANSWER", "--resume 1800");
    assert_ne!(answered, line, "{line}");
    let done = shell(&dir, &answered);
    assert_eq!(done.status.code(), Some(0), "`{answered}`: {}", text(&done));
    assert!(
        String::from_utf8_lossy(&done.stdout).contains("status: ok"),
        "{}",
        text(&done)
    );
    assert!(!dir.join(".planwright").exists(), "only the file named");
}

#[test]
fn research_help_says_where_threads_are_kept() {
    let help = planwright(&workdir("help"), &["research", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains(".planwright/"), "{help}");
    assert!(help.contains("sqlite:.planwright/research.db"), "{help}");
}

#[test]
fn a_sqlite_path_in_a_missing_directory_is_refused_naming_it_and_creates_nothing() {
    let dir = workdir("typo");
    let missing = dir.join("no/such/dir");
    let url = format!("sqlite:{}", missing.join("x.db").display());
    let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/field/bikes.schema.json")
        .display()
        .to_string();
    let commands: [Vec<&str>; 3] = [
        vec!["research", "--goal", GOAL, "--checkpoint", &url],
        vec!["acquire", "--schema", &schema, "--checkpoint", &url],
        vec!["serve", "--addr", "127.0.0.1:0", "--checkpoint", &url],
    ];
    for args in commands {
        let out = planwright(&dir, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            err.contains(&missing.display().to_string()),
            "{args:?}: {err}"
        );
        assert!(err.contains("create_dirs=true"), "{args:?}: {err}");
        assert!(
            entries(&dir).is_empty(),
            "{args:?} created {:?}",
            entries(&dir)
        );
    }
    // Asked for, the directory is made.
    let made = format!("{url}?create_dirs=true");
    let out = planwright(&dir, &["research", "--goal", GOAL, "--checkpoint", &made]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(missing.join("x.db").is_file());
}

#[test]
fn resuming_an_unknown_thread_is_refused_and_leaves_no_file() {
    let dir = workdir("unknown");
    let cases: [Vec<&str>; 5] = [
        vec![
            "research",
            "--thread",
            "nobody",
            "--resume",
            r#"{"action": "approve"}"#,
        ],
        vec!["research", "--thread", "nobody"],
        vec![
            "research",
            "--checkpoint",
            "sqlite:t.db",
            "--thread",
            "nobody",
            "--resume",
            r#"{"action": "approve"}"#,
        ],
        vec!["acquire", "--thread", "nobody", "--resume", "3"],
        vec![
            "acquire",
            "--checkpoint",
            "sqlite:t.db",
            "--thread",
            "nobody",
            "--resume",
            "3",
        ],
    ];
    for args in cases {
        let out = planwright(&dir, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(err.contains("`nobody"), "{args:?}: {err}");
        assert!(
            entries(&dir).is_empty(),
            "{args:?} created {:?}",
            entries(&dir)
        );
    }
}

#[test]
fn serve_on_a_busy_port_leaves_no_file() {
    let dir = workdir("busy");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for extra in [vec![], vec!["--checkpoint", "sqlite:s.db"]] {
        let mut args = vec!["serve", "--addr", &addr];
        args.extend(extra);
        let out = planwright(&dir, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&addr),
            "{}",
            text(&out)
        );
        assert!(
            entries(&dir).is_empty(),
            "{args:?} created {:?}",
            entries(&dir)
        );
    }
}
