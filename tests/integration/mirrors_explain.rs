//! `--hosts-dir` (containerd certs.d layout, copied unchanged from a node) and
//! `pullcheck explain`.

use crate::support::process::{Run, check, run};
use crate::support::{ALICE, fixture, pull_secret, temp_dir};

/// certs.d/<host with :port → _port_>/hosts.toml
fn hosts_toml(root: &std::path::Path, registry_host: &str, body: &str) {
    let dir = match registry_host.rsplit_once(':') {
        Some((h, p)) => root.join(format!("{h}_{p}_")),
        None => root.join(registry_host),
    };
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hosts.toml"), body).unwrap();
}

/// A hosts dir in which the TLS+htpasswd registry is mirrored to the anonymous one with
/// these `capabilities` (TOML array items, e.g. `"pull"`).
fn basic_mirrored_to_anon(capabilities: &str) -> tempfile::TempDir {
    let f = fixture();
    let root = temp_dir();
    hosts_toml(
        root.path(),
        &f.basic.host,
        &format!(
            "server = \"https://{}\"\n\n[host.\"http://{}\"]\n  capabilities = [{capabilities}]\n",
            f.basic.host, f.anon.host
        ),
    );
    root
}

/// The TLS+htpasswd registry as the reference's registry, mirrored (hosts.toml) to the
/// anonymous registry, which holds the same content; plus a pull secret for the upstream.
struct MirrorSetup {
    root: tempfile::TempDir,
    _secret_dir: tempfile::TempDir,
    secret: String,
}

impl MirrorSetup {
    fn new(capabilities: &str) -> MirrorSetup {
        let f = fixture();
        let root = basic_mirrored_to_anon(capabilities);
        let dir = temp_dir();
        let secret = pull_secret(dir.path(), "s.json", &[(&f.basic.host, ALICE.0, ALICE.1)]);
        MirrorSetup {
            root,
            _secret_dir: dir,
            secret,
        }
    }

    /// `check --hosts-dir … --pull-secrets … --platform any IMAGE`.
    fn check(&self, image: &str) -> Run {
        check(&[
            "--hosts-dir",
            self.root.path().to_str().unwrap(),
            "--pull-secrets",
            &self.secret,
            "--platform",
            "any",
            image,
        ])
    }
}

#[test]
fn mirror_is_tried_first_with_ns_and_without_credentials() {
    let f = fixture();
    let setup = MirrorSetup::new("\"pull\", \"resolve\"");
    let mark = f.anon.mark();
    let r = setup.check(&f.images.deep.reference(&f.basic));
    r.assert_code(0);
    assert_eq!(r.image(0)["endpoint"], f.anon.host.as_str());
    let ns = f.basic.host.replace(':', "%3A");
    let seen = f
        .anon
        .requests_since_matching(mark, &format!("/org/sub/project/img/manifests/v1?ns={ns}"));
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].method, "HEAD");
    assert_eq!(
        seen[0].uri,
        format!("/v2/org/sub/project/img/manifests/v1?ns={ns}")
    );
}

#[test]
fn credentials_never_go_to_a_mirror_on_another_host() {
    let f = fixture();
    let img = &f.images.oci_manifest;
    // A scripted mirror (it only has to record headers) that wants credentials: it must
    // never get the upstream's, so the check falls through to the upstream.
    let mirror = crate::support::scripted_server::Scripted::start(|_, _| {
        (
            401,
            vec![("WWW-Authenticate".into(), "Basic realm=\"mirror\"".into())],
            String::new(),
        )
    });
    let root = temp_dir();
    hosts_toml(
        root.path(),
        &f.basic.host,
        &format!(
            "server = \"https://{}\"\n\n[host.\"http://{}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
            f.basic.host, mirror.host
        ),
    );
    let dir = temp_dir();
    let secret = pull_secret(dir.path(), "s.json", &[(&f.basic.host, ALICE.0, ALICE.1)]);
    let r = check(&[
        "--hosts-dir",
        root.path().to_str().unwrap(),
        "--pull-secrets",
        &secret,
        "--platform",
        "any",
        &img.reference(&f.basic),
    ]);
    r.assert_code(0);
    assert_eq!(r.image(0)["endpoint"], f.basic.host.as_str());
    let ns = f.basic.host.replace(':', "%3A");
    assert_eq!(
        mirror.requests(),
        vec![format!("HEAD /v2/oci/app/manifests/v1?ns={ns}")]
    );
    assert_eq!(*mirror.authorizations.lock().unwrap(), vec![None]);
}

