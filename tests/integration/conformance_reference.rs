//! Conformance of `pullcheck::reference` against the distribution/reference vectors.
//!
//! Data: `tests/data/reference-vectors.json`, copied from the shared conformance set. Every
//! input there was run through the real Go code:
//! - github.com/distribution/reference @0965666a6ade2e06035fe352e38344be1e68951a
//!   (parsing identical to v0.6.0): reference_test.go, normalize_test.go, regexp_test.go;
//! - github.com/opencontainers/go-digest v1.0.0, with sha256, sha384 and sha512 available,
//!   as in the kubelet (k8s pkg/util/parsers links crypto/sha256 and crypto/sha512);
//! - the kubelet view (k8s pkg/util/parsers/parsers.go, pkg/kubelet/images/image_manager.go)
//!   and the containerd CRI view (containerd internal/cri/server/images/image_pull.go);
//! - github.com/regclient/regclient @725072f6 types/ref/ref_test.go, as a cross-check only.
//!
//! What is checked:
//! - `cases`: `ok`, `error_kind`, every `expected.*` field, and for each
//!   `functions.<F>` (Parse, ParseNormalizedNamed, ParseDockerRef, ParseAnyReference,
//!   WithName, ParseNamed) the full result: ok, type, and the exact set of non-empty fields
//!   among name/domain/path/tag/digest/string/familiar_name/familiar_string, or error_kind.
//!   `error_message` (Go's wording) is not compared: our messages are our own.
//! - `regexp_cases`: match/no match and capture groups of the grammar matchers.
//! - `familiar_match_cases`: `FamiliarMatch` (Go `path.Match` on the familiar string, then
//!   on the familiar name).
//! - `regclient_cases`: our result equals the `distribution_reference` side; the 12 rows
//!   without one (regclient-only `ocidir://`/`ocifile://` schemes) are counted as skipped.
//!
//! Deviations: none. The vectors follow DR >= v0.6.0 (the 255-byte limit applies to the path
//! only); `differs_in_v0_5_0` records older behaviour and is not checked.

use std::collections::BTreeMap;

use pullcheck::reference::{self, AnyReference, Reference, ReferenceError, grammar};
use serde_json::Value;

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/reference-vectors.json"
);

const EXPECTED_CASES: usize = 239;
const EXPECTED_REGEXP_CASES: usize = 110;
const EXPECTED_FAMILIAR_MATCH_CASES: usize = 9;
const EXPECTED_REGCLIENT_COMPARED: usize = 36;
const EXPECTED_REGCLIENT_SKIPPED: usize = 12;

fn vectors() -> Value {
    let text =
        std::fs::read_to_string(VECTORS).unwrap_or_else(|e| panic!("reading {VECTORS}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {VECTORS}: {e}"))
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("vectors: `{key}` is not an array"))
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("vectors: `{key}` is not a string in {v}"))
}

/// Fail with every collected problem listed, one per line.
fn assert_no_failures(what: &str, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} {what} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// An input for a failure line: quoted, long ones shortened.
fn show(input: &str) -> String {
    const KEEP: usize = 40;
    if input.len() <= KEEP || !input.is_char_boundary(KEEP) {
        format!("{input:?}")
    } else {
        format!("{:?}… ({} bytes)", &input[..KEEP], input.len())
    }
}

/// One function's result in the vectors' shape: field → value, empty fields omitted.
type Observed = BTreeMap<&'static str, Value>;

fn observe_error(err: &ReferenceError) -> Observed {
    BTreeMap::from([
        ("ok", Value::Bool(false)),
        ("error_kind", Value::from(err.kind())),
    ])
}

/// The Go concrete type for a named reference with these parts.
fn go_type(r: &Reference) -> &'static str {
    match (r.tag().is_some(), r.digest().is_some()) {
        (false, false) => "repository",
        (true, false) => "taggedReference",
        (false, true) => "canonicalReference",
        (true, true) => "reference",
    }
}

