//! Scenario 11: Docker Hub's pull quota on the node. scripts/cluster/dockerhub-standin.py is a
//! scripted stand-in (Docker Hub's quota headers are a vendor's behaviour no real registry
//! shows) in front of the real workload registry; containerd and both pullchecks go through
//! it. The index offers linux/arm64 only; the node is linux/amd64. The mutating webhook
//! (cluster platforms amd64 + arm64) admits and mutates the Job while the stand-in states 50
//! pulls left; then 5 are left, below the default margin of 10.
//! 11a: the webhook handed the index body to the init container (pullcheck.io/index-bodies);
//! 11b: `pullcheck inject` alone (no body to hand over).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::node::{Node, NodeError, run_ok};
use crate::run::{
    Followed, exit_codes, expect, follow, free_port, job_cond, job_yaml, make_tls,
    register_webhook, row, save_detail, spawn, wait_ready,
};
use crate::sample::{Finished, Target, pullcheck_terminations, termination_text};
use crate::scenarios::Ctx;
use crate::series::{md_escape, t_str};

fn io(e: std::io::Error) -> NodeError {
    NodeError::Setup(e.to_string())
}

/// Write `bytes` as a blob of the OCI layout `lay`; its digest (hex) and size.
fn blob(lay: &Path, bytes: &[u8]) -> Result<(String, usize), NodeError> {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(lay.join("blobs/sha256").join(&hex), bytes).map_err(io)?;
    Ok((hex, bytes.len()))
}

/// An image index whose only entry is linux/arm64 (a one-file layer `ARCH`), pushed to
/// `dest` with skopeo. The bytes are the shell harness's (same tar flags, same JSON), so
/// the digest is the one the committed doc names.
pub fn push_arm64_index(node: &Node, dest: &str) -> Result<(), NodeError> {
    let w = node.work.join("arm64-index");
    let _ = std::fs::remove_dir_all(&w);
    let lay = w.join("lay");
    std::fs::create_dir_all(lay.join("blobs/sha256")).map_err(io)?;
    std::fs::create_dir_all(w.join("root")).map_err(io)?;
    std::fs::write(w.join("root/ARCH"), "arm64\n").map_err(io)?;
    let tar = w.join("layer.tar");
    let (root_s, tar_s) = (
        w.join("root").display().to_string(),
        tar.display().to_string(),
    );
    run_ok(
        Path::new("/bin/tar"),
        &[
            "-C",
            &root_s,
            "--sort=name",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "--mtime=@0",
            "-cf",
            &tar_s,
            ".",
        ],
        None,
        30,
    )?;
    let (layer, layer_size) = blob(&lay, &std::fs::read(&tar).map_err(io)?)?;
    let config = json!({"architecture": "arm64", "os": "linux", "config": {},
                        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer}")]}});
    let (cfg, cfg_size) = blob(&lay, config.to_string().as_bytes())?;
    let manifest = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": format!("sha256:{cfg}"), "size": cfg_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": format!("sha256:{layer}"), "size": layer_size}]});
    let (man, man_size) = blob(&lay, manifest.to_string().as_bytes())?;
    let index = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": format!("sha256:{man}"),
                       "size": man_size, "platform": {"architecture": "arm64", "os": "linux"}}]});
    let (idx, idx_size) = blob(&lay, index.to_string().as_bytes())?;
    let layout = json!({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json",
        "digest": format!("sha256:{idx}"), "size": idx_size,
        "annotations": {"org.opencontainers.image.ref.name": "v1"}}]});
    std::fs::write(lay.join("index.json"), format!("{layout}\n")).map_err(io)?;
    std::fs::write(
        lay.join("oci-layout"),
        "{\"imageLayoutVersion\":\"1.0.0\"}\n",
    )
    .map_err(io)?;
    let src = format!("oci:{}:v1", lay.display());
    let dst = format!("docker://{dest}");
    run_ok(
        Path::new("/usr/bin/skopeo"),
        &[
            "copy",
            "--quiet",
            "--all",
            "--dest-tls-verify=false",
            &src,
            &dst,
        ],
        None,
        120,
    )?;
    Ok(())
}

