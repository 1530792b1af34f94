//! The fail-fast scenario harness on a real single-node cluster, in Rust (issue 21): a
//! table of scenarios (`scenarios::TABLE`), a sampler of the node (`sample`, `series`) and
//! the writer of docs/fail-fast-results.md and docs/fail-fast-data/timeline.csv (`doc`).
//!
//! It replaced the shell harness: every scenario of the table has a runner.
//!
//! Opt-in, by hand, as root, with the node up (`scripts/cluster.sh up`; scenario 9d needs
//! it started with `PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1`) and the static binary built
//! (`scripts/build-static.sh`); scripts/cluster-scenarios.sh does both and runs:
//!
//! ```sh
//! FF_SCENARIOS="1 2 9a" cargo test --test cluster -- --ignored --nocapture real_node
//! ```
//!
//! A run rewrites the parts of the scenarios it ran and keeps every other scenario's parts
//! from the committed document and chart data (what the shell harness's `FF_MERGE` did),
//! and says so in the doc's "Generated" line. CI compiles this target and runs its pure
//! tests (the sampler, the renderings, the table); `real_node` is `#[ignore]`d.
//! Env: FF_SCENARIOS (ids, or a number alone for all its letters: `9`; default: all), FF_WORK (scratch, default /tmp/pullcheck-ff-rs),
//! FF_OUT, FF_DATA, FF_CHART (defaults: the committed paths); the windows FF_BASELINE_WINDOW
//! (1, 8a; 120 s), FF_ONFAILURE_WINDOW (6b, 9c, 9i, 10c; 1080 s), FF_PTJ_WINDOW (10d; the
//! FF_ONFAILURE_WINDOW), FF_OUTAGE (9f, 10a; 30 s), FF_NOT_ACTING_WINDOW (9h, 9h-pytorch; 30 s).

mod admission;
mod baseline;
mod doc;
mod dockerhub;
mod jobs;
mod kubeflow;
mod node;
mod restart;
mod run;
mod sample;
mod scenarios;
mod series;
mod watch;
mod watch_more;
mod watch_retry;

use std::path::{Path, PathBuf};
use std::time::Instant;

use node::{Node, NodeError, run};
use scenarios::{Ctx, Needs, TABLE};

/// Whether the FF_SCENARIOS word `word` names `id`: the id itself, or its number alone
/// (`9` names 9a … 9h-pytorch, `10` names 10a … 10d).
fn names(word: &str, id: &str) -> bool {
    word == id
        || (word.bytes().all(|b| b.is_ascii_digit())
            && id.starts_with(word)
            && id[word.len()..].starts_with(|c: char| c.is_ascii_lowercase()))
}

/// The scenarios FF_SCENARIOS names, in table order; an unknown id is an error naming the
/// known ones.
fn selected(list: &str) -> Result<Vec<&'static scenarios::Scenario>, NodeError> {
    let ids: Vec<&str> = list.split_whitespace().collect();
    for id in &ids {
        if !TABLE.iter().any(|s| names(id, s.id)) {
            let known: Vec<&str> = TABLE.iter().map(|s| s.id).collect();
            return Err(NodeError::Setup(format!(
                "FF_SCENARIOS: unknown scenario {id:?} (known: {})",
                known.join(" ")
            )));
        }
    }
    Ok(TABLE
        .iter()
        .filter(|s| ids.iter().any(|w| names(w, s.id)))
        .collect())
}

/// Every scenario of the table, space-separated (FF_SCENARIOS's default).
fn all_ids() -> String {
    TABLE.iter().map(|s| s.id).collect::<Vec<_>>().join(" ")
}

