//! The docs check: every shell example in `README.md` and `docs/*.md` fenced as ```` ```sh runnable ````
//! runs against the `planwright` binary cargo built for this test, each in a scratch directory of
//! its own, and the check fails when one exits non-zero. A newcomer pastes these blocks first, so
//! a flag renamed or a fixture moved must break the build, not the newcomer's first hour.
//!
//! How a block runs (the rules are in the README's "Docs examples" part):
//! - with `bash -euo pipefail`, so any failing command fails the block;
//! - in an empty directory holding a link `fixtures` to the repository's fixtures, so the paths
//!   the docs use resolve and whatever an example writes (`.planwright/`, reports) is thrown away;
//! - with the built binary first on `PATH` as `planwright`, and `cargo run --release -- ARGS`
//!   standing for `planwright ARGS` (the README's first commands work from a fresh clone; here they
//!   run the binary under test instead of building a release binary);
//! - offline: the model environment variables are removed, so `--model` defaults stay offline;
//! - for at most [`BLOCK_TIMEOUT`] seconds.
//!
//! Only blocks that are cheap and need nothing outside the repository are tagged: research with
//! the offline model, acquire with an answers file, load with small numbers.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The info string that marks a block to run.
const TAG: &str = "runnable";
/// Seconds one block may take (the whole check takes a few seconds).
const BLOCK_TIMEOUT: u32 = 120;

/// One fenced block to run.
#[derive(Debug)]
struct Block {
    /// Where it is, `docs/x.md:12`.
    at: String,
    /// Its lines.
    code: String,
}

/// The ```` ```sh runnable ```` blocks of a Markdown text (`file` names it in messages).
fn runnable_blocks(file: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            Some((start, code)) => {
                if trimmed.starts_with("```") {
                    out.push(Block {
                        at: format!("{file}:{start}"),
                        code: std::mem::take(code),
                    });
                    open = None;
                } else {
                    code.push_str(line);
                    code.push('\n');
                }
            }
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let mut words = info.split_whitespace();
                    if words.next() == Some("sh") && words.any(|w| w == TAG) {
                        open = Some((i + 1, String::new()));
                    }
                }
            }
        }
    }
    assert!(open.is_none(), "{file}: a runnable block is never closed");
    out
}

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("actors/ has a parent")
        .to_path_buf()
}

/// `README.md` and every `docs/*.md`, as (name relative to the root, text).
fn markdown_files() -> Vec<(String, String)> {
    let root = root();
    let mut names = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|n| {
            let text = std::fs::read_to_string(root.join(&n)).expect("a doc is readable");
            (n, text)
        })
        .collect()
}

/// What every block runs after.
const PRELUDE: &str = r#"
cargo() {
  if [ "${1:-}" = run ] && [ "${2:-}" = --release ] && [ "${3:-}" = -- ]; then
    shift 3
    planwright "$@"
  else
    echo "docs check: only \`cargo run --release -- ARGS\` runs here, not \`cargo $*\`" >&2
    return 2
  fi
}
"#;

