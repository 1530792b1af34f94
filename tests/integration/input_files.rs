//! Every file a flag names is read as a regular file or refused with a clear error: a named
//! pipe (FIFO) used to block `open` until killed, past `--timeout` (issue 21: 20 s and more
//! for `--pull-secrets`, `--docker-config`, `--image-credential-provider-config`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::support::process::{Run, pullcheck};

/// How long a refusal may take: far below the 20 s hangs measured before the fix.
const BOUND: Duration = Duration::from_secs(8);

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Runs `pullcheck args…`, killing it after [`BOUND`]; `None` when it had to be killed.
fn run_bounded(args: &[&str]) -> Option<Run> {
    let mut cmd = pullcheck();
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run pullcheck");
    let started = Instant::now();
    while started.elapsed() < BOUND {
        if child.try_wait().expect("wait").is_some() {
            return Some(child.wait_with_output().expect("output").into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

struct Fifo {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    path: PathBuf,
}

/// A temporary directory with a FIFO named `name` in it.
fn fifo(name: &str) -> Fifo {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    mkfifo(&path);
    Fifo {
        dir: dir.path().to_path_buf(),
        _dir: dir,
        path,
    }
}

#[track_caller]
fn refused(args: &[&str], want_code: i32, want_stderr_line: &str) {
    let run = run_bounded(args).unwrap_or_else(|| {
        panic!("pullcheck {args:?} still running after {BOUND:?} (hung on a FIFO)")
    });
    run.assert_code(want_code);
    assert!(
        run.stderr.lines().any(|l| l == want_stderr_line),
        "stderr has no line\n  {want_stderr_line}\ngot:\n{}",
        run.stderr
    );
}

const IMAGE: &str = "127.0.0.1:9/team/app:v1";

#[test]
fn a_fifo_as_pull_secret_is_refused_not_waited_on() {
    let f = fifo(".dockerconfigjson");
    let p = f.path.to_str().unwrap();
    refused(
        &["check", "--timeout", "3", "--pull-secrets", p, IMAGE],
        2,
        &format!(
            "pullcheck: pull secret {p}: cannot read {p}: a named pipe (FIFO), not a regular file; check the path and its permissions"
        ),
    );
}

#[test]
fn a_fifo_as_docker_config_is_refused_not_waited_on() {
    let f = fifo("config.json");
    let p = f.path.to_str().unwrap();
    refused(
        &[
            "check",
            "--timeout",
            "3",
            "--docker-config",
            f.dir.to_str().unwrap(),
            IMAGE,
        ],
        2,
        &format!(
            "pullcheck: docker config {p}: cannot read {p}: a named pipe (FIFO), not a regular file; check the path and its permissions"
        ),
    );
}

#[test]
fn a_fifo_as_credential_provider_config_is_refused_not_waited_on() {
    let f = fifo("config.yaml");
    let p = f.path.to_str().unwrap();
    refused(
        &[
            "check",
            "--timeout",
            "3",
            "--image-credential-provider-config",
            p,
            "--image-credential-provider-bin-dir",
            f.dir.to_str().unwrap(),
            IMAGE,
        ],
        2,
        &format!(
            "pullcheck: credential provider config {p}: cannot read: a named pipe (FIFO), not a regular file"
        ),
    );
}

#[test]
fn a_fifo_as_ca_file_is_refused_not_waited_on() {
    let f = fifo("ca.pem");
    let p = f.path.to_str().unwrap();
    refused(
        &["check", "--timeout", "3", "--ca-file", p, IMAGE],
        2,
        &format!(
            "pullcheck: CA file {p}: a named pipe (FIFO), not a regular file; pass a PEM file with one or more CERTIFICATE blocks"
        ),
    );
}

#[test]
fn a_fifo_as_hosts_toml_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let host = dir.path().join("127.0.0.1:9");
    std::fs::create_dir(&host).unwrap();
    mkfifo(&host.join("hosts.toml"));
    refused(
        &[
            "check",
            "--timeout",
            "3",
            "--hosts-dir",
            dir.path().to_str().unwrap(),
            IMAGE,
        ],
        2,
        &format!(
            "pullcheck: {}: a named pipe (FIFO), not a regular file; make the --hosts-dir tree readable or point --hosts-dir elsewhere",
            host.join("hosts.toml").display()
        ),
    );
}

#[test]
fn a_fifo_as_kinds_table_is_refused_not_waited_on() {
    let f = fifo("kinds.yaml");
    let p = f.path.to_str().unwrap();
    let manifest = f.dir.join("job.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      containers: [{name: c, image: busybox}]\n",
    )
    .unwrap();
    refused(
        &["lint", "--kinds", p, "-f", manifest.to_str().unwrap()],
        2,
        &format!("pullcheck: {p}: a named pipe (FIFO), not a regular file"),
    );
}

#[test]
fn a_fifo_as_apiserver_token_file_is_refused_not_waited_on() {
    let f = fifo("token");
    let p = f.path.to_str().unwrap();
    refused(
        &[
            "watch",
            "--once",
            "--apiserver",
            "https://127.0.0.1:9",
            "--apiserver-token-file",
            p,
        ],
        2,
        &format!("pullcheck: --apiserver-token-file {p}: a named pipe (FIFO), not a regular file"),
    );
}

/// `watch --once` against an API server that answers "later" (429 from API Priority and
/// Fairness, 503 from a restarting apiserver) exits transient (20), not usage (2): a script
/// retries it. A 403 stays the caller's to fix (2). The API here is the scripted server:
/// a real kube-apiserver sheds load with 429 only under a flow-control configuration the
/// harness can't afford to provoke.
#[test]
fn watch_once_exits_transient_on_an_api_server_that_says_later() {
    use super::support::scripted_server::Scripted;
    for (status, want) in [(429u16, 20), (503, 20), (403, 2)] {
        let api = Scripted::start(move |_, _| {
            (
                status,
                vec![("Retry-After".into(), "1".into())],
                format!(
                    r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"scripted {status}","code":{status}}}"#
                ),
            )
        });
        let url = format!("http://{}", api.host);
        let run =
            run_bounded(&["watch", "--once", "--apiserver", &url]).expect("watch --once finished");
        run.assert_code(want);
        let first = run.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!(
                "pullcheck: LIST /api/v1/pods: HTTP {status}: scripted {status}"
            )),
            "{status}: {}",
            run.stderr
        );
    }
}