fn observe_named(result: &Result<Reference, ReferenceError>) -> Observed {
    let r = match result {
        Ok(r) => r,
        Err(e) => return observe_error(e),
    };
    let digest = r.digest().map(ToString::to_string).unwrap_or_default();
    let fields = [
        ("type", go_type(r).to_owned()),
        ("name", r.name()),
        ("domain", r.domain().to_owned()),
        ("path", r.path().to_owned()),
        ("tag", r.tag().unwrap_or_default().to_owned()),
        ("digest", digest),
        ("string", r.normalized()),
        ("familiar_name", r.familiar_name()),
        ("familiar_string", r.familiar()),
    ];
    let mut observed = Observed::from([("ok", Value::Bool(true))]);
    observed.extend(
        fields
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k, Value::from(v))),
    );
    observed
}

fn observe_any(result: &Result<AnyReference, ReferenceError>) -> Observed {
    match result {
        Ok(AnyReference::Named(r)) => observe_named(&Ok(r.clone())),
        Ok(AnyReference::Digest(d)) => BTreeMap::from([
            ("ok", Value::Bool(true)),
            ("type", Value::from("digestReference")),
            ("digest", Value::from(d.to_string())),
            ("string", Value::from(d.to_string())),
            ("familiar_string", Value::from(d.to_string())),
        ]),
        Err(e) => observe_error(e),
    }
}

fn observe_function(function: &str, input: &str) -> Option<Observed> {
    Some(match function {
        "Parse" => observe_named(&reference::parse_raw(input)),
        "ParseNormalizedNamed" => observe_named(&Reference::parse(input)),
        "ParseDockerRef" => observe_named(&Reference::parse(input).map(|r| r.for_pull())),
        "ParseAnyReference" => observe_any(&reference::parse_any(input)),
        "WithName" => observe_named(&reference::with_name(input)),
        "ParseNamed" => observe_named(&reference::parse_named(input)),
        _ => return None,
    })
}

/// Compare one function result with its vector: same set of fields, same values.
fn compare_function(
    label: &str,
    function: &str,
    input: &str,
    expected: &Value,
    failures: &mut Vec<String>,
) {
    let Some(observed) = observe_function(function, input) else {
        failures.push(format!("{label}: unknown function {function}"));
        return;
    };
    let Some(expected) = expected.as_object() else {
        failures.push(format!("{label}: functions.{function} is not an object"));
        return;
    };
    let expected: BTreeMap<&str, &Value> = expected
        .iter()
        .filter(|(k, _)| k.as_str() != "error_message")
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let keys: std::collections::BTreeSet<&str> = expected
        .keys()
        .copied()
        .chain(observed.keys().copied())
        .collect();
    for key in keys {
        let want = expected.get(key).copied();
        let got = observed.get(key);
        if want != got {
            failures.push(format!(
                "{label}: {function}.{key}: expected {}, got {}",
                want.map_or("(absent)".to_owned(), Value::to_string),
                got.map_or("(absent)".to_owned(), Value::to_string),
            ));
        }
    }
}

/// Top-level `ok`, `error_kind` and `expected.*` (the kubelet/containerd view).
fn compare_expected(label: &str, case: &Value, input: &str, failures: &mut Vec<String>) {
    let mut check = |field: &str, want: &Value, got: Value| {
        if *want != got {
            failures.push(format!("{label}: {field}: expected {want}, got {got}"));
        }
    };
    let parsed = Reference::parse(input);
    check("ok", &case["ok"], Value::Bool(parsed.is_ok()));
    match &parsed {
        Err(e) => check("error_kind", &case["error_kind"], Value::from(e.kind())),
        Ok(r) => {
            let cri = reference::kubelet_image_sent_to_cri(input).map_err(|e| e.kind().to_owned());
            let digest = r.digest().map(ToString::to_string).unwrap_or_default();
            let fields = [
                ("domain", r.domain().to_owned()),
                ("path", r.path().to_owned()),
                ("tag", r.tag().unwrap_or_default().to_owned()),
                ("digest", digest),
                ("normalized", r.normalized()),
                ("full", r.full()),
                ("familiar", r.familiar()),
                ("kubelet_repo_to_pull", r.name()),
                (
                    "kubelet_image_sent_to_cri",
                    cri.unwrap_or_else(|kind| format!("error {kind}")),
                ),
                ("containerd_cri_ref", r.to_string()),
            ];
            let expected = &case["expected"];
            let known = expected.as_object().map_or(0, |o| o.len());
            if known != fields.len() {
                check(
                    "expected (number of fields)",
                    &Value::from(known),
                    Value::from(fields.len()),
                );
            }
            for (field, got) in fields {
                check(
                    &format!("expected.{field}"),
                    &expected[field],
                    Value::from(got),
                );
            }
        }
    }
}

