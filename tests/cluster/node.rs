//! The node the scenarios run on (scripts/cluster.sh brings it up): its addresses from
//! `scripts/cluster.sh env`, and bounded runs of kubectl, pullcheck and helpers.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// What stops a run.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A command could not start.
    #[error("cannot run {cmd}: {source}")]
    Spawn {
        /// The program.
        cmd: String,
        /// Why.
        source: std::io::Error,
    },
    /// A command ran past its bound and was killed.
    #[error("{cmd} did not finish within {secs} s (killed)")]
    Timeout {
        /// The command line.
        cmd: String,
        /// The bound.
        secs: u64,
    },
    /// A command failed.
    #[error("{cmd} failed (exit {code:?}): {stderr}")]
    Failed {
        /// The command line.
        cmd: String,
        /// Its exit code.
        code: Option<i32>,
        /// Its stderr, last lines.
        stderr: String,
    },
    /// Output that should be JSON is not.
    #[error("{cmd} printed no JSON: {source}")]
    Json {
        /// The command line.
        cmd: String,
        /// The parse error.
        source: serde_json::Error,
    },
    /// The cluster is not up, or a file it writes is missing.
    #[error("{0}")]
    Setup(String),
    /// A scenario's outcome is not the one the table expects.
    #[error("scenario {id}: {what}")]
    Outcome {
        /// The scenario.
        id: String,
        /// What was seen instead.
        what: String,
    },
}

/// What one command gave.
#[derive(Debug)]
pub struct Out {
    /// Exit code (None when killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Out {
    /// Exit code 0.
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
}

/// Run `prog args` with `stdin`, killed after `secs` seconds.
pub fn run(prog: &Path, args: &[&str], stdin: Option<&str>, secs: u64) -> Result<Out, NodeError> {
    let cmd = format!("{} {}", prog.display(), args.join(" "));
    let mut child = Command::new(prog)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| NodeError::Spawn {
            cmd: cmd.clone(),
            source,
        })?;
    if let (Some(text), Some(mut w)) = (stdin, child.stdin.take()) {
        // a child that exits early closes the pipe: its exit status tells what happened
        let _ = w.write_all(text.as_bytes());
    }
    let mut out_pipe = child.stdout.take().expect("piped stdout");
    let mut err_pipe = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out_pipe.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err_pipe.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(NodeError::Timeout { cmd, secs });
            }
        }
    };
    Ok(Out {
        code: status.code(),
        stdout: String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned(),
        stderr: String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned(),
    })
}

/// [`run`], failing unless it exits 0.
pub fn run_ok(
    prog: &Path,
    args: &[&str],
    stdin: Option<&str>,
    secs: u64,
) -> Result<Out, NodeError> {
    let out = run(prog, args, stdin, secs)?;
    if !out.ok() {
        let tail: Vec<&str> = out.stderr.lines().rev().take(5).collect();
        return Err(NodeError::Failed {
            cmd: format!("{} {}", prog.display(), args.join(" ")),
            code: out.code,
            stderr: tail.into_iter().rev().collect::<Vec<_>>().join(" / "),
        });
    }
    Ok(out)
}

/// The cluster's addresses and the binaries the scenarios run.
#[derive(Debug, Clone)]
pub struct Node {
    /// The repository root.
    pub root: PathBuf,
    /// `export` lines of `scripts/cluster.sh env`, as a map.
    pub env: BTreeMap<String, String>,
    /// kubectl (on the cluster's PATH).
    pub kubectl: PathBuf,
    /// The static pullcheck binary (scripts/build-static.sh's output).
    pub pc: PathBuf,
    /// The pushed pullcheck image, pinned by digest.
    pub pc_image: String,
    /// The scratch directory of this run.
    pub work: PathBuf,
}

/// Lines `export K='V'` (or `K=V`) → map; `PATH` keeps its first element only.
pub fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("export ").or(Some(l.trim())))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            // PATH='DIR':"$PATH": the cluster's bin dir is the first element
            let v = if k == "PATH" {
                v.split(':').next().unwrap_or(v)
            } else {
                v
            };
            (
                k.to_string(),
                v.trim_matches(|c| c == '\'' || c == '"').to_string(),
            )
        })
        .collect()
}