#[test]
fn missing_on_the_mirror_falls_back_to_the_server() {
    let f = fixture();
    // Both hold the same content (shared storage), so check a missing tag: 404 on the
    // mirror, then 404 on the server: not found, reported from the server.
    let r = MirrorSetup::new("\"pull\", \"resolve\"")
        .check(&format!("{}/oci/app:absent", f.basic.host));
    r.assert_code(11);
    assert_eq!(r.image(0)["endpoint"], f.basic.host.as_str());
}

#[test]
fn a_mirror_without_resolve_is_not_asked_for_tags() {
    let f = fixture();
    let mark = f.anon.mark();
    let r = MirrorSetup::new("\"pull\"").check(&f.images.docker_schema2.reference(&f.basic));
    r.assert_code(0);
    assert_eq!(r.image(0)["endpoint"], f.basic.host.as_str());
    assert_eq!(
        f.anon
            .requests_since_matching(mark, "/docker/app/manifests/v1?ns=")
            .len(),
        0
    );
}

#[test]
fn explain_shows_endpoints_and_credential_keys_in_order() {
    let f = fixture();
    let root = basic_mirrored_to_anon("\"pull\"");
    let dir = temp_dir();
    let secret = pull_secret(
        dir.path(),
        "s.json",
        &[
            (&f.basic.host, "a", "secret-one"),
            (&format!("{}/oci", f.basic.host), "b", "secret-two"),
            ("*.example.com", "c", "x"),
        ],
    );
    let image = f.images.oci_manifest.reference(&f.basic);
    let r = run(
        &[
            "explain",
            "--output",
            "json",
            "--hosts-dir",
            root.path().to_str().unwrap(),
            "--pull-secrets",
            &secret,
            "--platform",
            "linux/arm64/v8",
            &image,
        ],
        &[],
    );
    r.assert_code(0);
    let j = r.json();
    assert_eq!(j["reference"], image.as_str());
    assert_eq!(
        j["kubelet_repo_to_pull"],
        format!("{}/oci/app", f.basic.host)
    );
    assert_eq!(j["kubelet_image_sent_to_cri"], image.as_str());
    assert_eq!(
        j["endpoints"][0]["url"],
        format!("http://{}/v2", f.anon.host)
    );
    assert_eq!(j["endpoints"][0]["mirror"], true);
    assert_eq!(
        j["endpoints"][0]["used_for_this_reference"], false,
        "tags need resolve"
    );
    assert_eq!(
        j["endpoints"][1]["url"],
        format!("https://{}/v2", f.basic.host)
    );
    assert_eq!(
        j["credentials"],
        serde_json::json!([
            format!("pull secret {secret} key {}/oci", f.basic.host),
            format!("pull secret {secret} key {}", f.basic.host),
        ])
    );
    assert_eq!(j["platform"], "linux/arm64/v8");
    assert!(!r.stdout.contains("secret-one") && !r.stdout.contains("secret-two"));
}