#[test]
fn reference_cases_match_distribution_reference() {
    let v = vectors();
    let cases = list(&v, "cases");
    let mut failures = Vec::new();
    let mut function_results = 0;
    for case in cases {
        let input = text(case, "input");
        let label = format!("case {} {}", case["id"], show(input));
        compare_expected(&label, case, input, &mut failures);
        let functions = case["functions"]
            .as_object()
            .expect("functions is an object");
        if functions.len() != 6 {
            failures.push(format!(
                "{label}: {} functions, expected 6",
                functions.len()
            ));
        }
        for (function, expected) in functions {
            compare_function(&label, function, input, expected, &mut failures);
            function_results += 1;
        }
    }
    assert_no_failures("reference case checks", &failures);
    assert_eq!(
        cases.len(),
        EXPECTED_CASES,
        "number of reference cases checked"
    );
    assert_eq!(
        function_results,
        EXPECTED_CASES * 6,
        "number of function results checked"
    );
}

#[test]
fn regexp_cases_match_the_grammar() {
    let v = vectors();
    let cases = list(&v, "regexp_cases");
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let (regexp, input) = (text(case, "regexp"), text(case, "input"));
        let groups: Option<Vec<&str>> = match regexp {
            "^domainAndPort$" => grammar::is_domain_and_port(input).then(Vec::new),
            "anchoredIdentifierRegexp" => grammar::is_identifier(input).then(Vec::new),
            "anchoredNameRegexp" => {
                grammar::split_name(input).map(|(d, p)| vec![d.unwrap_or(""), p])
            }
            "referenceRegexp" => grammar::split_reference(input)
                .map(|(n, t, d)| vec![n, t.unwrap_or(""), d.unwrap_or("")]),
            other => {
                failures.push(format!("regexp case {i}: unknown regexp {other}"));
                continue;
            }
        };
        let label = format!("regexp case {i} {regexp} {}", show(input));
        if case["match"].as_bool() != Some(groups.is_some()) {
            failures.push(format!(
                "{label}: expected match={}, got {}",
                case["match"],
                groups.is_some()
            ));
        }
        if let (Some(want), Some(got)) = (case.get("submatches"), &groups)
            && *want != Value::from(got.clone())
        {
            failures.push(format!("{label}: expected groups {want}, got {got:?}"));
        }
    }
    assert_no_failures("regexp cases", &failures);
    assert_eq!(
        cases.len(),
        EXPECTED_REGEXP_CASES,
        "number of regexp cases checked"
    );
}

#[test]
fn familiar_match_cases() {
    let v = vectors();
    let cases = list(&v, "familiar_match_cases");
    let mut failures = Vec::new();
    for case in cases {
        let (input, pattern) = (text(case, "reference"), text(case, "pattern"));
        let label = format!("FamiliarMatch({pattern:?}, {input:?})");
        // helpers.go FamiliarMatch: try FamiliarString, then (named references only)
        // FamiliarName, so a pattern without a tag matches a tagged reference.
        let got = match reference::parse_any(input) {
            Ok(AnyReference::Named(r)) => {
                go_path_match(pattern, &r.familiar()) || go_path_match(pattern, &r.familiar_name())
            }
            Ok(AnyReference::Digest(d)) => go_path_match(pattern, &d.to_string()),
            Err(e) => {
                failures.push(format!("{label}: parse failed: {e}"));
                continue;
            }
        };
        if case["expected"].as_bool() != Some(got) {
            failures.push(format!("{label}: expected {}, got {got}", case["expected"]));
        }
    }
    assert_no_failures("familiar match cases", &failures);
    assert_eq!(
        cases.len(),
        EXPECTED_FAMILIAR_MATCH_CASES,
        "number of FamiliarMatch cases checked"
    );
}

