//! Running a credential program, bounded: a docker credential helper (`credentials/helper.rs`), a
//! kubelet credential provider plugin (`credentials/provider/`) or a kubeconfig exec plugin
//! (`apiserver/exec.rs`). One rule for all three:
//!
//! - the program runs in a process group of its own ([`Group::Own`]), so that on a timeout
//!   the whole group is killed, not just the program: a shell script's `sleep` or `curl`
//!   would otherwise outlive it. An interactive exec plugin stays in ours
//!   ([`Group::Inherit`]): a background process group can't read the terminal (SIGTTIN);
//! - stdout is read up to a cap (more is an error of the caller's choosing), stderr up to
//!   its own cap (the rest is cut);
//! - the answer is the program's: once it has exited, its pipes get [`AFTER_EXIT`] more to
//!   reach end-of-file. A child it left behind holding stdout open (a daemon that did not
//!   close its descriptors) is killed with the group, and what was read is the answer,
//!   not a timeout;
//! - ETXTBSY at spawn (another thread forked while a freshly written program was still
//!   open for writing) is retried briefly.
//!
//! Written by hand, not with a crate: tokio's `Child` gives the pieces (process groups,
//! `kill_on_drop`), and no well-kept crate bounds output and kills a group on timeout.

use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// How long a program's pipes may stay open after it exited.
pub(crate) const AFTER_EXIT: Duration = Duration::from_secs(1);

/// Which process group the program runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    /// A group of its own, killed whole on a timeout.
    Own,
    /// Ours (it may need the terminal); only the program is killed on a timeout.
    Inherit,
}

/// What a finished run gave.
#[derive(Debug)]
pub(crate) struct Ran {
    /// The program's exit status.
    pub status: ExitStatus,
    /// Its stdout, or `None` when it printed more than the cap (reading stopped there).
    pub stdout: Option<Vec<u8>>,
    /// The first bytes of its stderr, up to its cap.
    pub stderr: Vec<u8>,
    /// True when stderr went past its cap.
    pub stderr_cut: bool,
}

/// Why a run gave no [`Ran`].
#[derive(Debug)]
pub(crate) enum RunError {
    /// Not finished within the timeout; the program (and with [`Group::Own`] its group)
    /// was killed.
    Timeout,
    /// Reading its output or waiting for it failed.
    Io(io::Error),
}

/// A spawned program and the process group it was put in (which [`finish`] kills on a
/// timeout).
pub(crate) struct Running {
    child: Child,
    group: Group,
}