/// Manifest GETs in the stand-in's log after line `mark` whose User-Agent starts with
/// `ua` (the log is `METHOD PATH<TAB>User-Agent` per request).
fn hub_gets(log: &Path, mark: usize, ua: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .skip(mark)
        .filter_map(|l| l.split_once('\t'))
        .filter(|(req, agent)| {
            req.starts_with("GET ") && req.contains("/manifests/") && agent.starts_with(ua)
        })
        .count()
}

fn lines(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// The kubelet's first `Failed` Event message for the pods named `PREFIX…` in `ns`.
pub fn kubelet_failed_msg(node: &Node, ns: &str, prefix: &str) -> Result<String, NodeError> {
    let ev = node.kubectl_json(&["-n", ns, "get", "events"])?;
    Ok(ev["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["involvedObject"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(prefix))
                && e["reason"] == "Failed"
                && e["source"]["component"] != "pullcheck-watch"
        })
        .find_map(|e| e["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| "-".into()))
}

/// Create `manifest`, set the stand-in's quota to `left`, and follow the Job.
fn create_then_quota(
    node: &Node,
    target: &Target,
    manifest: &str,
    quota: &Path,
    left: u32,
    max_s: f64,
) -> Result<Followed, NodeError> {
    let t0 = std::time::SystemTime::now();
    let start = Instant::now();
    node.kubectl_ok(&["create", "-f", "-"], Some(manifest))?;
    std::fs::write(quota, format!("{left}\n")).map_err(io)?;
    let series = follow(node, target, "jobs", start, max_s, 0.5);
    let list = node.kubectl_json(&["get", "pods", "-n", &target.ns])?;
    let terms = pullcheck_terminations(&list, target);
    Ok(Followed {
        series,
        terms,
        t0,
        pods_gone: false,
    })
}

/// Scenario 11 (11a and 11b).
pub fn s11(ctx: &mut Ctx) -> Result<(), NodeError> {
    let node = ctx.node.clone();
    let wreg = node.wreg().to_string();
    push_arm64_index(&node, &format!("{wreg}/hub/armonly:v1"))?;
    let hub = format!("127.0.0.1:{}", free_port()?);
    let quota = node.work.join("s11.quota");
    let log = node.work.join("s11.hub.log");
    std::fs::write(&quota, "50\n").map_err(io)?;
    std::fs::write(&log, "").map_err(io)?;
    let standin = node.root.join("scripts/cluster/dockerhub-standin.py");
    let port = hub.rsplit(':').next().unwrap_or("").to_string();
    let _hub_proc = spawn(
        Path::new("/usr/bin/python3"),
        &[
            &standin.display().to_string(),
            &port,
            &wreg,
            &quota.display().to_string(),
            &log.display().to_string(),
        ],
        &[],
        &node.work.join("s11.standin.log"),
    )?;
    let hosts = Path::new(node.var("PULLCHECK_CLUSTER_DIR"))
        .join("containerd/certs.d")
        .join(&hub);
    std::fs::create_dir_all(&hosts).map_err(io)?;
    std::fs::write(
        hosts.join("hosts.toml"),
        format!("server = \"http://{hub}\"\n\n[host.\"http://{hub}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"),
    )
    .map_err(io)?;
    let result = run_11(ctx, &node, &hub, &quota, &log);
    let _ = std::fs::remove_dir_all(&hosts);
    let _ = node.kubectl(
        &[
            "delete",
            "mutatingwebhookconfiguration",
            "pullcheck-scenario-11",
            "--ignore-not-found",
        ],
        None,
    );
    result
}

fn run_11(
    ctx: &mut Ctx,
    node: &Node,
    hub: &str,
    quota: &Path,
    log: &Path,
) -> Result<(), NodeError> {
    wait_ready(&format!("http://{hub}/v2/"), None, 50);
    let tls = node.work.join("webhook-tls");
    if !tls.join("ca.crt").exists() {
        make_tls(node, &tls)?;
    }
    let listen = format!("127.0.0.1:{}", free_port()?);
    let (crt, key, ca) = (
        tls.join("server.crt"),
        tls.join("server.key"),
        tls.join("ca.crt"),
    );
    let insecure = format!("--inject-check-arg=--insecure-registry={hub}");
    let metered = format!("--inject-check-arg=--metered-registry={hub}");
    let _hook = spawn(
        &node.pc,
        &[
            "webhook",
            "--listen",
            &listen,
            "--tls-cert",
            &crt.display().to_string(),
            "--tls-key",
            &key.display().to_string(),
            "--allow-loopback-registries",
            "--insecure-registry",
            hub,
            "--metered-registry",
            hub,
            "--fail-fast",
            "--transient",
            "count",
            "--inject-image",
            &node.pc_image,
            &insecure,
            &metered,
        ],
        &[],
        &node.work.join("s11.webhook.log"),
    )?;
    wait_ready(&format!("https://{listen}/readyz"), Some(&ca), 50);
    register_webhook(
        node,
        "Mutating",
        "pullcheck-scenario-11",
        "mutate",
        &listen,
        &ca,
        "hub",
        "\"CREATE\"",
    )?;
    std::thread::sleep(Duration::from_secs(2)); // the apiserver's webhook configuration informer
    let ns = "ff-s11";
    node.new_ns(ns, Some("pullcheck-scenario=hub"))?;
    let image = format!("{hub}/hub/armonly:v1");

    // 11a: admitted and mutated (the webhook pays one GET of its 50), then 5 left for the node
    let f = job_yaml(ns, "handed-over", &image, "Never", 6, "1", "2Gi", "");
    let mark = lines(log);
    let target = Target::job(ns, "handed-over");
    let t0 = std::time::SystemTime::now();
    let start = Instant::now();
    node.kubectl_ok(&["create", "-f", "-"], Some(&f))?;
    std::fs::write(quota, "5\n").map_err(io)?;
    let webhook_gets = hub_gets(log, mark, "pullcheck/");
    let mark = lines(log);
    let series = follow(node, &target, "jobs", start, 120.0, 0.5);
    let node_gets = hub_gets(log, mark, "pullcheck/");
    let job = node.kubectl_json(&["-n", ns, "get", "job", "handed-over"])?;
    let bodies = job["spec"]["template"]["metadata"]["annotations"]["pullcheck.io/index-bodies"]
        .as_str()
        .and_then(|s| serde_json::from_str::<Value>(s).ok());
    let ann: Vec<String> = bodies
        .as_ref()
        .and_then(Value::as_object)
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    let ann = serde_json::to_string(&ann).unwrap_or_default();
    let (cond, _) = job_cond(node, ns, "handed-over")?;
    let pods = node.kubectl_json(&["get", "pods", "-n", ns])?;
    let a = Followed {
        terms: pullcheck_terminations(&pods, &target),
        series,
        t0,
        pods_gone: false,
    };
    let stored = node.kubectl_ok(&["-n", ns, "get", "job", "handed-over", "-o", "yaml"], None)?;
    let msg = termination_text(&a.terms);
    let s = &a.series;
    expect(
        "11a",
        s.fin() == Finished::Failed
            && exit_codes(&a.terms) == [12]
            && node_gets == 0
            && webhook_gets >= 1,
        || {
            format!(
                "want Failed on exit 12 with 0 manifest GETs on the node; got {:?}, exits {:?}, GETs webhook {webhook_gets} node {node_gets}",
                s.fin(),
                exit_codes(&a.terms)
            )
        },
    )?;
    row(
        &mut ctx.out,
        "11a",
        [
            "`pullcheck webhook --fail-fast --metered-registry` (mutating); **Docker Hub stand-in**: 50 pulls left at admission, **5 on the node** (margin 10); index with linux/arm64 only, amd64 node; backoffLimit 6",
            &format!(
                "**{}** ({}); manifest GETs: webhook {webhook_gets}, node's pullcheck **{node_gets}**; annotation pullcheck.io/index-bodies holds {ann}",
                s.fin().as_str(),
                md_escape(&cond)
            ),
            &format!("**{} s**", t_str(s.t_fin())),
            &md_escape(&s.timeline()),
            &md_escape(&msg),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    ctx.out.summaries.insert("11a".into(), format!(
        "- **Docker Hub quota, body handed over** (11a): with 5 pulls left on the node (below the margin) the init container verified the platform from the webhook's index body with HEADs only ({node_gets} manifest GETs on the node) and the Job is {} at **{} s** (exit 12, platform missing).",
        s.fin().as_str(), t_str(s.t_fin())));
    let notes = format!(
        "The manifest below is the Job as stored (mutated by the webhook). Condition: `{cond}`. Termination message: `{msg}`. Manifest GETs through the stand-in: webhook {webhook_gets} (at admission, 50 pulls left), the node's pullcheck {node_gets} (5 left)."
    );
    save_detail(
        ctx,
        "11a",
        "Scenario 11a: Docker Hub quota on the node, the webhook's index body handed over",
        &a,
        &stored,
        &notes,
    );

    // 11b: the same Job injected by `pullcheck inject` (no body), in a namespace the webhook skips
    let ns2 = "ff-s11b";
    node.new_ns(ns2, None)?;
    std::fs::write(quota, "5\n").map_err(io)?;
    let plain = job_yaml(ns2, "inject-only", &image, "Never", 6, "1", "2Gi", "");
    let (ins, met) = (
        format!("--check-arg=--insecure-registry={hub}"),
        format!("--check-arg=--metered-registry={hub}"),
    );
    let f2 = run_ok(
        &node.pc,
        &[
            "inject",
            "--fail-fast",
            "--image",
            &node.pc_image,
            &ins,
            &met,
            "-f",
            "-",
        ],
        Some(&plain),
        30,
    )?
    .stdout;
    let mark = lines(log);
    let target2 = Target::job(ns2, "inject-only");
    let b = create_then_quota(node, &target2, &f2, quota, 5, 40.0)?;
    let node_gets = hub_gets(log, mark, "pullcheck/");
    let kubelet_msg = kubelet_failed_msg(node, ns2, "inject-only")?;
    let s = &b.series;
    let state = s.0.last().map(|x| x.pods.clone()).unwrap_or_default();
    expect(
        "11b",
        s.fin() == Finished::Running && exit_codes(&b.terms) == [0] && node_gets == 0,
        || {
            format!(
                "want still active after the init container passed (exit 0) with 0 GETs; got {:?}, exits {:?}, GETs {node_gets}",
                s.fin(),
                exit_codes(&b.terms)
            )
        },
    )?;
    row(
        &mut ctx.out,
        "11b",
        [
            "the same Job after `pullcheck inject --fail-fast` only (no index body); 5 pulls left on the node",
            &format!(
                "**still active after 40 s**: {}; the init container passed (platform not verified, {node_gets} manifest GETs), the kubelet: {}",
                md_escape(&state),
                md_escape(&kubelet_msg)
            ),
            "— (never)",
            &md_escape(&s.timeline()),
            "—",
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    ctx.out.summaries.insert("11b".into(), format!(
        "- **Docker Hub quota, no body** (11b): the same Job injected by `pullcheck inject` alone passes its init container (platform not verified: 5 pulls left) and is **still active after 40 s**, its pod in ImagePullBackOff holding {} (the watch would act on it: scenario 9).",
        s.alloc_str()));
    let notes = format!("The kubelet's first Failed event: `{kubelet_msg}`.");
    save_detail(
        ctx,
        "11b",
        "Scenario 11b: Docker Hub quota on the node, no index body",
        &b,
        &f2,
        &notes,
    );
    node.kubectl_ok(
        &["-n", ns2, "delete", "job", "inject-only", "--wait=false"],
        None,
    )?;
    Ok(())
}
