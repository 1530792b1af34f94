//! Child processes: the binary under test, and long-lived children that die with the test
//! process.
//!
//! Every run of `pullcheck` starts from [`pullcheck`] (or [`pullcheck_under`]), so each
//! one gets the same environment clean-up, whatever test spawns it.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not
//! the process. libtest runs each test on its own short-lived thread, so every
//! long-lived child is forked from one dedicated thread that never exits.

use std::io::{self, Write as _};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

/// Path of the binary under test. Under `scripts/secret-hygiene.sh` this is a wrapper
/// script that records the run's output and then `exec`s the real binary (same pid).
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pullcheck")
}

/// Variables the binary (or the HTTP and TLS stacks under it) would read from the
/// developer's or CI's environment: a Docker config or containers auth file, a CA bundle,
/// log filters, proxies, in-cluster API discovery, a kubeconfig. Tests that want one set it explicitly.
const CLEARED: &[&str] = &[
    "DOCKER_CONFIG",
    "DOCKER_AUTH_CONFIG",
    "REGISTRY_AUTH_FILE",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "SSL_CERT_FILE",
    "RUST_LOG",
    "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT",
    "KUBECONFIG",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// Variables `scripts/secret-hygiene.sh` gives its wrapper (where to write the capture
/// and which binary to `exec`): they must reach the wrapper, so they survive the
/// `PULLCHECK_*` clean-up. The real binary reads none of them.
const HYGIENE_PREFIX: &str = "PULLCHECK_HYGIENE_";

/// `pullcheck` with a clean environment: [`CLEARED`] and every inherited `PULLCHECK_*`
/// variable (the binary's flags all have one, e.g. `PULLCHECK_PULL_SECRETS`) removed, and
/// `HOME` pointing nowhere, so ~/.docker/config.json never leaks into a test. `PATH` is
/// kept: credential helpers and the hygiene wrapper need it.
pub fn pullcheck() -> Command {
    let mut cmd = Command::new(bin());
    clean_env(&mut cmd);
    cmd
}

/// [`pullcheck`], but always the real binary, never the hygiene wrapper: for tests about
/// the binary's own stdout (a full disk, a closed pipe), which the wrapper's `tee` would
/// stand between. Under `scripts/secret-hygiene.sh` the wrapper names the real binary in
/// `PULLCHECK_HYGIENE_REAL`; these runs print nothing secret.
pub fn pullcheck_unwrapped() -> Command {
    let real = std::env::var_os("PULLCHECK_HYGIENE_REAL").unwrap_or_else(|| bin().into());
    let mut cmd = Command::new(real);
    clean_env(&mut cmd);
    cmd
}

/// `program <args…> pullcheck` (e.g. `unshare -n`), with the environment of [`pullcheck`];
/// add the binary's own arguments to the returned command.
pub fn pullcheck_under(program: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args).arg(bin());
    clean_env(&mut cmd);
    cmd
}

/// The binary under another name: `link` is created as a symlink to it (e.g.
/// `…/kubectl-pullcheck`, as a kubectl plugin is installed), run with the environment of
/// [`pullcheck`].
pub fn pullcheck_as(link: &std::path::Path) -> Command {
    if !link.exists() {
        std::os::unix::fs::symlink(bin(), link).expect("symlink the binary");
    }
    let mut cmd = Command::new(link);
    clean_env(&mut cmd);
    cmd
}

fn clean_env(cmd: &mut Command) {
    for key in CLEARED {
        cmd.env_remove(key);
    }
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if name.starts_with("PULLCHECK_") && !name.starts_with(HYGIENE_PREFIX) {
            cmd.env_remove(&key);
        }
    }
    cmd.env("HOME", "/nonexistent-pullcheck-home")
        .env("NO_COLOR", "1");
}

/// Run `cmd` to the end with `stdin` as its standard input (none: an empty, closed one)
/// and both output streams captured.
pub fn output(cmd: &mut Command, stdin: Option<&[u8]>) -> Output {
    let Some(input) = stdin else {
        return cmd.output().expect("run pullcheck");
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pullcheck");
    let mut pipe = child.stdin.take().unwrap();
    // Written from another thread: a child that answers before it has read everything
    // would otherwise block on a full stdout pipe while we block on its full stdin.
    let input = input.to_vec();
    let writer = std::thread::spawn(move || pipe.write_all(&input));
    let out = child.wait_with_output().expect("wait for pullcheck");
    let _ = writer.join();
    out
}

/// One finished run of the binary.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    /// stdout parsed as JSON (panics with the output if it isn't).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// The `images[i]` object of the JSON document.
    pub fn image(&self, i: usize) -> Value {
        self.json()["images"][i].clone()
    }

    /// Assert the exit code, printing both streams on mismatch.
    #[track_caller]
    pub fn assert_code(&self, want: i32) -> &Self {
        assert_eq!(
            self.code, want,
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Run `pullcheck <args…>` with extra environment (set after the clean-up of [`pullcheck`]).
pub fn run(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = pullcheck();
    cmd.args(args).envs(env.iter().copied());
    output(&mut cmd, None).into()
}

/// `pullcheck check --output json --ca-file <test CA> <args…>`.
pub fn check(args: &[&str]) -> Run {
    check_env(args, &[])
}

/// [`check`] with these environment variables set.
pub fn check_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let ca = super::fixture().ca_file.to_string_lossy().into_owned();
    let mut all = vec!["check", "--output", "json", "--ca-file", ca.as_str()];
    all.extend_from_slice(args);
    run(&all, env)
}

type Job = (Command, mpsc::Sender<io::Result<Child>>);

static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();

/// Spawn `cmd` from the harness's spawner thread with `PR_SET_PDEATHSIG=SIGKILL`.
pub fn spawn_tied(cmd: Command) -> io::Result<Child> {
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("harness-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(spawn_here(&mut cmd));
                }
                // Never reached while the static sender exists; park so that
                // the death signal is only delivered when the process exits.
                loop {
                    std::thread::park();
                }
            })
            .expect("start harness spawner thread");
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    sender
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, reply_tx))
        .expect("harness spawner thread is gone");
    reply_rx
        .recv()
        .expect("harness spawner thread did not answer")
}

fn spawn_here(cmd: &mut Command) -> io::Result<Child> {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure only calls async-signal-safe functions
    // (prctl, getppid, _exit) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Send a signal to a process id (ignoring "no such process").
pub fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Whether a pid exists (any state, including zombie).
pub fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether every thread of `pid` is in the stopped state (`T`).
pub fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut any = false;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // "tid (comm) S ..." — comm may contain spaces, so split after the last ')'.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next());
        match state {
            Some("T") => any = true,
            Some(_) => return false,
            None => {}
        }
    }
    any
}