/// A pull secret keyed `127.0.0.1` for an image on `127.0.0.1:5443`: explain names every key
/// it saw and the part of the kubelet's match that failed, and an `--insecure-registry`
/// without the port is named as not applying. Nothing is contacted.
#[test]
fn explain_names_each_unmatched_key_and_why() {
    let dir = temp_dir();
    let secret = pull_secret(
        dir.path(),
        "s.json",
        &[
            ("127.0.0.1", "a", "secret-one"),
            ("127.0.0.1:5443/team", "b", "secret-two"),
            ("docker://127.0.0.1:5443", "c", "secret-three"),
        ],
    );
    let base = [
        "explain",
        "--no-docker-config",
        "--pull-secrets",
        &secret,
        "--insecure-registry",
        "127.0.0.1",
        "--platform",
        "linux/amd64",
        "127.0.0.1:5443/app:v1",
    ];
    let r = run(&base, &[]);
    r.assert_code(0);
    assert_eq!(
        r.stdout,
        format!(
            "image:        127.0.0.1:5443/app:v1
reference:    127.0.0.1:5443/app:v1
registry:     127.0.0.1:5443
repository:   app
manifest:     /v2/app/manifests/v1
kubelet:      keyring lookup 127.0.0.1:5443/app; CRI receives 127.0.0.1:5443/app:v1
endpoints (in order):
  1. https://127.0.0.1:5443/v2 [pull,resolve,push,referrers]
     --insecure-registry 127.0.0.1 does not apply: the port is part of the registry's name
credentials:  none match: one anonymous attempt
pull-secret keys not used for 127.0.0.1:5443/app (kubelet keyring rules):
  - pull secret {secret} key docker://127.0.0.1:5443: scheme: the kubelet strips only https:// and http://, so a docker:// key is read as the host docker:; write the key without docker://
  - pull secret {secret} key 127.0.0.1:5443/team: path: the key's /team is not a prefix of the image's /app
  - pull secret {secret} key 127.0.0.1: port: the key has no port, the image's registry has port 5443; ports must be equal
platform:     linux/amd64
artifacts:    an OCI artifact (artifactType, or a config that is not an image config) is unusable_artifact (15): containerd can't run it, and mounts as an image volume only one with image layers its own config lists (those pass with a warning)
"
        )
    );
    let mut json = base.to_vec();
    json.insert(1, "--output=json");
    let r = run(&json, &[]);
    r.assert_code(0);
    let j = r.json();
    assert_eq!(
        j["unmatched_keys"][2],
        serde_json::json!({
            "credential": format!("pull secret {secret} key 127.0.0.1"),
            "why": ["port: the key has no port, the image's registry has port 5443; ports must be equal"],
        })
    );
    assert_eq!(
        j["endpoints"][0]["insecure_registry_not_applied"],
        "127.0.0.1"
    );
    assert!(!r.stdout.contains("secret-one") && !r.stdout.contains("secret-two"));
}

#[test]
fn explain_of_a_short_name_shows_kubelet_normalization() {
    let r = run(
        &[
            "explain",
            "--output",
            "json",
            "--no-docker-config",
            "busybox",
        ],
        &[],
    );
    r.assert_code(0);
    let j = r.json();
    assert_eq!(j["reference"], "docker.io/library/busybox:latest");
    assert_eq!(j["kubelet_image_sent_to_cri"], "busybox:latest");
    assert_eq!(j["endpoints"][0]["url"], "https://registry-1.docker.io/v2");
    assert_eq!(j["credentials"], serde_json::json!([]));
}

#[test]
fn usage_errors_are_one_line_with_exit_2() {
    for (args, start) in [
        (
            vec!["check", "--platform", "linux/*", "x"],
            "pullcheck: --platform linux/*: ",
        ),
        (
            vec!["check", "--timeout", "0", "x"],
            "pullcheck: --timeout 0: must be more than 0 and at most 86400 seconds",
        ),
        (
            vec!["check", "--hosts-dir", "/nonexistent", "x"],
            "pullcheck: --hosts-dir /nonexistent: not a directory",
        ),
        (
            vec!["check", "--pull-secrets", "/nonexistent/s.json", "x"],
            "pullcheck: ",
        ),
        (
            vec!["check", "--ca-file", "/etc/hostname", "x"],
            "pullcheck: CA file /etc/hostname: ",
        ),
    ] {
        let r = run(&args, &[]);
        r.assert_code(2);
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with(start), "{args:?}: {}", r.stderr);
    }
    let r = run(&["check"], &[]);
    r.assert_code(2);
}

#[test]
fn a_broken_hosts_toml_or_ca_is_a_usage_error_not_a_verdict() {
    let root = temp_dir();
    for (body, start) in [
        ("server = 42\n", "pullcheck: "),
        (
            "server = \"https://r.example.com\"\nca = \"/nonexistent/ca.pem\"\n",
            "pullcheck: CA file /nonexistent/ca.pem: ",
        ),
    ] {
        hosts_toml(root.path(), "r.example.com", body);
        let r = run(
            &[
                "check",
                "--hosts-dir",
                root.path().to_str().unwrap(),
                "r.example.com/app:v1",
            ],
            &[],
        );
        r.assert_code(2);
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
        assert!(r.stderr.starts_with(start), "{}", r.stderr);
    }
}

#[test]
fn manifests_larger_than_the_cap_are_refused_whole() {
    let dir = temp_dir();
    let big = dir.path().join("big.yaml");
    let doc = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n";
    std::fs::write(&big, doc.repeat(64 * 1024 * 1024 / doc.len() + 1)).unwrap();
    for cmd in ["inject", "lint", "scan"] {
        let mut args = vec![cmd, "-f", big.to_str().unwrap()];
        if cmd == "inject" {
            args.extend(["--image", crate::support::CHECKER_IMAGE]);
        }
        let r = run(&args, &[]);
        r.assert_code(2);
        assert_eq!(
            r.stderr,
            format!(
                "pullcheck: {}: larger than 64 MiB; split the manifests into several files\n",
                big.display()
            )
        );
    }
}

