//! Conformance: kubelet keyring matching and lookup, docker config entry decoding, and
//! `WWW-Authenticate` parsing, against `tests/data/credential-vectors.json`.
//!
//! The vectors were copied from `/work/shared/conformance/credential-vectors.json`, which
//! was produced from these upstream files (see the file's `sources` and each group's
//! `source`):
//! - kubernetes `pkg/credentialprovider/keyring_test.go` (`TestURLsMatch`,
//!   `TestDockerKeyringForGlob`, `TestKeyringMiss`, `TestKeyringMissWithDockerHubCredentials`,
//!   `TestKeyringHitWith{Unqualified,Qualified}DockerHub`, `TestIsDefaultRegistryMatch`,
//!   `TestDockerKeyringLookup`, `TestIssue3797`), against `keyring.go`;
//! - kubernetes `pkg/credentialprovider/config_test.go` (`TestDockerConfigEntryJSONDecode`,
//!   `TestDecodeDockerConfigFieldAuth`), against `config.go`;
//! - containerd@301026e58c619e63d09c0ec411012e54c0124b03
//!   `core/remotes/docker/auth/parse_test.go` and
//!   distribution@0d6b721dc3ceacb5d678c25b718b2f40a507c2d8
//!   `internal/client/auth/challenge/authchallenge_test.go`.
//!
//! Every group is checked; all failing cases are reported together, and the number of
//! cases checked per group is asserted so a vector cannot be skipped silently.
//!
//! Deliberate deviations: none. (Notes on how vectors are read:
//! `docker_hub_fallback.max_results` is an upper bound, as in the upstream
//! `len(creds) > 2` check; within one config, entries are indexed in sorted key order,
//! where the kubelet uses Go map order — no vector depends on it.)

use std::collections::BTreeMap;

use pullcheck::credentials::{
    DockerConfig, DockerConfigEntry, Keyring, Secret, docker_config::decode_auth_field,
    is_default_registry_match, urls_match_str,
};
use pullcheck::registry::challenge;
use serde_json::Value;

const VECTORS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/credential-vectors.json"
));

/// `base64("foo:bar")`, the credential the upstream keyring tests use.
const FOO_BAR: &str = "Zm9vOmJhcg==";

/// Cases per group; a change in the data file must be reflected here.
const EXPECTED: &[(&str, usize)] = &[
    ("urls_match", 12),
    ("keyring_lookup_hits", 11),
    ("keyring_lookup_misses", 4),
    ("docker_hub_fallback", 3),
    ("is_default_registry_match", 6),
    ("lookup_ordering", 5),
    ("scheme_and_v1_path_key", 2),
    ("docker_config_entry_decode", 8),
    ("www_authenticate", 4),
];

struct Report {
    counts: BTreeMap<&'static str, usize>,
    failures: Vec<String>,
}

impl Report {
    fn check(&mut self, group: &'static str, ok: bool, describe: impl FnOnce() -> String) {
        *self.counts.entry(group).or_default() += 1;
        if !ok {
            self.failures.push(format!("{group}: {}", describe()));
        }
    }
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("vector field {key:?} missing in {v}"))
}

fn cases(root: &Value, group: &str) -> Vec<Value> {
    root[group]["cases"]
        .as_array()
        .unwrap_or_else(|| panic!("group {group} has no cases"))
        .clone()
}

/// A legacy `.dockercfg` document with one `{email, auth(foo:bar)}` entry per key, decoded
/// through the same path as a pull secret.
fn foo_bar_config(key: &str) -> DockerConfig {
    let doc = serde_json::json!({ key: { "email": "foo@example.com", "auth": FOO_BAR } });
    DockerConfig::from_dockercfg(doc.to_string().as_bytes()).expect("vector config decodes")
}

/// A config mapping each key to a credential whose username is the vector's value.
fn named_config(map: &Value) -> DockerConfig {
    let mut cfg = DockerConfig::new();
    for (key, name) in map.as_object().expect("config is an object") {
        cfg.insert(
            key.clone(),
            DockerConfigEntry {
                username: name.as_str().unwrap().to_owned(),
                password: Secret::new("pw"),
                email: String::new(),
            },
        );
    }
    cfg
}

fn keyring_of(cfg: &DockerConfig) -> Keyring {
    let mut k = Keyring::new();
    k.add(cfg, "vector");
    k
}

fn urls_match(root: &Value, r: &mut Report) {
    for c in cases(root, "urls_match") {
        let (glob, target) = (s(&c, "glob"), s(&c, "target"));
        let want = c["match"].as_bool().unwrap();
        let got = urls_match_str(glob, target);
        r.check("urls_match", got == want, || {
            format!("URLsMatchStr({glob:?}, {target:?}) = {got}, want {want}")
        });
    }
}

fn keyring_lookups(root: &Value, r: &mut Report, group: &'static str) {
    for c in cases(root, group) {
        let (key, lookup) = (s(&c, "config_key"), s(&c, "lookup"));
        let want = c["found"].as_bool().unwrap();
        let found = keyring_of(&foo_bar_config(key)).lookup(lookup);
        let ok = if want {
            found
                .first()
                .is_some_and(|c| c.username == "foo" && c.password.expose() == "bar")
        } else {
            found.is_empty()
        };
        r.check(group, ok, || {
            format!(
                "key {key:?} lookup {lookup:?}: found {} credential(s), want found={want}",
                found.len()
            )
        });
    }
}