/// First line of `prog args` (empty when it can't run).
fn first_line(prog: &Path, args: &[&str]) -> String {
    run(prog, args, None, 20)
        .map(|o| {
            format!("{}{}", o.stdout, o.stderr)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default()
}

/// The `n`th whitespace field of `s` (0-based), or empty.
fn field(s: &str, n: usize) -> String {
    s.split_whitespace().nth(n).unwrap_or("").to_string()
}

/// The Setup section's bullets for this run (versions, host, addresses).
fn setup(node: &Node) -> Result<String, NodeError> {
    let bin = PathBuf::from(node.var("PATH"));
    let ver = node.kubectl_json(&["version"])?;
    let git = |v: &serde_json::Value| v["gitVersion"].as_str().unwrap_or("").to_string();
    let kubelet = field(&first_line(&bin.join("kubelet"), &["--version"]), 1);
    let etcd_out = run(&bin.join("etcd"), &["--version"], None, 20)
        .map(|o| o.stdout)
        .unwrap_or_default();
    let etcd = etcd_out
        .lines()
        .find(|l| l.starts_with("etcd Version"))
        .map(|l| field(l, 2))
        .unwrap_or_default();
    let containerd = field(&first_line(&bin.join("containerd"), &["--version"]), 2);
    let runc = field(&first_line(Path::new("/usr/sbin/runc"), &["--version"]), 2);
    let dpkg = |p: &str| {
        first_line(
            Path::new("/usr/bin/dpkg-query"),
            &["-W", "-f", "${Version}", p],
        )
    };
    let pc = first_line(&node.pc, &["--version"]);
    let uname = first_line(Path::new("/bin/uname"), &["-sr"]);
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map(|kb| format!("{:.0} GiB", kb / 1_048_576.0))
        .unwrap_or_default();
    let cgroup = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "v2"
    } else {
        "v1"
    };
    let name = node.var("PULLCHECK_NODE");
    let n = node.kubectl_json(&["get", "node", name])?;
    let alloc = format!(
        "{} CPU, {}",
        n["status"]["allocatable"]["cpu"].as_str().unwrap_or(""),
        n["status"]["allocatable"]["memory"].as_str().unwrap_or("")
    );
    let (ireg, wreg, img) = (
        node.var("PULLCHECK_INFRA_REGISTRY"),
        node.wreg(),
        &node.pc_image,
    );
    Ok(format!(
        "- Single node `{name}` on loopback, built by `scripts/cluster.sh up`: etcd, kube-apiserver
  (`scripts/control-plane.sh`), kube-controller-manager, kube-scheduler, kubelet, containerd + runc,
  CNI bridge/host-local/loopback; no kube-proxy, no DNS.
- Versions: Kubernetes {} (kubelet {kubelet},
  kubectl {}), etcd {etcd},
  containerd {containerd}, runc {runc} (Debian),
  CNI plugins {} (Debian), docker-registry {} (Debian),
  {pc}, image `{img}`.
- Host: {uname}, {cpus} CPUs, {mem_gib}; cgroup {cgroup} with the
  cgroupfs driver (no systemd), kubelet `failCgroupV1: false`; node allocatable {alloc}.
- Registries: Debian `docker-registry`, plain HTTP: infrastructure `{ireg}` (pause, pullcheck; never
  stopped) and workload `{wreg}` (`work/app:v1` = busybox-static running `echo ok`; stopped in scenario 4).
- Every Job: `hostNetwork: true`, `automountServiceAccountToken: false`, requests = limits.
  The missing tag is `{}`.
- Injection: `pullcheck inject [--fail-fast] --image {img} --check-arg=--insecure-registry={wreg} -f job.yaml`.
- Measurement: `kubectl get pods,jobs -A -o json` every ~0.5 s (2 s for 6b); times are from just
  before `kubectl create`, so they include kubectl's own round trip (~0.1–0.3 s here). \"Requests\"
  are the effective requests (max of the app containers' sum and the largest init container) of
  the scenario's non-terminal pods bound to the node — the numbers the scheduler and
  `kubectl describe node` count. Scenario 6b runs beside the others with small requests, so the
  node-wide figure in parentheses includes it.",
        git(&ver["serverVersion"]),
        git(&ver["clientVersion"]),
        dpkg("containernetworking-plugins"),
        dpkg("docker-registry"),
        node.missing(),
    ))
}

/// Today's date, UTC (`date -u +%Y-%m-%d`).
fn today() -> String {
    first_line(Path::new("/bin/date"), &["-u", "+%Y-%m-%d"])
}

fn real_node_run() -> Result<(), NodeError> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let list = var("FF_SCENARIOS", &all_ids());
    let chosen = selected(&list)?;
    let out_path = PathBuf::from(var(
        "FF_OUT",
        &root.join("docs/fail-fast-results.md").display().to_string(),
    ));
    let data_path = PathBuf::from(var(
        "FF_DATA",
        &root
            .join("docs/fail-fast-data/timeline.csv")
            .display()
            .to_string(),
    ));
    let chart_path = PathBuf::from(var(
        "FF_CHART",
        &root
            .join("docs/fail-fast-timeline.svg")
            .display()
            .to_string(),
    ));
    let work = PathBuf::from(var("FF_WORK", "/tmp/pullcheck-ff-rs"));
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|e| NodeError::Setup(format!("{}: {e}", p.display())))
    };
    let committed = doc::Results::parse(&read(&out_path)?, &read(&data_path)?)
        .map_err(|e| NodeError::Setup(e.to_string()))?;
    let node = Node::connect(&root, &work)?;
    let mut ctx = Ctx::new(node);
    let started = Instant::now();
    if chosen.iter().any(|s| s.needs == Needs::Watch) {
        watch::watch_start(&mut ctx)?;
    }
    // A scenario that fails does not stop the others (the background ones run for
    // minutes): its parts stay the committed ones, and the test fails at the end naming it.
    let mut failed: Vec<(&str, NodeError)> = Vec::new();
    for s in &chosen {
        eprintln!("[fail-fast] scenario {}", s.id);
        if let Err(e) = (s.runner)(&mut ctx) {
            eprintln!("[fail-fast] scenario {} FAILED: {e}", s.id);
            failed.push((s.id, e));
        }
    }
    failed.extend(ctx.join_background());
    ctx.kubeflow = None;
    ctx.watch = None;
    let chosen: Vec<&scenarios::Scenario> = chosen
        .into_iter()
        .filter(|s| !failed.iter().any(|(id, _)| id == &s.id))
        .collect();
    let total = started.elapsed().as_secs_f64();
    let ids: Vec<&str> = chosen.iter().map(|s| s.id).collect();
    let parts: Vec<&str> = chosen
        .iter()
        .flat_map(|s| s.parts.iter().copied())
        .collect();
    let rows: Vec<&str> = chosen.iter().flat_map(|s| s.rows.iter().copied()).collect();
    let mut merged = committed.clone();
    merged.merge(&ctx.out, &parts, &rows);
    // the committed line without its own closing words, quoted inside this run's
    let earlier = committed
        .generated
        .trim_start_matches("Generated by ")
        .trim_end_matches("; do not edit by hand.")
        .replace("; the setup below is this run's", "");
    let date = today();
    merged.generated = if chosen.len() == TABLE.len() {
        format!(
            "Generated by the Rust harness `tests/cluster/` (`cargo test --test cluster -- --ignored real_node`, every scenario) on {date} (total run {total:.1} s); do not edit by hand."
        )
    } else {
        format!(
            "Generated by the Rust harness `tests/cluster/` (`FF_SCENARIOS=\"{}\" cargo test --test cluster -- --ignored real_node`) on {date} (total run {total:.1} s, scenarios {} only; every other row, summary line, detail and timeline is kept from the committed document, which was generated by {earlier}; the setup below is this run's); do not edit by hand.",
            ids.join(" "),
            ids.join(" "),
        )
    };
    merged.setup = setup(&ctx.node)?;
    merged.csv_source = if chosen.len() == TABLE.len() {
        format!("recorded by tests/cluster/ on {date} (the run behind docs/fail-fast-results.md).")
    } else {
        format!(
            "recorded by tests/cluster/ on {date} (scenarios {}; the others kept from the committed file) (the runs behind docs/fail-fast-results.md).",
            ids.join(" ")
        )
    };
    let write = |p: &Path, text: &str| {
        std::fs::write(p, text).map_err(|e| NodeError::Setup(format!("{}: {e}", p.display())))
    };
    write(&out_path, &merged.render_doc())?;
    write(&data_path, &merged.render_csv())?;
    let data = data_path.display().to_string();
    let chart = chart_path.display().to_string();
    node::run_ok(
        Path::new("/usr/bin/python3"),
        &[
            &root.join("scripts/chart.py").display().to_string(),
            "--data",
            &data,
            "--out",
            &chart,
        ],
        None,
        60,
    )?;
    eprintln!(
        "[fail-fast] wrote {} and {} ({total:.1} s; scenarios {})",
        out_path.display(),
        data,
        ids.join(" ")
    );
    if failed.is_empty() {
        Ok(())
    } else {
        let all: Vec<String> = failed.iter().map(|(_, e)| e.to_string()).collect();
        Err(NodeError::Setup(format!(
            "{} scenario(s) failed (their parts were kept from the committed files): {}",
            failed.len(),
            all.join("; ")
        )))
    }
}