/// Spawn `cmd` with piped stdout (stdin and stderr as the caller set them), killed when the
/// child is dropped, in the process group `group` says. ETXTBSY is retried up to 5 times.
pub(crate) async fn spawn(cmd: &mut Command, group: Group) -> io::Result<Running> {
    cmd.stdout(std::process::Stdio::piped()).kill_on_drop(true);
    if group == Group::Own {
        cmd.process_group(0);
    }
    let mut attempts = 0;
    loop {
        match cmd.spawn() {
            Ok(child) => return Ok(Running { child, group }),
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempts < 5 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Give `child` `stdin` (then close it; a program that exits without reading it is not an
/// error), read its output within the caps and wait for it, all within `timeout`.
pub(crate) async fn finish(
    running: Running,
    stdin: Option<&[u8]>,
    stdout_cap: u64,
    stderr_cap: u64,
    timeout: Duration,
) -> Result<Ran, RunError> {
    let Running { mut child, group } = running;
    let deadline = tokio::time::Instant::now() + timeout;
    let pid = child.id();
    let kill = |child: &mut Child| {
        if let (Group::Own, Some(pid)) = (group, pid) {
            // SAFETY: killpg only sends a signal; the group is the child's own (spawn set
            // process_group(0), so its id is the child's pid).
            unsafe { libc::killpg(pid as libc::pid_t, libc::SIGKILL) };
        }
        let _ = child.start_kill();
    };
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = tokio::time::timeout_at(deadline, pipe.write_all(bytes)).await;
    }
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut status: Option<ExitStatus> = None;
    let mut read: Option<io::Result<(bool, bool)>> = None;
    {
        let reads = async {
            let (o, e) = tokio::join!(
                drain(stdout, stdout_cap, &mut out),
                drain(stderr, stderr_cap, &mut err)
            );
            Ok((o?, e?))
        };
        tokio::pin!(reads);
        let sleep = tokio::time::sleep_until(deadline);
        tokio::pin!(sleep);
        while status.is_none() || read.is_none() {
            tokio::select! {
                r = &mut reads, if read.is_none() => read = Some(r),
                s = child.wait(), if status.is_none() => {
                    status = Some(s.map_err(RunError::Io)?);
                    let grace = tokio::time::Instant::now() + AFTER_EXIT;
                    if grace < sleep.deadline() {
                        sleep.as_mut().reset(grace);
                    }
                }
                _ = &mut sleep => break,
            }
        }
    }
    let Some(status) = status else {
        kill(&mut child);
        return Err(RunError::Timeout);
    };
    let (over, cut) = match read {
        Some(r) => r.map_err(RunError::Io)?,
        // It exited, but something it left behind holds its pipes open: the rest of the
        // group goes, and what it printed is its answer.
        None => {
            kill(&mut child);
            (
                out.len() as u64 > stdout_cap,
                err.len() as u64 >= stderr_cap,
            )
        }
    };
    Ok(Ran {
        status,
        stdout: (!over).then_some(out),
        stderr: err,
        stderr_cut: cut,
    })
}

/// Read `reader` into `buf` until end-of-file or `cap` bytes; true when there was more
/// (reading stops at `cap + 1`, and dropping the reader gives the writer a broken pipe).
async fn drain<R: AsyncRead + Unpin>(
    reader: Option<R>,
    cap: u64,
    buf: &mut Vec<u8>,
) -> io::Result<bool> {
    let Some(mut reader) = reader else {
        return Ok(false);
    };
    // On the heap: a buffer in the future's state would make every future that may run a
    // credential program (the webhook's whole request) 8 KiB larger per stream, and debug
    // builds copy futures on the stack (a stack overflow in the webhook's tests).
    let mut chunk = vec![0u8; 8192];
    loop {
        let n = reader.read(&mut chunk).await?;
        if n == 0 {
            return Ok(false);
        }
        let room = (cap + 1).saturating_sub(buf.len() as u64) as usize;
        buf.extend_from_slice(&chunk[..n.min(room)]);
        if buf.len() as u64 > cap {
            buf.truncate(cap as usize);
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", script]).stderr(std::process::Stdio::piped());
        c
    }

    fn alive(pid: &str) -> bool {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let child = spawn(&mut sh(&script), Group::Own).await.unwrap();
        let t = Instant::now();
        let r = finish(child, None, 100, 100, Duration::from_millis(500)).await;
        assert!(matches!(r, Err(RunError::Timeout)), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(3));
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        // The signal is delivered at once; give the kernel a moment to reap.
        for _ in 0..50 {
            if !alive(pid.trim()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the program's child {} outlived the timeout", pid.trim());
    }

    #[tokio::test]
    async fn an_answer_is_kept_when_a_left_child_holds_stdout() {
        let child = spawn(&mut sh("echo answer; sleep 30 &"), Group::Own)
            .await
            .unwrap();
        let t = Instant::now();
        let r = finish(child, None, 100, 100, Duration::from_secs(20))
            .await
            .unwrap();
        assert!(
            t.elapsed() < AFTER_EXIT + Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        assert!(r.status.success());
        assert_eq!(r.stdout.as_deref(), Some(&b"answer\n"[..]));
    }

    #[tokio::test]
    async fn output_caps_and_stdin() {
        let mut c = sh("cat; printf 0123456789 >&2");
        c.stdin(std::process::Stdio::piped());
        let child = spawn(&mut c, Group::Own).await.unwrap();
        let r = finish(child, Some(b"12345"), 5, 4, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(
            (r.stdout.as_deref(), r.stderr.as_slice(), r.stderr_cut),
            (Some(&b"12345"[..]), &b"0123"[..], true)
        );
        let child = spawn(&mut sh("printf 123456"), Group::Own).await.unwrap();
        let r = finish(child, None, 5, 4, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!((r.stdout, r.stderr_cut), (None, false));
    }
}