impl Node {
    /// The running cluster (`scripts/cluster.sh env`), or a line naming how to start it.
    pub fn connect(root: &Path, work: &Path) -> Result<Node, NodeError> {
        let out = run(&root.join("scripts/cluster.sh"), &["env"], None, 30)?;
        if !out.ok() {
            return Err(NodeError::Setup(
                "the cluster is not up: run `scripts/cluster.sh up` as root first".into(),
            ));
        }
        let mut env = parse_env(&out.stdout);
        let dir = env.get("PULLCHECK_CLUSTER_DIR").cloned().ok_or_else(|| {
            NodeError::Setup("scripts/cluster.sh env: no PULLCHECK_CLUSTER_DIR".into())
        })?;
        let cp = std::fs::read_to_string(Path::new(&dir).join("cp/env"))
            .map_err(|e| NodeError::Setup(format!("{dir}/cp/env: {e}")))?;
        env.extend(parse_env(&cp));
        let image_txt = Path::new(&dir).join("images/pullcheck-image.txt");
        let pc_image = std::fs::read_to_string(&image_txt)
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("pushed:").map(|s| s.trim().to_string()))
            })
            .ok_or_else(|| {
                NodeError::Setup(format!(
                    "no pullcheck image pushed ({})",
                    image_txt.display()
                ))
            })?;
        let tdir = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
        let pc = root
            .join(tdir)
            .join("x86_64-unknown-linux-musl/release/pullcheck");
        if !pc.is_file() {
            return Err(NodeError::Setup(format!(
                "{} is missing: run scripts/build-static.sh",
                pc.display()
            )));
        }
        let kubectl = PathBuf::from(env.get("PATH").cloned().unwrap_or_default()).join("kubectl");
        std::fs::create_dir_all(work)
            .map_err(|e| NodeError::Setup(format!("{}: {e}", work.display())))?;
        Ok(Node {
            root: root.to_path_buf(),
            env,
            kubectl,
            pc,
            pc_image,
            work: work.to_path_buf(),
        })
    }

    /// An environment value (`PULLCHECK_NODE`, …); empty when unset.
    pub fn var(&self, k: &str) -> &str {
        self.env.get(k).map(String::as_str).unwrap_or("")
    }

    /// The workload registry (stopped by some scenarios).
    pub fn wreg(&self) -> &str {
        self.var("PULLCHECK_WORK_REGISTRY")
    }

    /// The tag that does not exist.
    pub fn missing(&self) -> String {
        format!("{}/work/app:does-not-exist", self.wreg())
    }

    /// The tag that exists.
    pub fn present(&self) -> String {
        format!("{}/work/app:v1", self.wreg())
    }

    /// `kubectl --request-timeout=10s ARGS` with the cluster's kubeconfig.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<Out, NodeError> {
        let kc = format!("--kubeconfig={}", self.var("KUBECONFIG"));
        let mut all = vec![kc.as_str(), "--request-timeout=10s"];
        all.extend(args);
        run(&self.kubectl, &all, stdin, 60)
    }

    /// [`Node::kubectl`], failing unless it exits 0.
    pub fn kubectl_ok(&self, args: &[&str], stdin: Option<&str>) -> Result<String, NodeError> {
        let out = self.kubectl(args, stdin)?;
        if !out.ok() {
            return Err(NodeError::Failed {
                cmd: format!("kubectl {}", args.join(" ")),
                code: out.code,
                stderr: out.stderr.trim().to_string(),
            });
        }
        Ok(out.stdout)
    }

    /// `kubectl ARGS -o json`, parsed.
    pub fn kubectl_json(&self, args: &[&str]) -> Result<Value, NodeError> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.kubectl_ok(&all, None)?;
        serde_json::from_str(&text).map_err(|source| NodeError::Json {
            cmd: format!("kubectl {}", args.join(" ")),
            source,
        })
    }

    /// A fresh namespace (deleted first), with `label` (`K=V`) when given, once its
    /// ServiceAccount `default` exists.
    pub fn new_ns(&self, ns: &str, label: Option<&str>) -> Result<(), NodeError> {
        self.kubectl_ok(
            &[
                "delete",
                "namespace",
                ns,
                "--ignore-not-found",
                "--wait=true",
                "--timeout=120s",
            ],
            None,
        )?;
        self.kubectl_ok(&["create", "namespace", ns], None)?;
        if let Some(l) = label {
            self.kubectl_ok(&["label", "namespace", ns, l], None)?;
        }
        for _ in 0..60 {
            if self
                .kubectl(&["-n", ns, "get", "serviceaccount", "default"], None)?
                .ok()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Err(NodeError::Setup(format!(
            "no ServiceAccount default in {ns}"
        )))
    }

    /// `pullcheck inject --image IMAGE --check-arg=--insecure-registry=WREG EXTRA -f -` of
    /// `manifest`.
    pub fn inject(&self, manifest: &str, extra: &[&str]) -> Result<Out, NodeError> {
        let insecure = format!("--check-arg=--insecure-registry={}", self.wreg());
        let mut args = vec![
            "inject",
            "--image",
            self.pc_image.as_str(),
            insecure.as_str(),
        ];
        args.extend(extra);
        args.extend(["-f", "-"]);
        run_ok(&self.pc, &args, Some(manifest), 30)
    }
}
