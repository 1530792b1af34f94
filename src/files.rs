//! Bounded reads of the files pullcheck is handed: pull secrets, docker configs, credential
//! provider configs, hosts.toml, CA bundles, token files, TLS keys, `--kinds` tables and
//! handed-over index bodies.
//!
//! One rule for all of them, so that no input can stall a check past its deadline: only a
//! regular file is read (after following symlinks, which is how Secret and downward-API
//! volumes present their files), and at most `max` bytes of it. A named pipe would block
//! `open` until a writer appears and a character device can be endless, so both are refused
//! before a byte is read. The file is opened with `O_NONBLOCK`, so even a pipe swapped in
//! between the caller's path check and the open cannot block; the open handle's own
//! metadata decides.
//!
//! Streams the user names on the command line (`scan`, `lint`, `inject -f`, `check -f`) are
//! the one exception: there a pipe is what `-f <(kubectl get … -o yaml)` gives, like stdin.
//! [`read_capped_stream`] reads a regular file or a pipe, and a pipe only while it keeps
//! sending: a named pipe nobody writes to is an error after [`STREAM_IDLE`], not a hang.

use std::io::{self, Read as _};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

/// Why a file could not be read. Displays as the reason alone (no path: callers name the
/// file and the flag it came from), never with the file's contents.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// `open` or `read` failed (including "No such file or directory").
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The path names something other than a regular file.
    #[error("{kind}, not a regular file")]
    NotRegular {
        /// What it is: "a directory", "a named pipe (FIFO)", …
        kind: &'static str,
    },
    /// The file is larger than the caller reads.
    #[error("larger than {limit} bytes")]
    TooLarge {
        /// The cap, in bytes.
        limit: u64,
    },
    /// The file is not UTF-8 text ([`read_capped_text`] only).
    #[error("not UTF-8 text")]
    NotUtf8,
    /// A pipe sent nothing for this long ([`read_capped_stream`] only).
    #[error("a pipe that sent nothing for {} s (a named pipe nobody writes to?)", .idle.as_secs())]
    Idle {
        /// The bound that was reached.
        idle: std::time::Duration,
    },
}

impl FileError {
    /// True when the file does not exist (callers for which a missing file means "none").
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io(e) if e.kind() == io::ErrorKind::NotFound)
    }
}

/// What a non-regular file type is, for the message.
fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a named pipe (FIFO)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// The bytes of the regular file at `path` (symlinks followed), at most `max` of them.
///
/// Errors: [`FileError::Io`] when it can't be opened or read, [`FileError::NotRegular`] for
/// a directory, pipe, socket or device (decided on the open handle, before reading), and
/// [`FileError::TooLarge`] when it holds more than `max` bytes (refused whole: a cut file
/// would be misread).
pub fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let file_type = file.metadata()?.file_type();
    if !file_type.is_file() {
        return Err(FileError::NotRegular {
            kind: kind_of(file_type),
        });
    }
    read_open_file(file, max)
}

/// At most `max` bytes of an open regular file; more is [`FileError::TooLarge`].
fn read_open_file(file: std::fs::File, max: u64) -> Result<Vec<u8>, FileError> {
    let mut bytes = Vec::new();
    // One byte over the cap tells "exactly at the cap" from "larger".
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(FileError::TooLarge { limit: max });
    }
    Ok(bytes)
}

/// [`read_capped`], as UTF-8 text. Errors as there, plus [`FileError::NotUtf8`].
pub fn read_capped_text(path: &Path, max: u64) -> Result<String, FileError> {
    String::from_utf8(read_capped(path, max)?).map_err(|_| FileError::NotUtf8)
}

/// How long [`read_capped_stream`] waits for a pipe's next bytes (or its first ones): long
/// enough for `kubectl get` on a big cluster to start answering, short enough that a named
/// pipe with no writer is reported rather than waited on forever.
pub const STREAM_IDLE: std::time::Duration = std::time::Duration::from_secs(30);

