//! What the real binary tells a newcomer: the top-level `--help` says what the tool does and
//! lists each command's purpose, no option's default is printed twice or empty (`acquire --rate`
//! shows its `FROM/TO=RATE` format), `serve --help` names the JWT algorithms `--jwks` accepts,
//! `bench` names its shape as `--shape` takes it, and `serve`'s startup line gives the studio's
//! address.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_planwright");

fn stdout_of(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn the_top_level_help_says_what_the_tool_does_and_what_each_command_is_for() {
    let help = stdout_of(&["--help"]);
    let first = help.lines().next().unwrap_or_default();
    assert!(
        !first.contains("Node actors, tools, models"),
        "the crate's description, not the tool's: {first}"
    );
    for words in ["research briefs", "HTTP", "load-test"] {
        assert!(help.contains(words), "`{words}` missing from:\n{help}");
    }
    for command in [
        "bench",
        "research",
        "research-eval",
        "load",
        "serve",
        "acquire",
    ] {
        let line = help
            .lines()
            .find(|l| l.split_whitespace().next() == Some(command))
            .unwrap_or_else(|| panic!("no line for `{command}` in:\n{help}"));
        assert!(
            line.split_whitespace().count() > 3,
            "`{command}` has no one-line purpose: {line}"
        );
    }
    assert!(help.contains("COMMAND --help"), "{help}");
}

#[test]
fn no_default_is_printed_twice() {
    for command in [
        "serve",
        "research",
        "research-eval",
        "acquire",
        "bench",
        "load",
    ] {
        let help = stdout_of(&[command, "--help"]);
        // An option's block runs from its `--flag` line to the next one.
        let mut blocks: Vec<String> = Vec::new();
        for line in help.lines() {
            if line.trim_start().starts_with("--") || line.trim_start().starts_with("-h,") {
                blocks.push(String::new());
            }
            if let Some(b) = blocks.last_mut() {
                b.push_str(line);
                b.push('\n');
            }
        }
        for b in &blocks {
            if b.contains("[default:") {
                let text = b.replace("[default:", "");
                assert!(
                    !text.contains("(default") && !text.contains("default:"),
                    "`{command} --help` gives a default twice:\n{b}"
                );
            }
        }
    }
}

#[test]
fn no_option_shows_an_empty_default_and_acquire_rate_shows_its_format() {
    for command in [
        "serve",
        "research",
        "research-eval",
        "acquire",
        "bench",
        "load",
    ] {
        let help = stdout_of(&[command, "--help"]);
        assert!(
            !help.contains("[default: \"\"]"),
            "`{command} --help` shows an empty default:\n{help}"
        );
    }
    let help = stdout_of(&["acquire", "--help"]);
    assert!(help.contains("--rate <FROM/TO=RATE>"), "{help}");
}

#[test]
fn serve_help_names_the_jwks_algorithms_the_server_accepts() {
    let help = stdout_of(&["serve", "--help"]);
    assert!(
        help.contains("RS256/RS384/RS512/ES256/ES384"),
        "serve --help:\n{help}"
    );
    assert!(help.contains("--ok-requires-auth"), "serve --help:\n{help}");
}

#[test]
fn bench_names_its_shape_as_the_flag_does() {
    for shape in ["loop", "fanout"] {
        let out = stdout_of(&["bench", "--shape", shape, "--reps", "1"]);
        assert!(
            out.starts_with(&format!("shape {shape} (")),
            "bench --shape {shape}: {out}"
        );
    }
}

#[test]
fn serve_says_where_it_listens_and_where_the_studio_is() {
    let dir = std::env::temp_dir().join(format!("planwright-help-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--checkpoint", "memory:"])
        .current_dir(&dir)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("listening on") {
                let _ = tx.send(line);
                return;
            }
        }
    });
    let line = rx.recv_timeout(Duration::from_secs(60));
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let line = line.expect("serve logs where it listens");
    let addr = line
        .split("listening on http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("an address")
        .to_string();
    assert!(!addr.ends_with(":0"), "the bound port, not 0: {line}");
    assert!(
        line.contains(&format!("http://{addr}/studio")),
        "the studio's address: {line}"
    );
}