/// `explain --output json <args…>`, asserting exit 0.
fn explain(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["explain", "--output", "json"];
    all.extend_from_slice(args);
    let r = run(&all, &[]);
    r.assert_code(0);
    r.json()
}

/// `credentials_sent` of every endpoint, in order.
fn credentials_sent(j: &serde_json::Value) -> Vec<bool> {
    j["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["credentials_sent"].as_bool().unwrap())
        .collect()
}

#[test]
fn explain_prints_the_platform_decision_check_makes() {
    let j = explain(&["--no-docker-config", "--metered-get", "never", "nginx"]);
    assert_eq!(
        j["platform"],
        "not checked: docker.io counts every manifest GET as a pull; pass --verify-platform-on-metered to check"
    );
    assert_eq!(credentials_sent(&j), vec![false]);

    // Asked to verify, explain names the platform check would look for: the host's, the
    // target `check` reports for an image without --platform.
    let f = fixture();
    let r = check(&[
        "--insecure-registry",
        &f.anon.host,
        &f.images.multi_index.reference(&f.anon),
    ]);
    r.assert_code(0);
    let host_platform = r.image(0)["platform"]["target"].clone();
    assert!(
        host_platform
            .as_str()
            .is_some_and(|p| p.starts_with("linux/"))
    );
    let j = explain(&[
        "--no-docker-config",
        "--verify-platform-on-metered",
        "nginx",
    ]);
    assert_eq!(j["platform"], host_platform);
    assert!(j.get("node_credentials").is_none(), "{j}");

    // By default (--metered-get affordable) the same platform, fetched only if the quota
    // the free HEAD states affords it.
    let j = explain(&["--no-docker-config", "nginx"]);
    assert_eq!(
        j["platform"],
        format!(
            "{} if affordable: docker.io counts every manifest GET as a pull; after the free HEAD the index is fetched only when the registry states no limit or more than 10 pulls left",
            host_platform.as_str().unwrap()
        )
    );
}

#[test]
fn explain_marks_credentials_sent_only_where_a_credential_would_go() {
    let f = fixture();
    let image = f.images.oci_manifest.reference(&f.basic);
    // The mirror may resolve tags, so both endpoints are used for this reference.
    let root = basic_mirrored_to_anon("\"pull\", \"resolve\"");
    let hosts = root.path().to_str().unwrap();

    let j = explain(&["--hosts-dir", hosts, "--no-docker-config", &image]);
    let used: Vec<bool> = j["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["used_for_this_reference"].as_bool().unwrap())
        .collect();
    assert_eq!(used, vec![true, true]);
    assert_eq!(
        credentials_sent(&j),
        vec![false, false],
        "no credential matches"
    );

    let dir = temp_dir();
    let secret = pull_secret(dir.path(), "s.json", &[(&f.basic.host, ALICE.0, ALICE.1)]);
    let j = explain(&[
        "--hosts-dir",
        hosts,
        "--no-docker-config",
        "--pull-secrets",
        &secret,
        &image,
    ]);
    assert_eq!(j["endpoints"][0]["mirror"], true);
    assert_eq!(j["endpoints"][1]["mirror"], false);
    assert_eq!(
        credentials_sent(&j),
        vec![false, true],
        "the upstream's secret goes to the upstream only"
    );
    assert_eq!(
        j["credentials"],
        serde_json::json!([format!("pull secret {secret} key {}", f.basic.host)])
    );
}

#[test]
fn explain_names_the_node_credential_pattern_of_an_ecr_looking_registry() {
    let image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/app:v1";
    let j = explain(&["--no-docker-config", image]);
    assert_eq!(j["node_credentials"], "*.dkr.ecr.*.amazonaws.com");
    assert_eq!(j["credentials"], serde_json::json!([]));
    assert_eq!(credentials_sent(&j), vec![false]);
    assert_eq!(
        j["endpoints"][0]["url"],
        "https://123456789012.dkr.ecr.us-east-1.amazonaws.com/v2"
    );
}

/// Every JSON document a command prints carries the same `schema_version`.
#[test]
fn every_json_document_has_the_same_schema_version() {
    let dir = temp_dir();
    let job = dir.path().join("job.yaml");
    std::fs::write(
        &job,
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: 'Bad Image'}]\n",
    )
    .unwrap();
    let job = job.to_str().unwrap();
    let mut versions = Vec::new();
    for (args, code) in [
        (vec!["explain", "--output", "json", "busybox"], 0),
        (vec!["check", "--output", "json", "Bad Image"], 10),
        (vec!["scan", "--output", "json", "-f", job], 10),
        (vec!["lint", "--output", "json", "-f", job], 0),
    ] {
        let r = run(&args, &[]);
        r.assert_code(code);
        versions.push(r.json()["schema_version"].clone());
    }
    assert_eq!(versions, vec![serde_json::json!(1); 4]);
}

