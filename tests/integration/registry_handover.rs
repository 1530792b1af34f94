//! The registry configuration `inject` (like the webhook) hands to the init container:
//! `inject --insecure-registry/--ca-file/--hosts-dir` writes it, and the injected container,
//! run exactly as the kubelet would run it (its args and env; the downward-API and
//! projected-secret files where its mounts put them), reaches a plain-HTTP registry and a
//! private-CA TLS registry with no flags of its own: present → 0, missing → 11. Without the
//! hand-over the same container exits 20 (the bug this fixes).

use std::path::Path;

use serde_json::{Value, json};

use crate::support::process::{Run, output, pullcheck};
use crate::support::{self, ALICE, fixture};

/// The first pull-secret name the Jobs below use.
const SECRET: &str = "regcred";

fn job(name: &str, image: &str, host_network: bool, pull_secret: bool) -> Value {
    let mut spec = json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": image}]});
    if host_network {
        spec["hostNetwork"] = json!(true);
    }
    if pull_secret {
        spec["imagePullSecrets"] = json!([{"name": SECRET}]);
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"template": {"spec": spec}}})
}

/// `pullcheck inject` of these Jobs with `flags`: the Jobs and the stderr lines.
fn inject(jobs: &[Value], flags: &[&str]) -> (Vec<Value>, Vec<String>) {
    let dir = support::temp_dir();
    let input = dir.path().join("jobs.yaml");
    let text: Vec<String> = jobs
        .iter()
        .map(|j| pullcheck::k8s::yaml::to_yaml(j).unwrap())
        .collect();
    std::fs::write(&input, text.join("---\n")).unwrap();
    let image = format!("mirror.example/pullcheck@sha256:{}", "a".repeat(64));
    let mut cmd = pullcheck();
    cmd.args(["inject", "-f"])
        .arg(&input)
        .args(["--image", &image])
        .args(flags);
    let out: Run = output(&mut cmd, None).into();
    out.assert_code(0);
    let docs = pullcheck::k8s::yaml::parse_documents(&out.stdout).unwrap();
    (
        docs.into_iter().map(|d| d.value).collect(),
        out.stderr.lines().map(str::to_string).collect(),
    )
}

/// Run the template's pullcheck init container as the kubelet would: the downward-API
/// volumes written from the template's annotations (an absent one as an empty file), the
/// projected pull secrets from `secrets` (name → `.dockerconfigjson`), each where its
/// mount puts it below `root`; then the container's args and env, every path under
/// `/var/run/pullcheck` moved below `root`.
pub(crate) fn run_init_container(template: &Value, secrets: &[(&str, &str)]) -> Run {
    let dir = support::temp_dir();
    let root = dir.path();
    let at = |p: &str| format!("{}{p}", root.display());
    let c = &template["spec"]["initContainers"][0];
    assert_eq!(c["name"], "pullcheck");
    let mounts = c["volumeMounts"].as_array().cloned().unwrap_or_default();
    for vol in template["spec"]["volumes"].as_array().into_iter().flatten() {
        let Some(m) = mounts.iter().find(|m| m["name"] == vol["name"]) else {
            continue;
        };
        let base = Path::new(&at(m["mountPath"].as_str().unwrap())).to_path_buf();
        std::fs::create_dir_all(&base).unwrap();
        for item in vol["downwardAPI"]["items"].as_array().into_iter().flatten() {
            let field = item["fieldRef"]["fieldPath"].as_str().unwrap();
            let key = field
                .strip_prefix("metadata.annotations['")
                .and_then(|k| k.strip_suffix("']"))
                .unwrap();
            let value = template["metadata"]["annotations"][key]
                .as_str()
                .unwrap_or("");
            std::fs::write(base.join(item["path"].as_str().unwrap()), value).unwrap();
        }
        for source in vol["projected"]["sources"].as_array().into_iter().flatten() {
            let name = source["secret"]["name"].as_str().unwrap();
            let Some((_, body)) = secrets.iter().find(|(n, _)| *n == name) else {
                continue; // optional: a missing secret is no file
            };
            for item in source["secret"]["items"].as_array().unwrap() {
                if item["key"] == ".dockerconfigjson" {
                    let p = base.join(item["path"].as_str().unwrap());
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::write(p, body).unwrap();
                }
            }
        }
    }
    let moved = |v: &str| match v.strip_prefix("/var/run/pullcheck") {
        Some(rest) => at(&format!("/var/run/pullcheck{rest}")),
        None => v.to_string(),
    };
    let mut cmd = pullcheck();
    for a in c["args"].as_array().unwrap() {
        cmd.arg(moved(a.as_str().unwrap()));
    }
    for e in c["env"].as_array().into_iter().flatten() {
        cmd.env(
            e["name"].as_str().unwrap(),
            moved(e["value"].as_str().unwrap()),
        );
    }
    cmd.arg("--termination-log")
        .arg(root.join("termination-log"));
    output(&mut cmd, None).into()
}