#[test]
fn regclient_cross_checks_agree_with_distribution_reference() {
    let v = vectors();
    let mut failures = Vec::new();
    let (mut compared, mut skipped) = (0, 0);
    for case in list(&v, "regclient_cases") {
        let input = text(case, "input");
        let want = &case["distribution_reference"];
        if want.is_null() {
            skipped += 1;
            continue;
        }
        compared += 1;
        let got = match Reference::parse(input) {
            Ok(r) => serde_json::json!({
                "ok": true,
                "domain": r.domain(),
                "path": r.path(),
                "tag": r.tag().unwrap_or_default(),
                "digest": r.digest().map(ToString::to_string).unwrap_or_default(),
                "full": r.full(),
            }),
            Err(e) => serde_json::json!({ "ok": false, "error_kind": e.kind() }),
        };
        if *want != got {
            failures.push(format!(
                "regclient {}: expected {want}, got {got}",
                show(input)
            ));
        }
    }
    assert_no_failures("regclient cross-checks", &failures);
    assert_eq!(
        compared, EXPECTED_REGCLIENT_COMPARED,
        "number of regclient rows compared"
    );
    assert_eq!(
        skipped, EXPECTED_REGCLIENT_SKIPPED,
        "number of regclient-only rows skipped"
    );
}

/// Go `path.Match` (`*` = any run of non-`/`, `?` = one non-`/`, `[...]` classes with `^`
/// negation and ranges, `\` escapes). A malformed pattern does not match.
fn go_path_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = name.chars().collect();
    glob(&p, &s).unwrap_or(false)
}

/// `None` means a malformed pattern (Go's `ErrBadPattern`).
fn glob(p: &[char], s: &[char]) -> Option<bool> {
    let Some((&first, rest)) = p.split_first() else {
        return Some(s.is_empty());
    };
    match first {
        '*' => {
            for i in 0..=s.len() {
                if glob(rest, &s[i..])? {
                    return Some(true);
                }
                if i < s.len() && s[i] == '/' {
                    break;
                }
            }
            Some(false)
        }
        '?' => Some(match s.split_first() {
            Some((&c, tail)) if c != '/' => glob(rest, tail)?,
            _ => false,
        }),
        '[' => {
            let (matched, after) = match_class(rest, s.first().copied())?;
            Some(matched && glob(after, &s[1..])?)
        }
        '\\' => {
            let (&lit, after) = rest.split_first()?;
            Some(s.first() == Some(&lit) && glob(after, &s[1..])?)
        }
        lit => Some(s.first() == Some(&lit) && glob(rest, &s[1..])?),
    }
}

/// Match `c` against the class starting after `[`; returns (matched, pattern after `]`).
fn match_class(p: &[char], c: Option<char>) -> Option<(bool, &[char])> {
    let (negated, mut p) = match p.split_first() {
        Some(('^', rest)) => (true, rest),
        _ => (false, p),
    };
    let mut matched = false;
    let mut first = true;
    loop {
        let (&head, _) = p.split_first()?;
        if head == ']' && !first {
            p = &p[1..];
            break;
        }
        first = false;
        let (lo, rest) = class_char(p)?;
        let (hi, rest) = match rest.split_first() {
            Some(('-', after)) => class_char(after)?,
            _ => (lo, rest),
        };
        matched |= c.is_some_and(|c| lo <= c && c <= hi);
        p = rest;
    }
    Some((c.is_some() && matched != negated, p))
}

fn class_char(p: &[char]) -> Option<(char, &[char])> {
    match p {
        ['\\', c, rest @ ..] => Some((*c, rest)),
        [']' | '-', ..] | [] => None,
        [c, rest @ ..] => Some((*c, rest)),
    }
}