/// containerd 2.x's host loop ranks a 404 above a failure to get an answer
/// (`core/remotes/docker/resolver.go` `Resolve`): a mirror that refuses connections in front
/// of an upstream that answers 404 is "not found", exit 11, as the node reports it. It was
/// "transient" (exit 20), containerd 1.7's order, which restarts or retries a Job whose tag
/// doesn't exist.
#[test]
fn an_unreachable_mirror_in_front_of_a_404_is_not_found_as_on_containerd_2() {
    let f = fixture();
    // A port nothing listens on: connection refused.
    let unreachable = format!("127.0.0.1:{}", crate::support::ports::free_port().unwrap());
    let image = format!("{}/oci/app:absent", f.anon.host);
    // (server, mirror tried first): the unreachable host as the mirror in front of the
    // registry's 404, then the reverse order of answers (the mirror 404s, the upstream is
    // unreachable): containerd keeps the 404 over the transport error either way.
    for (server, mirror) in [
        (f.anon.host.as_str(), unreachable.as_str()),
        (unreachable.as_str(), f.anon.host.as_str()),
    ] {
        let root = temp_dir();
        hosts_toml(
            root.path(),
            &f.anon.host,
            &format!(
                "server = \"http://{server}\"\n\n[host.\"http://{mirror}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
            ),
        );
        let r = check(&[
            "--hosts-dir",
            root.path().to_str().unwrap(),
            "--platform",
            "any",
            &image,
        ]);
        r.assert_code(11);
        let j = r.image(0);
        assert_eq!(
            j["verdict"], "not_found",
            "server {server}, mirror {mirror}"
        );
        assert_eq!(j["endpoint"], f.anon.host.as_str());
    }
}

#[test]
fn node_runtime_picks_the_failure_that_wins_across_mirrors() {
    let f = fixture();
    let unreachable = format!("127.0.0.1:{}", crate::support::ports::free_port().unwrap());
    let image = format!("{}/oci/app:absent", f.anon.host);
    // (server, mirror tried first, runtime, exit code): containerd 2 keeps the 404,
    // containerd 1.7 the first failure that is not a 404, CRI-O the upstream's (tried last).
    let cases = [
        (
            f.anon.host.as_str(),
            unreachable.as_str(),
            "containerd-2",
            11,
        ),
        (
            f.anon.host.as_str(),
            unreachable.as_str(),
            "containerd-1.7",
            20,
        ),
        (f.anon.host.as_str(), unreachable.as_str(), "cri-o", 11),
        (
            unreachable.as_str(),
            f.anon.host.as_str(),
            "containerd-2",
            11,
        ),
        (
            unreachable.as_str(),
            f.anon.host.as_str(),
            "containerd-1.7",
            20,
        ),
        (unreachable.as_str(), f.anon.host.as_str(), "cri-o", 20),
    ];
    for (server, mirror, runtime, code) in cases {
        let root = temp_dir();
        hosts_toml(
            root.path(),
            &f.anon.host,
            &format!(
                "server = \"http://{server}\"\n\n[host.\"http://{mirror}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
            ),
        );
        let r = check(&[
            "--hosts-dir",
            root.path().to_str().unwrap(),
            "--platform",
            "any",
            "--node-runtime",
            runtime,
            &image,
        ]);
        assert_eq!(
            r.code, code,
            "server {server}, mirror {mirror}, {runtime}: {}",
            r.stdout
        );
    }
    let r = check(&["--node-runtime", "crio", &image]);
    r.assert_code(2);
    assert!(
        r.stderr.contains(
            "invalid value 'crio' for '--node-runtime <RUNTIME>': not a node runtime; one of containerd-2, containerd-1.7, cri-o"
        ),
        "{}",
        r.stderr
    );
}