/// Runs one block in a fresh scratch directory; `Err` holds what went wrong, for the report.
fn run(block: &Block, scratch: &Path) -> Result<(), String> {
    std::fs::create_dir_all(scratch).map_err(|e| format!("scratch dir: {e}"))?;
    #[cfg(unix)]
    {
        let link = scratch.join("fixtures");
        if !link.exists() {
            std::os::unix::fs::symlink(root().join("fixtures"), &link)
                .map_err(|e| format!("fixtures link: {e}"))?;
        }
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_planwright"));
    let bin_dir = bin.parent().expect("the binary is in a directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = format!("{PRELUDE}\n{}", block.code);
    let out = Command::new("timeout")
        .arg(BLOCK_TIMEOUT.to_string())
        .args(["bash", "-euo", "pipefail", "-c", &script])
        .current_dir(scratch)
        .env("PATH", path)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("PLANWRIGHT_MODEL")
        .env_remove("RUST_LOG")
        .output()
        .map_err(|e| format!("cannot start bash: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let tail = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    };
    let why = match out.status.code() {
        Some(124) => format!("took longer than {BLOCK_TIMEOUT} s"),
        Some(c) => format!("exited {c}"),
        None => "was killed by a signal".to_string(),
    };
    Err(format!(
        "{}: the example {why}\n--- block ---\n{}--- stdout (end) ---\n{}\n--- stderr (end) ---\n{}",
        block.at,
        block.code,
        tail(&out.stdout),
        tail(&out.stderr)
    ))
}

/// Runs `blocks`, each in its own directory under `scratch`; the failures' reports.
fn run_all(blocks: &[Block], scratch: &Path) -> Vec<String> {
    blocks
        .iter()
        .enumerate()
        .filter_map(|(i, b)| run(b, &scratch.join(format!("block-{i}"))).err())
        .collect()
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("docs-examples-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn every_runnable_example_in_the_docs_runs() {
    let blocks: Vec<Block> = markdown_files()
        .iter()
        .flat_map(|(name, text)| runnable_blocks(name, text))
        .collect();
    assert!(
        blocks.len() >= 5,
        "the docs tag only {} runnable examples: the tag is `{TAG}` after `sh`",
        blocks.len()
    );
    let dir = scratch("docs");
    let failures = run_all(&blocks, &dir);
    assert!(
        failures.is_empty(),
        "{} of {} runnable doc examples failed:\n\n{}",
        failures.len(),
        blocks.len(),
        failures.join("\n\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_example_fails_the_check_and_is_named() {
    let doc = "text\n\n```sh runnable\nplanwright research --goal x --no-such-flag\n```\n\n\
               ```sh\nnot tagged, never run\n```\n\n```sh runnable\nplanwright --version\n```\n";
    let blocks = runnable_blocks("docs/x.md", doc);
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert_eq!(blocks[0].at, "docs/x.md:3");
    let dir = scratch("broken");
    let failures = run_all(&blocks, &dir);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].starts_with("docs/x.md:3: the example exited 2"),
        "{}",
        failures[0]
    );
    assert!(failures[0].contains("--no-such-flag"), "{}", failures[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cargo_run_release_stands_for_the_built_binary() {
    let blocks = runnable_blocks(
        "docs/x.md",
        "```sh runnable\ncargo run --release -- --version | grep -q planwright\n```\n\
         ```sh runnable\ncargo build\n```\n",
    );
    let dir = scratch("cargo");
    let failures = run_all(&blocks, &dir);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].starts_with("docs/x.md:4:"), "{}", failures[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_readme_rust_sample_is_whole() {
    // rustdoc's hidden lines (`# ...`) compile in the test but are not shown: a reader who pastes
    // the block would miss them. The sample is a whole program instead.
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let mut in_rust = false;
    let mut samples = 0;
    for (i, line) in readme.lines().enumerate() {
        if line.starts_with("```") {
            in_rust = !in_rust && line.trim_start_matches('`').trim() == "rust";
            samples += usize::from(in_rust);
            continue;
        }
        if in_rust {
            assert!(
                line != "#" && !line.starts_with("# "),
                "README.md:{}: a hidden rustdoc line in the Rust sample: `{line}`",
                i + 1
            );
        }
    }
    assert!(samples >= 1, "README.md has no Rust sample");
    assert!(
        readme.contains("async fn main()"),
        "the README's Rust sample is a whole program, with its `main`"
    );
}

/// A change made to the dental schema.
type Mutation<'a> = Box<dyn FnOnce(&mut serde_json::Value) + 'a>;

/// The names the schema parser lists as expected when `mutate` puts something it does not know
/// into the dental schema: the keys of one level, or the values of one enum.
fn expected_names(mutate: impl FnOnce(&mut serde_json::Value)) -> Vec<String> {
    use planwright_actors::field::schema::Schema;
    let text = std::fs::read_to_string(root().join("fixtures/field/dental.schema.json"))
        .expect("the dental schema");
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    mutate(&mut v);
    let err = Schema::from_json(&v.to_string())
        .expect_err("the parser refuses what it does not know")
        .to_string();
    let expected = err
        .split_once("expected")
        .unwrap_or_else(|| panic!("the refusal lists what is expected: {err}"))
        .1;
    let names: Vec<String> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    assert!(!names.is_empty(), "no names in: {err}");
    names
}

#[test]
fn the_schema_reference_names_every_key_the_parser_accepts() {
    let doc =
        std::fs::read_to_string(root().join("docs/field-schema.md")).expect("docs/field-schema.md");
    let unknown = serde_json::Value::from("zz_unknown");
    let levels: [(&str, Mutation); 6] = [
        ("a schema's keys", Box::new(|v| v["zz_unknown"] = 1.into())),
        (
            "a field's keys",
            Box::new(|v| v["fields"][0]["zz_unknown"] = 1.into()),
        ),
        (
            "a decomposition's keys",
            Box::new(|v| v["decompositions"][0]["zz_unknown"] = 1.into()),
        ),
        (
            "`kind`",
            Box::new(|v| v["fields"][0]["kind"] = unknown.clone()),
        ),
        (
            "`source`",
            Box::new(|v| v["fields"][0]["source"] = unknown.clone()),
        ),
        (
            "`type`",
            Box::new(|v| v["fields"][0]["type"] = unknown.clone()),
        ),
    ];
    let mut missing = Vec::new();
    for (what, mutate) in levels {
        for name in expected_names(mutate) {
            if !doc.contains(&format!("`{name}`")) {
                missing.push(format!("{what}: `{name}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/field-schema.md does not name what the parser accepts: {missing:?}"
    );
}
