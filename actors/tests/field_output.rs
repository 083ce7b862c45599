//! `acquire`'s numbers and targets as a person reads them, on the real binary with the dental
//! fixture: values rounded to the field's precision (money to cents) with the exact values in
//! `exact`, and the targets in the schema's order with their unit in the run's currency.

use std::process::Command;

fn acquire(json: bool) -> String {
    let f = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/field");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_planwright"));
    cmd.args(["acquire", "--checkpoint", "memory:"])
        .args(["--schema", &format!("{f}/dental.schema.json")])
        .args(["--corpus", &format!("{f}/dental.corpus.json")])
        .args(["--answers", &format!("{f}/dental.answers.json")]);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn json_numbers_are_rounded_with_the_exact_values_beside_them() {
    let text = acquire(true);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut shown = v.clone();
    shown.as_object_mut().unwrap().remove("exact");
    let shown = shown.to_string();
    assert!(
        !shown.contains("99999") && !shown.contains("11999"),
        "no float noise outside `exact`: {shown}"
    );
    assert_eq!(v["targets"]["tam"], 1857024.0);
    assert_eq!(v["targets"]["sam"], 705669.12);
    assert_eq!(v["targets"]["som"], 35283.46);
    assert_eq!(v["fields"]["sam"]["value"], 705669.12);
    // The exact values, as written (serde_json reads them back only to the nearest float).
    let exact = v["exact"].to_string();
    for (name, x) in [
        ("tam", "1857023.9999999998"),
        ("sam", "705669.1199999999"),
        ("som", "35283.456"),
    ] {
        assert!(text.contains(x), "{x} in {text}");
        assert!(v["exact"]["targets"][name].is_number(), "{exact}");
        assert!(v["exact"]["fields"][name].is_number(), "{exact}");
    }
    assert!(
        v["exact"]["fields"].get("annual_price").is_none(),
        "only what rounding changed"
    );
    let list: Vec<(&str, &str)> = v["target_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["field"].as_str().unwrap(), t["unit"].as_str().unwrap()))
        .collect();
    assert_eq!(
        list,
        [
            ("tam", "EUR/year"),
            ("sam", "EUR/year"),
            ("som", "EUR/year")
        ],
        "the schema's order, in the run's currency"
    );
}

#[test]
fn text_lists_targets_in_schema_order_with_their_unit() {
    let text = acquire(false);
    let targets: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "targets:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(
        targets,
        [
            "  tam = 1,857,024 EUR/year",
            "  sam = 705,669 EUR/year",
            "  som = 35,283.46 EUR/year"
        ],
        "{text}"
    );
}
