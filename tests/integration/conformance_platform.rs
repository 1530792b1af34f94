//! containerd platform matching, checked against recorded upstream behaviour.
//!
//! `tests/data/platform-vectors.json` holds the `Only` and `OnlyStrict` cases of
//! `compare_test.go` (`TestOnly`, `TestOnlyStrict`) in github.com/containerd/platforms at
//! commit 09756f59cb1d6b3fb368f371043d36e634789537, each produced by running the upstream Go
//! code: both strings go through `platforms.Parse`, then `matcher(node).Match(candidate)`.
//! Deliberate deviations: none. Every case must pass.

use pullcheck::platform::{Matcher, Platform};

/// Number of cases in the vector file; a change to the file must update this on purpose.
const EXPECTED_CASES: usize = 189;

#[test]
fn containerd_platforms_match_vectors() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/platform-vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("read platform-vectors.json");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("parse platform-vectors.json");
    let cases = doc["cases"].as_array().expect("`cases` array");

    let mut failures = Vec::new();
    let mut checked = 0;
    for (i, case) in cases.iter().enumerate() {
        let field = |name: &str| {
            case[name]
                .as_str()
                .unwrap_or_else(|| panic!("case {i}: `{name}` missing"))
        };
        let (kind, node, candidate) =
            (field("matcher"), field("node_platform"), field("candidate"));
        let want = case["match"]
            .as_bool()
            .unwrap_or_else(|| panic!("case {i}: `match` missing"));
        let parsed = Platform::parse(node).and_then(|n| Ok((n, Platform::parse(candidate)?)));
        let (node_p, candidate_p) = match parsed {
            Ok(pair) => pair,
            Err(e) => {
                failures.push(format!("case {i}: {e}"));
                continue;
            }
        };
        let matcher = match kind {
            "Only" => Matcher::only(&node_p),
            "OnlyStrict" => Matcher::only_strict(&node_p),
            other => panic!("case {i}: unknown matcher {other:?}"),
        };
        let got = matcher.matches(&candidate_p);
        if got != want {
            failures.push(format!(
                "case {i}: {kind}({node}).Match({candidate}) = {got}, upstream {want}"
            ));
        }
        checked += 1;
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert_eq!(checked, EXPECTED_CASES, "number of vectors checked");
}