/// The bytes of `path`, a regular file or a pipe (`-f <(…)`, a named pipe), at most `max`.
///
/// A regular file is read as [`read_capped`] reads it. A pipe is opened without blocking
/// and read while it sends: each wait for more bytes is bounded by `idle`, so a named pipe
/// that no writer ever opens is [`FileError::Idle`] after `idle`. (Linux reports no hang-up
/// on a FIFO until a writer has come and gone, `fs/pipe.c` `pipe_poll`, so the wait does not
/// end early with an empty read.) Other kinds are [`FileError::NotRegular`].
pub fn read_capped_stream(
    path: &Path,
    max: u64,
    idle: std::time::Duration,
) -> Result<Vec<u8>, FileError> {
    use std::os::fd::AsRawFd as _;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let file_type = file.metadata()?.file_type();
    if file_type.is_file() {
        return read_open_file(file, max);
    }
    if !file_type.is_fifo() {
        return Err(FileError::NotRegular {
            kind: kind_of(file_type),
        });
    }
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    let idle_ms = libc::c_int::try_from(idle.as_millis()).unwrap_or(libc::c_int::MAX);
    loop {
        let mut poll = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for a descriptor `file` keeps open for the call.
        match unsafe { libc::poll(&mut poll, 1, idle_ms) } {
            0 => return Err(FileError::Idle { idle }),
            n if n < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e.into());
            }
            _ => {}
        }
        match file.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(n) => {
                bytes.extend_from_slice(&chunk[..n]);
                if bytes.len() as u64 > max {
                    return Err(FileError::TooLarge { limit: max });
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// [`read_capped_stream`] as UTF-8 text.
pub fn read_capped_stream_text(
    path: &Path,
    max: u64,
    idle: std::time::Duration,
) -> Result<String, FileError> {
    String::from_utf8(read_capped_stream(path, max, idle)?).map_err(|_| FileError::NotUtf8)
}

/// [`read_capped`] off the async runtime's worker threads (token files re-read per request,
/// the webhook's serving certificate on reload).
pub async fn read_capped_async(path: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || read_capped(&path, max))
        .await
        .unwrap_or_else(|e| Err(FileError::Io(io::Error::other(e))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_regular_file_is_read_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_capped(&f, 10).unwrap(), b"0123456789");
        assert_eq!(
            read_capped(&f, 9).unwrap_err().to_string(),
            "larger than 9 bytes"
        );
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert_eq!(read_capped_text(&link, 10).unwrap(), "0123456789");
    }

    #[test]
    fn a_fifo_is_refused_at_once_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pipe");
        mkfifo(&f);
        let started = std::time::Instant::now();
        let err = read_capped(&f, 10).unwrap_err();
        assert_eq!(err.to_string(), "a named pipe (FIFO), not a regular file");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn a_stream_reads_files_and_pipes_and_gives_up_on_a_silent_pipe() {
        let dir = tempfile::tempdir().unwrap();
        let idle = std::time::Duration::from_secs(1);
        let f = dir.path().join("f");
        std::fs::write(&f, b"kind: Job\n").unwrap();
        assert_eq!(
            read_capped_stream_text(&f, 100, idle).unwrap(),
            "kind: Job\n"
        );
        // A writer that opens the pipe after the reader and writes in two parts, as
        // `kubectl get … > fifo` would: read whole, to the writer's close.
        let p = dir.path().join("pipe");
        mkfifo(&p);
        let writer = {
            let p = p.clone();
            std::thread::spawn(move || {
                use std::io::Write as _;
                let mut w = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
                w.write_all(b"kind: ").unwrap();
                std::thread::sleep(std::time::Duration::from_millis(100));
                w.write_all(b"Job\n").unwrap();
            })
        };
        assert_eq!(
            read_capped_stream_text(&p, 100, idle).unwrap(),
            "kind: Job\n"
        );
        writer.join().unwrap();
        // Nobody writes: an error after the idle bound, not a hang and not an empty read.
        let started = std::time::Instant::now();
        let err = read_capped_stream(&p, 100, idle).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a pipe that sent nothing for 1 s (a named pipe nobody writes to?)"
        );
        assert!(started.elapsed() >= idle && started.elapsed() < idle * 3);
        assert_eq!(
            read_capped_stream(Path::new("/dev/zero"), 10, idle)
                .unwrap_err()
                .to_string(),
            "a character device, not a regular file"
        );
        assert_eq!(
            read_capped_stream(&f, 5, idle).unwrap_err().to_string(),
            "larger than 5 bytes"
        );
    }

    #[test]
    fn directories_devices_and_missing_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            read_capped(dir.path(), 10).unwrap_err().to_string(),
            "a directory, not a regular file"
        );
        assert_eq!(
            read_capped(Path::new("/dev/zero"), 10)
                .unwrap_err()
                .to_string(),
            "a character device, not a regular file"
        );
        let missing = read_capped(&dir.path().join("nope"), 10).unwrap_err();
        assert!(missing.is_not_found());
        assert_eq!(
            missing.to_string(),
            "No such file or directory (os error 2)"
        );
    }

    #[test]
    fn text_must_be_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert_eq!(
            read_capped_text(&f, 10).unwrap_err().to_string(),
            "not UTF-8 text"
        );
    }
}