fn docker_hub_fallback(root: &Value, r: &mut Report) {
    let key = s(&root["docker_hub_fallback"], "config_key");
    let keyring = keyring_of(&foo_bar_config(key));
    for c in cases(root, "docker_hub_fallback") {
        let lookup = s(&c, "lookup");
        let want = c["found"].as_bool().unwrap();
        let found = keyring.lookup(lookup);
        let max = c["max_results"].as_u64().map(|m| m as usize);
        let ok = if want {
            found.first().is_some_and(|c| c.username == "foo")
                && max.is_none_or(|m| found.len() <= m)
        } else {
            found.is_empty()
        };
        r.check("docker_hub_fallback", ok, || {
            format!(
                "key {key:?} lookup {lookup:?}: {} credential(s), want found={want} max={max:?}",
                found.len()
            )
        });
    }
}

fn default_registry(root: &Value, r: &mut Report) {
    for c in cases(root, "is_default_registry_match") {
        let image = s(&c, "image");
        let want = c["expected"].as_bool().unwrap();
        let got = is_default_registry_match(image);
        r.check("is_default_registry_match", got == want, || {
            format!("isDefaultRegistryMatch({image:?}) = {got}, want {want}")
        });
    }
}

fn ordered_lookups(root: &Value, r: &mut Report, group: &'static str) {
    let keyring = keyring_of(&named_config(&root[group]["config"]));
    for c in cases(root, group) {
        let lookup = s(&c, "lookup");
        let want: Vec<&str> = c["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let want_ok = c["ok"].as_bool().unwrap();
        let found = keyring.lookup(lookup);
        let got: Vec<&str> = found.iter().map(|c| c.username.as_str()).collect();
        r.check(group, got == want && got.is_empty() != want_ok, || {
            format!("lookup {lookup:?} = {got:?}, want {want:?} (ok={want_ok})")
        });
    }
}

fn entry_decode(root: &Value, r: &mut Report) {
    for c in cases(root, "docker_config_entry_decode") {
        let want_fail = c["fail"].as_bool().unwrap();
        let (input, got) = if let Some(json) = c["json"].as_str() {
            let got = DockerConfigEntry::from_json(json.as_bytes())
                .map(|e| (e.username, e.password.expose().to_owned(), Some(e.email)))
                .map_err(|e| e.to_string());
            (format!("entry {json}"), got)
        } else {
            let field = s(&c, "auth_field");
            let got = decode_auth_field(field)
                .map(|(u, p)| (u, p.expose().to_owned(), None))
                .map_err(|e| e.to_string());
            (format!("auth field {field:?}"), got)
        };
        let ok = match (&got, want_fail) {
            (Err(_), true) => true,
            (Ok((user, pass, email)), false) => {
                user == s(&c, "username")
                    && pass == s(&c, "password")
                    && email.as_ref().is_none_or(|e| e == s(&c, "email"))
            }
            _ => false,
        };
        r.check("docker_config_entry_decode", ok, || {
            let shown = got.map(|(u, _, e)| format!("user {u:?} email {e:?}"));
            format!("{input}: got {shown:?}, want fail={want_fail}")
        });
    }
}

fn www_authenticate(root: &Value, r: &mut Report) {
    for c in cases(root, "www_authenticate") {
        let headers: Vec<&str> = c["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap())
            .collect();
        let want: Vec<(String, BTreeMap<String, String>)> = c["challenges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|ch| {
                let params = ch["params"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                    .collect();
                (s(ch, "scheme").to_owned(), params)
            })
            .collect();
        let got: Vec<(String, BTreeMap<String, String>)> = challenge::parse_headers(&headers)
            .into_iter()
            .map(|ch| (ch.scheme.as_str().to_owned(), ch.params))
            .collect();
        r.check("www_authenticate", got == want, || {
            format!("{headers:?}:\n  got  {got:?}\n  want {want:?}")
        });
    }
}

#[test]
fn credential_vectors() {
    let root: Value = serde_json::from_str(VECTORS).expect("credential-vectors.json parses");
    let mut r = Report {
        counts: BTreeMap::new(),
        failures: Vec::new(),
    };
    urls_match(&root, &mut r);
    keyring_lookups(&root, &mut r, "keyring_lookup_hits");
    keyring_lookups(&root, &mut r, "keyring_lookup_misses");
    docker_hub_fallback(&root, &mut r);
    default_registry(&root, &mut r);
    ordered_lookups(&root, &mut r, "lookup_ordering");
    ordered_lookups(&root, &mut r, "scheme_and_v1_path_key");
    entry_decode(&root, &mut r);
    www_authenticate(&root, &mut r);

    // Every group in the file is one we check.
    let in_file: Vec<&str> = root
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| v.get("cases").is_some())
        .map(|(k, _)| k.as_str())
        .collect();
    let checked: Vec<&str> = EXPECTED.iter().map(|(g, _)| *g).collect();
    let mut in_file_sorted = in_file.clone();
    in_file_sorted.sort_unstable();
    let mut checked_sorted = checked.clone();
    checked_sorted.sort_unstable();
    assert_eq!(
        in_file_sorted, checked_sorted,
        "vector groups in the file vs checked"
    );

    let counts: Vec<(&str, usize)> = EXPECTED
        .iter()
        .map(|(g, _)| (*g, r.counts.get(g).copied().unwrap_or(0)))
        .collect();
    assert!(
        r.failures.is_empty(),
        "{} failing credential vector(s):\n{}",
        r.failures.len(),
        r.failures.join("\n")
    );
    assert_eq!(counts, EXPECTED, "cases checked per group");
}