/// The same container without what was handed over (its env): the check as it was.
fn without_hand_over(template: &Value) -> Value {
    let mut t = template.clone();
    t["spec"]["initContainers"][0]
        .as_object_mut()
        .unwrap()
        .remove("env");
    t
}

fn template(job: &Value) -> &Value {
    &job["spec"]["template"]
}

#[test]
fn a_plain_http_registry_is_reached_by_the_injected_check() {
    let f = fixture();
    let present = f.images.oci_manifest.reference(&f.anon);
    let missing = format!("{}/oci/app:no-such-tag", f.anon.host);
    let (jobs, stderr) = inject(
        &[
            job("present", &present, false, false),
            job("missing", &missing, false, false),
        ],
        &["--insecure-registry", &f.anon.host],
    );
    // The hand-over, exactly; and the args are the check's as before.
    let want = json!({"registries": {f.anon.host.clone(): [{"url": format!("http://{}/v2", f.anon.host)}]}})
        .to_string();
    for (j, image) in jobs.iter().zip([&present, &missing]) {
        let t = template(j);
        assert_eq!(
            t["metadata"]["annotations"]["pullcheck.io/registry-config"],
            want.as_str()
        );
        assert_eq!(
            t["spec"]["initContainers"][0]["args"],
            json!(["check", "--no-docker-config", image])
        );
        assert_eq!(
            t["spec"]["initContainers"][0]["env"],
            json!([{"name": "PULLCHECK_REGISTRY_CONFIG", "value": "/var/run/pullcheck/registry-config/config.json"}])
        );
    }
    // A pod-network Job can't reach the node's loopback: said once per registry and Job.
    let why = format!(
        "registry {h} is a loopback address: the init container can't reach it from the pod network",
        h = f.anon.host
    );
    let warned: Vec<&String> = stderr.iter().filter(|l| l.ends_with(&why)).collect();
    assert_eq!(warned.len(), 2, "{stderr:?}");
    assert!(
        warned[0].contains("document 1 /spec/template: registry"),
        "{stderr:?}"
    );
    assert!(
        warned[1].contains("document 2 /spec/template: registry"),
        "{stderr:?}"
    );

    let r = run_init_container(template(&jobs[0]), &[]);
    r.assert_code(0);
    let r = run_init_container(template(&jobs[1]), &[]);
    r.assert_code(11);
    // Before the hand-over: HTTPS to a plain-HTTP registry, transient, retried forever.
    let r = run_init_container(&without_hand_over(template(&jobs[0])), &[]);
    r.assert_code(20);
    assert!(
        r.stdout.contains("answered HTTPS with plain HTTP"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_private_ca_tls_registry_is_reached_by_the_injected_check() {
    let f = fixture();
    let present = f.images.oci_manifest.reference(&f.basic);
    let missing = format!("{}/oci/app:no-such-tag", f.basic.host);
    let ca = f.ca_file.to_string_lossy().into_owned();
    // hostNetwork Jobs (as the node harness runs them) share the node's loopback: no warning.
    let (jobs, stderr) = inject(
        &[
            job("present", &present, true, true),
            job("missing", &missing, true, true),
        ],
        &["--ca-file", &ca],
    );
    assert_eq!(stderr, Vec::<String>::new());
    let pem = std::fs::read_to_string(&f.ca_file).unwrap();
    let want = json!({"caBundles": [pem]}).to_string();
    for (j, image) in jobs.iter().zip([&present, &missing]) {
        let t = template(j);
        assert_eq!(
            t["metadata"]["annotations"]["pullcheck.io/registry-config"],
            want.as_str()
        );
        assert_eq!(
            t["spec"]["initContainers"][0]["args"],
            json!([
                "check",
                "--pull-secrets",
                "/var/run/pullcheck/secrets",
                "--no-docker-config",
                image
            ])
        );
    }
    let dir = support::temp_dir();
    let secret = std::fs::read_to_string(support::pull_secret(
        dir.path(),
        "s",
        &[(&f.basic.host, ALICE.0, ALICE.1)],
    ))
    .unwrap();
    let secrets = [(SECRET, secret.as_str())];
    run_init_container(template(&jobs[0]), &secrets).assert_code(0);
    run_init_container(template(&jobs[1]), &secrets).assert_code(11);
    let r = run_init_container(&without_hand_over(template(&jobs[0])), &secrets);
    r.assert_code(20);
    assert!(r.stdout.contains("certificate not trusted"), "{}", r.stdout);
    // The same Jobs on the pod network: the registry is on the node's loopback.
    let (_, stderr) = inject(
        &[job("present", &present, false, true)],
        &["--ca-file", &ca],
    );
    assert_eq!(stderr.len(), 1, "{stderr:?}");
    assert!(
        stderr[0].ends_with(&format!(
            "registry {h} is a loopback address: the init container can't reach it from the pod network",
            h = f.basic.host
        )),
        "{stderr:?}"
    );
}

/// A CA file that also holds a private key (a `cat ca.pem ca.key` bundle) hands over its
/// certificates only: the key never reaches the workload's annotation, and the check still
/// trusts the CA (found by a newcomer's trial: the file's text was copied whole).
#[test]
fn a_private_key_beside_the_ca_is_never_handed_over() {
    let f = fixture();
    let present = f.images.oci_manifest.reference(&f.basic);
    let dir = support::temp_dir();
    let bundle = dir.path().join("ca-and-key.pem");
    let ca_pem = std::fs::read_to_string(&f.ca_file).unwrap();
    let key_pem = std::fs::read_to_string(&f.server_key).unwrap();
    assert!(key_pem.contains("PRIVATE KEY"), "the fixture key is PEM");
    std::fs::write(&bundle, format!("{ca_pem}{key_pem}")).unwrap();
    let (jobs, _) = inject(
        &[job("present", &present, true, true)],
        &["--ca-file", bundle.to_str().unwrap()],
    );
    let t = template(&jobs[0]);
    let handed = t["metadata"]["annotations"]["pullcheck.io/registry-config"]
        .as_str()
        .unwrap();
    assert!(!handed.contains("PRIVATE KEY"), "{handed}");
    assert_eq!(handed, json!({"caBundles": [ca_pem]}).to_string());
    let secret = std::fs::read_to_string(support::pull_secret(
        dir.path(),
        "s",
        &[(&f.basic.host, ALICE.0, ALICE.1)],
    ))
    .unwrap();
    run_init_container(t, &[(SECRET, secret.as_str())]).assert_code(0);
}

/// `inject --insecure-registry 127.0.0.1` for an image on `127.0.0.1:PORT` hands nothing
/// over (the port is part of the registry's name, as for containerd); it says so instead of
/// injecting a check that will exit 20 in silence (newcomer trial).
#[test]
fn an_insecure_registry_without_the_port_is_named_by_inject() {
    let f = fixture();
    let present = f.images.oci_manifest.reference(&f.anon);
    let (jobs, stderr) = inject(
        &[job("present", &present, true, false)],
        &["--insecure-registry", "127.0.0.1"],
    );
    assert_eq!(
        template(&jobs[0])["metadata"]["annotations"].get("pullcheck.io/registry-config"),
        None
    );
    assert_eq!(stderr.len(), 1, "{stderr:?}");
    assert!(
        stderr[0].ends_with(&format!(
            "--insecure-registry 127.0.0.1 does not cover {}: the port is part of the registry's name",
            f.anon.host
        )),
        "{stderr:?}"
    );
}

#[test]
fn a_mirror_from_hosts_dir_is_handed_over_and_a_bad_hand_over_is_a_usage_error() {
    let f = fixture();
    // Images named on a registry that doesn't exist, served by a plain-HTTP mirror and a
    // plain-HTTP server (both the anonymous registry: a 404 on the mirror moves on to the
    // server, as containerd does, so the missing tag is 11 there too).
    let dir = support::temp_dir();
    let hosts = dir.path().join("certs.d/reg.invalid");
    std::fs::create_dir_all(&hosts).unwrap();
    std::fs::write(
        hosts.join("hosts.toml"),
        format!(
            "server = \"http://{h}\"\n[host.\"http://{h}/\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
            h = f.anon.host
        ),
    )
    .unwrap();
    let hosts_dir = dir.path().join("certs.d").to_string_lossy().into_owned();
    let (jobs, _) = inject(
        &[
            job("present", "reg.invalid/oci/app:v1", true, false),
            job("missing", "reg.invalid/oci/app:no-such-tag", true, false),
        ],
        &["--hosts-dir", &hosts_dir],
    );
    assert_eq!(
        template(&jobs[0])["metadata"]["annotations"]["pullcheck.io/registry-config"],
        json!({"registries": {"reg.invalid": [
            {"url": format!("http://{}/v2", f.anon.host), "capabilities": ["pull", "resolve"], "mirror": true},
            {"url": format!("http://{}/v2", f.anon.host), "mirror": true},
        ]}})
        .to_string()
        .as_str()
    );
    run_init_container(template(&jobs[0]), &[]).assert_code(0);
    run_init_container(template(&jobs[1]), &[]).assert_code(11);

    // A corrupt file: exit 2 naming it, not a verdict.
    let mut broken = template(&jobs[0]).clone();
    broken["metadata"]["annotations"]["pullcheck.io/registry-config"] = json!("{\"registries\": 1");
    let r = run_init_container(&broken, &[]);
    r.assert_code(2);
    assert!(
        r.stderr.starts_with("pullcheck: --registry-config /")
            && r.stderr.ends_with("/var/run/pullcheck/registry-config/config.json: EOF while parsing an object at line 1 column 16; it must be the pullcheck.io/registry-config annotation the webhook wrote (inject again, or use a checker image as new as the webhook)\n")
            && r.stderr.lines().count() == 1,
        "{}",
        r.stderr
    );
    // The annotation removed but the container kept: a warning, and the flags alone.
    let mut gone = template(&jobs[0]).clone();
    gone["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    // (Bounded: reg.invalid is then contacted directly and can't be resolved.)
    gone["spec"]["initContainers"][0]["args"]
        .as_array_mut()
        .unwrap()
        .insert(1, json!("--timeout=2"));
    let r = run_init_container(&gone, &[]);
    r.assert_code(20);
    assert!(
        r.stderr.contains("config.json: empty (the pod template has no pullcheck.io/registry-config annotation); checking with the flags alone"),
        "{}",
        r.stderr
    );
}

/// The webhook hands over its own settings (`--insecure-registry`, and the harness's
/// `--ca-file`): the mutated Job's annotation is exact, the loopback registry is warned
/// about, the injected container run as the pod would passes, and mutating the result
/// again changes nothing.
#[test]
fn the_webhook_hands_over_its_registry_settings() {
    use crate::webhook::{Webhook, patch_of, review};
    let f = fixture();
    let anon = &f.anon;
    let wh = Webhook::start(&["--insecure-registry", &anon.host]);
    let rev = review("job-create.json", &anon.host);
    let resp = wh.mutate(&rev);
    assert_eq!(
        resp["warnings"],
        json!([format!(
            "registry {} is a loopback address: the init container can't reach it from the pod network",
            anon.host
        )])
    );
    let mut obj = rev["request"]["object"].clone();
    json_patch::patch(&mut obj, &patch_of(&resp).unwrap()).unwrap();
    let pem = std::fs::read_to_string(&f.ca_file).unwrap();
    let t = template(&obj);
    assert_eq!(
        t["metadata"]["annotations"]["pullcheck.io/registry-config"],
        json!({"caBundles": [pem], "registries": {anon.host.clone(): [{"url": format!("http://{}/v2", anon.host)}]}})
            .to_string()
            .as_str()
    );
    run_init_container(t, &[]).assert_code(0);
    let mut again = rev.clone();
    again["request"]["object"] = obj;
    assert!(patch_of(&wh.mutate(&again)).is_none());
}
