//! A running `pullcheck webhook`: started through [`super::process::pullcheck`], tied to the
//! test process, its stderr kept, its address taken from the line it prints once it listens.

use std::io::{BufRead, BufReader};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::process;

/// What the binary prints on stderr once the listener is bound (then the address).
const LISTENING: &str = "pullcheck webhook: listening on ";
/// How long a stopping webhook may drain before it is killed.
const STOP_AFTER: Duration = Duration::from_secs(20);

pub struct Webhook {
    /// `https://ADDR`, as the webhook printed it.
    pub base: String,
    /// None once handed to [`stop`] (by `terminate` or on drop).
    child: Option<Child>,
    stderr: Arc<Mutex<String>>,
}

/// Run `pullcheck <args…>` (`args` start with `webhook`) with `RUST_LOG=<rust_log>` and
/// wait until it listens.
pub fn start<S: AsRef<std::ffi::OsStr>>(args: &[S], rust_log: &str) -> Webhook {
    start_with_env(args, rust_log, &[])
}

/// [`start`] with extra environment (e.g. `HTTPS_PROXY`).
pub fn start_with_env<S: AsRef<std::ffi::OsStr>>(
    args: &[S],
    rust_log: &str,
    env: &[(&str, &str)],
) -> Webhook {
    let mut args: Vec<std::ffi::OsString> =
        args.iter().map(|a| a.as_ref().to_os_string()).collect();
    let named = args.iter().any(|a| {
        let a = a.to_string_lossy();
        a == "--inject-image" || a.starts_with("--inject-image=")
    });
    if !named {
        args.push("--inject-image".into());
        args.push(PLACEHOLDER_IMAGE.into());
    }
    start_listening(&args, rust_log, env, LISTENING)
}

/// The `--inject-image` a test webhook gets when its test names none: the project's
/// placeholder name (the binary has no default, since nobody publishes it). Tests that
/// only call /validate, or that assert the placeholder's startup warning, use it.
pub const PLACEHOLDER_IMAGE: &str =
    concat!("ghcr.io/pullcheck/pullcheck:", env!("CARGO_PKG_VERSION"));

/// Run `pullcheck watch <args…>` and wait until it serves; `base` is `http://ADDR`.
pub fn start_watch<S: AsRef<std::ffi::OsStr>>(args: &[S], rust_log: &str) -> Webhook {
    start_listening(args, rust_log, &[], WATCH_LISTENING)
}

/// What `pullcheck watch` prints once bound (then `http://ADDR`, maybe ` (dry run)`).
const WATCH_LISTENING: &str = "pullcheck watch: listening on ";

/// Run `pullcheck audit --serve <args…>` and wait until it serves; `base` is `http://ADDR`.
pub fn start_audit<S: AsRef<std::ffi::OsStr>>(args: &[S], rust_log: &str) -> Webhook {
    start_listening(args, rust_log, &[], AUDIT_LISTENING)
}

/// What `pullcheck audit --serve` prints once bound (then `http://ADDR`).
const AUDIT_LISTENING: &str = "pullcheck audit: listening on ";

fn start_listening<S: AsRef<std::ffi::OsStr>>(
    args: &[S],
    rust_log: &str,
    env: &[(&str, &str)],
    listening: &'static str,
) -> Webhook {
    let mut cmd = process::pullcheck();
    cmd.args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", rust_log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = process::spawn_tied(cmd).expect("start pullcheck webhook");
    let stderr = Arc::new(Mutex::new(String::new()));
    let (tx, rx) = mpsc::channel();
    {
        let pipe = child.stderr.take().unwrap();
        let log = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix(listening) {
                    let addr = addr.split_whitespace().next().unwrap_or_default();
                    let _ = tx.send(addr.to_string());
                }
                let mut l = log.lock().unwrap_or_else(|e| e.into_inner());
                l.push_str(&line);
                l.push('\n');
            }
        });
    }
    let received = rx.recv_timeout(Duration::from_secs(30));
    let mut webhook = Webhook {
        base: String::new(),
        child: Some(child),
        stderr,
    };
    match received {
        Ok(base) => {
            webhook.base = base;
            webhook
        }
        Err(_) => {
            let args: Vec<_> = args.iter().map(|a| a.as_ref().to_owned()).collect();
            panic!(
                "webhook did not start (args {args:?}); stderr:\n{}",
                webhook.log()
            )
        }
    }
}

impl Webhook {
    /// Everything it printed on stderr so far.
    pub fn log(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Its stderr once it holds `needle`, or as it is after 10 s: what it logs while
    /// answering a request may reach the reader thread after the answer reaches the test.
    pub fn log_containing(&self, needle: &str) -> String {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let log = self.log();
            if log.contains(needle) || std::time::Instant::now() > until {
                return log;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// SIGTERM, then wait for the exit status.
    pub fn terminate(mut self) -> ExitStatus {
        let child = self.child.take().expect("a running webhook");
        stop(child).expect("webhook did not exit after SIGTERM")
    }
}

/// SIGTERM rather than SIGKILL, so a run under `scripts/secret-hygiene.sh` also captures
/// what the webhook prints while it shuts down; waited for on a thread of its own, since
/// the shutdown takes seconds (`--shutdown-grace`) and the test is over. A webhook still
/// stopping when the test process exits dies with it (`process::spawn_tied`).
impl Drop for Webhook {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            std::thread::spawn(move || stop(child));
        }
    }
}

/// SIGTERM and wait up to [`STOP_AFTER`] for the exit status; past that, SIGKILL and None.
fn stop(mut child: Child) -> Option<ExitStatus> {
    process::signal(child.id(), libc::SIGTERM);
    let deadline = Instant::now() + STOP_AFTER;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}
