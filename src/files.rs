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
//! Manifest streams (`scan`, `lint`, `inject -f`) are the one exception and are read in
//! `cli::input`: there a pipe is what `-f <(kubectl get … -o yaml)` gives, like stdin.

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
