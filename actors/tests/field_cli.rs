//! The `acquire` command's contract, on the real binary: JSON keys, exit codes, answers from a
//! file, a pause that prints the question and thread id and is continued with `--thread/--resume`
//! on the default SQLite checkpoint, and clear refusals of malformed inputs.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/field")
}

fn workdir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("acquire-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn acquire(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_planwright"))
        .current_dir(dir)
        .arg("acquire")
        .args(args)
        .output()
        .unwrap()
}

fn fx(name: &str) -> String {
    fixtures().join(name).display().to_string()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {} stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn a_full_run_prints_the_contract_json_and_exits_0() {
    let dir = workdir("ok");
    let out = acquire(
        &dir,
        &[
            "--schema",
            &fx("coffee.schema.json"),
            "--corpus",
            &fx("coffee.corpus.json"),
            "--answers",
            &fx("coffee.answers.json"),
            "--goal",
            "office coffee subscriptions",
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["status"], "ok");
    assert!(v["targets"]["revenue"].as_f64().unwrap() > 0.0);
    assert_eq!(v["fields"]["adoption"]["provenance"]["kind"], "search");
    assert_eq!(v["fields"]["adoption"]["provenance"]["source_id"], "cof-04");
    assert_eq!(v["fields"]["offices"]["provenance"]["kind"], "composed");
    assert!(v["fields"]["offices"]["provenance"]["formula"].is_string());
    assert_eq!(v["fields"]["revenue"]["provenance"]["kind"], "calculated");
    assert!(v["iterations"].as_u64().unwrap() > 0);
    let d = &v["decisions"][0];
    assert_eq!(d["action"], "ask_user");
    assert_eq!(d["origin"], "deterministic");
    assert!(d["rewritten_by"].is_array());
    assert!(
        dir.join(".planwright/acquire.db").exists(),
        "default checkpoint under the working directory"
    );
}

#[test]
fn a_question_without_an_answer_ends_interrupted_and_resume_continues_it() {
    let dir = workdir("pause");
    std::fs::write(
        dir.join("answers.json"),
        r#"{"region": "Rivertown", "currency": "EUR"}"#,
    )
    .unwrap();
    let out = acquire(
        &dir,
        &[
            "--schema",
            &fx("bikes.schema.json"),
            "--corpus",
            &fx("bikes.corpus.json"),
            "--answers",
            "answers.json",
            "--thread",
            "bikes-1",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    assert_eq!(v["status"], "interrupted");
    assert_eq!(v["pending_question"]["field"], "lease_price");
    assert!(v["pending_question"]["question"]
        .as_str()
        .unwrap()
        .contains("lease"));
    assert_eq!(v["thread_id"], "bikes-1:planner:v2");
    assert!(v["targets"]["market"].is_null());
    let out = acquire(
        &dir,
        &[
            "--thread",
            "bikes-1:planner:v2",
            "--resume",
            "1,800",
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["status"], "ok");
    assert_eq!(v["targets"]["market"].as_f64(), Some(1250.0 * 3.0 * 1800.0));
    // Human output, for a finished thread: reported as stored.
    let out = acquire(
        &dir,
        &["--schema", &fx("bikes.schema.json"), "--thread", "bikes-1"],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("status: ok"));
    let out = acquire(&dir, &["--thread", "bikes-1", "--resume", "2"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "resuming a finished thread is bad input"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not waiting"));
}

#[test]
fn an_aborted_run_exits_1() {
    let dir = workdir("abort");
    std::fs::write(
        dir.join("answers.json"),
        r#"{"region": "Nordland", "currency": "EUR", "obtainable_share": "lots"}"#,
    )
    .unwrap();
    let out = acquire(
        &dir,
        &[
            "--schema",
            &fx("dental.schema.json"),
            "--corpus",
            &fx("dental.corpus.json"),
            "--answers",
            "answers.json",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["status"], "aborted");
}

fn refused(dir: &Path, args: &[&str], needle: &str) {
    let out = acquire(dir, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: `{err}` lacks `{needle}`");
    assert!(out.stdout.is_empty(), "nothing ran");
}

#[test]
fn malformed_inputs_are_refused_with_exit_2_naming_the_problem() {
    let dir = workdir("bad");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("dental.schema.json")).unwrap(),
    )
    .unwrap();
    let variant = |name: &str, f: &dyn Fn(&mut Value)| {
        let mut s = schema.clone();
        f(&mut s);
        std::fs::write(dir.join(name), s.to_string()).unwrap();
        name.to_string()
    };
    let unknown = variant("unknown.json", &|s| {
        s["fields"][6]["formula"] = "clinics * price".into()
    });
    refused(&dir, &["--schema", &unknown], "unknown field `price`");
    let cycle = variant("cycle.json", &|s| {
        s["fields"][6]["formula"] = "som * 2".into()
    });
    refused(&dir, &["--schema", &cycle], "cycle");
    let decomp = variant("decomp.json", &|s| {
        s["decompositions"][0]["field"] = "dentists".into()
    });
    refused(
        &dir,
        &["--schema", &decomp],
        "decomposition of unknown field `dentists`",
    );
    let target = variant("target.json", &|s| s["targets"][0] = "ebitda".into());
    refused(&dir, &["--schema", &target], "target `ebitda`");
    std::fs::write(dir.join("corpus.json"), r#"[{"id": "a", "title": "t"}]"#).unwrap();
    refused(
        &dir,
        &[
            "--schema",
            &fx("dental.schema.json"),
            "--corpus",
            "corpus.json",
        ],
        "corpus",
    );
    std::fs::write(
        dir.join("dup.json"),
        r#"[{"id": "a", "title": "t", "text": "x"}, {"id": "a", "title": "t", "text": "y"}]"#,
    )
    .unwrap();
    refused(
        &dir,
        &[
            "--schema",
            &fx("dental.schema.json"),
            "--corpus",
            "dup.json",
        ],
        "appears twice",
    );
    std::fs::write(dir.join("answers.json"), r#"["Nordland"]"#).unwrap();
    refused(
        &dir,
        &[
            "--schema",
            &fx("dental.schema.json"),
            "--answers",
            "answers.json",
        ],
        "answers",
    );
    std::fs::write(
        dir.join("answers2.json"),
        r#"{"planet": "Mars", "population": "5"}"#,
    )
    .unwrap();
    refused(
        &dir,
        &[
            "--schema",
            &fx("dental.schema.json"),
            "--answers",
            "answers2.json",
        ],
        "`planet` is not a field",
    );
    refused(&dir, &["--schema", "missing.json"], "cannot read schema");
    refused(&dir, &[], "--schema FILE is required");
    refused(&dir, &["--resume", "x"], "--resume needs --thread");
    refused(
        &dir,
        &["--thread", "nobody", "--resume", "x"],
        "does not exist",
    );
    refused(
        &dir,
        &[
            "--schema",
            &fx("dental.schema.json"),
            "--checkpoint",
            "mysql://x",
        ],
        "",
    );
}

#[test]
fn the_simulated_model_drives_the_same_planner() {
    let dir = workdir("sim");
    let out = acquire(
        &dir,
        &[
            "--schema",
            &fx("dental.schema.json"),
            "--corpus",
            &fx("dental.corpus.json"),
            "--answers",
            &fx("dental.answers.json"),
            "--model",
            "sim:p50=1ms,p99=2ms,seed=3",
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["status"], "ok");
    assert!(v["targets"]["som"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_model_that_only_answers_malformed_output_aborts_the_run_with_exit_1() {
    let dir = workdir("malformed");
    let out = acquire(
        &dir,
        &[
            "--schema",
            &fx("bikes.schema.json"),
            "--corpus",
            &fx("bikes.corpus.json"),
            "--answers",
            &fx("bikes.answers.json"),
            "--model",
            "sim:p50=1ms,p99=2ms,malformed=1,seed=2",
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["status"], "aborted");
    let last = v["decisions"].as_array().unwrap().last().unwrap();
    assert_eq!(last["action"], "finish");
    assert_eq!(last["origin"], "llm");
    assert!(
        last["reasoning"].as_str().unwrap().contains("model"),
        "{last}"
    );
}

#[test]
fn without_an_answers_file_questions_are_read_from_the_terminal() {
    use std::io::Write;
    let dir = workdir("stdin");
    let mut child = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .current_dir(&dir)
        .args([
            "acquire",
            "--schema",
            &fx("dental.schema.json"),
            "--corpus",
            &fx("dental.corpus.json"),
            "--json",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Nordland\nEUR\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Which region"), "{err}");
    assert_eq!(v["fields"]["region"]["value"], "Nordland");
    assert_eq!(v["fields"]["currency"]["value"], "EUR");
    assert_eq!(
        v["status"], "interrupted",
        "input ended before the obtainable share"
    );
    assert_eq!(v["pending_question"]["field"], "obtainable_share");
}

#[test]
fn a_price_in_another_currency_is_converted_only_at_a_rate_the_user_gives() {
    let dir = workdir("rate");
    std::fs::write(
        dir.join("schema.json"),
        r#"{"name": "rate", "targets": ["tam"], "fields": [
            {"name": "currency", "kind": "raw", "source": "user", "type": "text", "core": true},
            {"name": "clinics", "kind": "raw", "source": "web", "type": "number", "unit": "count",
             "description": "dental clinics"},
            {"name": "annual_price", "kind": "raw", "source": "web", "type": "number",
             "unit": "currency/year", "description": "yearly price of practice software"},
            {"name": "tam", "kind": "derived", "formula": "clinics * annual_price"}]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("corpus.json"),
        r#"[{"id": "c", "title": "Dental clinics", "text": "There are 1,000 dental clinics."},
            {"id": "p", "title": "Practice software", "text": "Practice software costs 1,500 USD per year."}]"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("answers.json"),
        r#"{"currency": "EUR", "annual_price": "1,400 EUR"}"#,
    )
    .unwrap();
    let base = |extra: &[&str]| {
        let mut a = vec![
            "--schema",
            "schema.json",
            "--corpus",
            "corpus.json",
            "--answers",
            "answers.json",
        ];
        a.extend_from_slice(extra);
        acquire(&dir, &a)
    };
    // Without a rate the USD price is not used: the planner asks for the rate, quoting the price
    // it found, and takes the value the person gives in their own currency (1,400 EUR).
    let out = json(&base(&["--json"]));
    assert_eq!(
        out["fields"]["annual_price"]["provenance"]["kind"], "user",
        "{out}"
    );
    assert_eq!(out["fields"]["annual_price"]["value"], 1400.0, "{out}");
    assert!(
        out["reflections"][0]
            .as_str()
            .unwrap()
            .contains("no USD/EUR rate is known"),
        "{out}"
    );
    // With one, it converts and says so.
    let out = base(&["--rate", "USD/EUR=0.9"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("annual_price = 1,350"), "{text}");
    assert!(
        text.contains("× 0.9 USD→EUR (rate from user-rates)"),
        "{text}"
    );
    // A malformed rate is refused before anything runs.
    let out = base(&["--rate", "USD-EUR"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FROM/TO=RATE"));
}

#[test]
fn the_pet_insurance_premium_is_read_as_aud_and_in_usd_waits_for_a_rate_shown_with_its_quote() {
    let note = "Australian pet owners paid on average $610 per year to insure a dog or cat.";
    let dir = workdir("pets");
    let run = |answers: &str, extra: &[&str]| {
        std::fs::write(dir.join("answers.json"), answers).unwrap();
        let mut a = vec![
            "--schema".to_string(),
            fx("petinsurance.schema.json"),
            "--corpus".to_string(),
            fx("petinsurance.corpus.json"),
            "--answers".to_string(),
            "answers.json".to_string(),
            "--checkpoint".to_string(),
            "memory:".to_string(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = a.iter().map(String::as_str).collect();
        acquire(&dir, &args)
    };
    // AUD: finished from the corpus, the `$` read as the note's own.
    let out = run(
        &std::fs::read_to_string(fx("petinsurance.answers.json")).unwrap(),
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("status: ok"), "{text}");
    assert!(
        text.contains("annual_premium = 610 (search pet-au-premium"),
        "{text}"
    );
    assert!(
        text.contains("$ read as AUD (the quote says \"Australian\")"),
        "{text}"
    );
    // USD without a rate: paused, the question showing the quote, nothing stored.
    let usd = r#"{"region": "Australia", "currency": "USD"}"#;
    let out = run(usd, &[]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("status: interrupted"), "{text}");
    assert!(text.contains(note), "the quote is shown: {text}");
    assert!(text.contains("How many USD is 1 AUD?"), "{text}");
    let v = json(&run(usd, &["--json"]));
    assert_eq!(v["pending_question"]["found"]["quote"], note, "{v}");
    assert!(v["fields"]["annual_premium"]["value"].is_null(), "{v}");
    // USD with a rate: converted.
    let v = json(&run(usd, &["--rate", "AUD/USD=0.65", "--json"]));
    assert_eq!(v["status"], "ok", "{v}");
    let premium = v["fields"]["annual_premium"]["value"].as_f64().unwrap();
    assert!((premium - 396.5).abs() < 1e-9, "{v}");
}