#[test]
#[ignore = "needs root and the single-node cluster: run scripts/cluster-scenarios.sh"]
fn real_node() {
    if let Err(e) = real_node_run() {
        panic!("{e}");
    }
}

#[test]
fn scenario_selection() {
    let ids: Vec<&str> = selected("9b 2 6b").unwrap().iter().map(|s| s.id).collect();
    assert_eq!(ids, ["6b", "2", "9b"]);
    assert_eq!(selected(&all_ids()).unwrap().len(), TABLE.len());
    let tens: Vec<&str> = selected("10").unwrap().iter().map(|s| s.id).collect();
    assert_eq!(tens, ["10a", "10c", "10d", "10b"]);
    let ones: Vec<&str> = selected("1").unwrap().iter().map(|s| s.id).collect();
    assert_eq!(ones, ["1"]);
    let sixes: Vec<&str> = selected("6").unwrap().iter().map(|s| s.id).collect();
    assert_eq!(sixes, ["6b", "6a"]);
    assert!(
        selected("12")
            .err()
            .unwrap()
            .to_string()
            .starts_with("FF_SCENARIOS: unknown scenario \"12\"")
    );
}

#[test]
fn cluster_env_lines() {
    let env = node::parse_env(
        "export KUBECONFIG='/tmp/c/cp/kubeconfig'\nexport PATH='/root/bin':\"$PATH\"\nPULLCHECK_CP_SERVER=https://127.0.0.1:4443\n",
    );
    assert_eq!(env["KUBECONFIG"], "/tmp/c/cp/kubeconfig");
    assert_eq!(env["PATH"], "/root/bin");
    assert_eq!(env["PULLCHECK_CP_SERVER"], "https://127.0.0.1:4443");
}
