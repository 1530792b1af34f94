//! Reading what the commands take: manifest streams (`inject`, `lint`, `scan`), the kind
//! table, and lists of image references (`check -f`).

use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::UsageError;
use crate::k8s::templates::Table;
use crate::k8s::yaml::{Document, parse_documents};

/// The largest manifest stream read, in bytes.
pub(crate) const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// Read a manifest stream from a file or `-` (stdin). Input larger than
/// [`MAX_INPUT_BYTES`] is refused whole: cutting it would silently drop documents.
pub(crate) fn read_input(path: &Path) -> Result<String, UsageError> {
    let shown = path.display();
    let too_large = || {
        UsageError(format!(
            "{shown}: larger than {} MiB; split the manifests into several files",
            MAX_INPUT_BYTES / (1024 * 1024)
        ))
    };
    if path.as_os_str() != "-" {
        // A regular file or a pipe that keeps sending (`-f <(kubectl get … -o yaml)`); a named
        // pipe nobody writes to is an error after files::STREAM_IDLE, never a hang.
        return match crate::files::read_capped_stream_text(
            path,
            MAX_INPUT_BYTES,
            crate::files::STREAM_IDLE,
        ) {
            Ok(text) => Ok(text),
            Err(crate::files::FileError::TooLarge { .. }) => Err(too_large()),
            Err(e) => Err(UsageError(format!("{shown}: cannot read: {e}"))),
        };
    }
    let mut text = String::new();
    // One byte over the cap tells "exactly at the cap" from "larger".
    std::io::stdin()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| UsageError(format!("{shown}: cannot read: {e}")))?;
    if text.len() as u64 > MAX_INPUT_BYTES {
        return Err(too_large());
    }
    Ok(text)
}

/// The kind table: built-ins, extended by `--kinds` when given.
pub(crate) fn load_table(kinds: Option<&Path>) -> Result<Table, UsageError> {
    match kinds {
        None => Ok(Table::builtin()),
        Some(p) => Table::load(&p.display().to_string()).map_err(|e| UsageError(e.to_string())),
    }
}

/// The documents of a manifest stream read from `path` (shown in messages). A stream with
/// no Kubernetes object at all is a usage error, like `kubectl apply -f` on such a file: an
/// empty file (a truncated download, the wrong path, `helm template` with nothing
/// enabled) would otherwise pass `lint --strict` and `inject` with exit 0 and no output.
pub(crate) fn read_documents(path: &Path) -> Result<Vec<Document>, UsageError> {
    let text = read_input(path)?;
    documents(path, &text, true)
}

/// The documents of `text`, read from `path`; with `require_objects`, none being a
/// Kubernetes object is an error ([`read_documents`]).
fn documents(path: &Path, text: &str, require_objects: bool) -> Result<Vec<Document>, UsageError> {
    let shown = path.display();
    let mut docs = parse_documents(text).map_err(|e| UsageError(format!("{shown}: {e}")))?;
    for d in &mut docs {
        crate::k8s::normalise_typed_list(&mut d.value);
    }
    if require_objects
        && docs
            .iter()
            .all(|d| crate::k8s::not_an_object(&d.value).is_some())
    {
        let what = match docs.len() {
            0 => "it is empty or holds only comments".to_string(),
            1 => "its one document has no apiVersion and kind".to_string(),
            n => format!("none of its {n} documents has apiVersion and kind"),
        };
        return Err(UsageError(format!(
            "{shown}: no Kubernetes objects in it; {what}"
        )));
    }
    Ok(docs)
}

/// One manifest file of a `-f` list, read.
pub(crate) struct Manifest {
    /// The path as given or found in a directory (`-` for stdin), for messages.
    pub shown: String,
    /// Its documents.
    pub docs: Vec<Document>,
}

/// The extensions a directory given to `-f` is read for, as `kubectl apply -f DIR` does
/// (`FileExtensions` in `k8s.io/cli-runtime/pkg/resource/visitor.go`).
const MANIFEST_EXTENSIONS: &[&str] = &["yaml", "yml", "json"];

/// The files a list of `-f` values names, in order: a file (or `-`) as given, a directory as
/// its `*.yaml`, `*.yml` and `*.json` regular files sorted by name, with `recursive` its
/// subdirectories' too (`kubectl -R`), each directory's in place. A directory without
/// any is a usage error: a wrong path should not pass as "nothing to check".
pub(crate) fn manifest_paths(
    given: &[PathBuf],
    recursive: bool,
) -> Result<Vec<PathBuf>, UsageError> {
    fn walk(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> Result<(), UsageError> {
        let shown = dir.display();
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| UsageError(format!("{shown}: cannot read the directory: {e}")))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(|e| UsageError(format!("{shown}: cannot read the directory: {e}")))?;
        entries.sort();
        for path in entries {
            // Symlinks are followed, as kubectl does; FIFOs and sockets are never opened.
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                if recursive {
                    walk(&path, recursive, out)?;
                }
            } else if meta.is_file()
                && path
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| MANIFEST_EXTENSIONS.contains(&e))
            {
                out.push(path);
            }
        }
        Ok(())
    }
    stdin_at_most_once(given)?;
    let mut out = Vec::new();
    for path in given {
        if path.as_os_str() != "-" && path.is_dir() {
            let before = out.len();
            walk(path, recursive, &mut out)?;
            if out.len() == before {
                return Err(UsageError(format!(
                    "{}: no .yaml, .yml or .json files in the directory{}",
                    path.display(),
                    if recursive {
                        " or below it"
                    } else {
                        " (-R reads its subdirectories)"
                    }
                )));
            }
        } else {
            out.push(path.clone());
        }
    }
    Ok(out)
}

/// `-f -` may appear once in a `-f` list: stdin can be read only once.
pub(crate) fn stdin_at_most_once(given: &[PathBuf]) -> Result<(), UsageError> {
    if given.iter().filter(|p| p.as_os_str() == "-").count() > 1 {
        return Err(UsageError(
            "-f - given more than once: stdin can be read only once".into(),
        ));
    }
    Ok(())
}

/// Read every manifest file of a `-f` list ([`manifest_paths`]). A file named on the
/// command line with no object in it is refused ([`read_documents`]); one found in a
/// directory is not (kubectl skips it too), unless the whole input has no object at all.
/// Together the files may hold at most [`MAX_INPUT_BYTES`].
pub(crate) fn read_manifests(
    given: &[PathBuf],
    recursive: bool,
) -> Result<Vec<Manifest>, UsageError> {
    let mut out = Vec::new();
    let mut total: u64 = 0;
    for path in manifest_paths(given, recursive)? {
        let text = read_input(&path)?;
        total += text.len() as u64;
        if total > MAX_INPUT_BYTES {
            return Err(UsageError(format!(
                "{}: the manifests read reach {} MiB with it; give fewer files at a time",
                path.display(),
                MAX_INPUT_BYTES / (1024 * 1024)
            )));
        }
        let docs = documents(&path, &text, given.contains(&path))?;
        out.push(Manifest {
            shown: path.display().to_string(),
            docs,
        });
    }
    if out
        .iter()
        .flat_map(|m| &m.docs)
        .all(|d| crate::k8s::not_an_object(&d.value).is_some())
    {
        return Err(UsageError(format!(
            "{}: no Kubernetes objects in the files read",
            given
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(out)
}

/// The largest `check -f` file read, in bytes (the manifest limit: a list of references is
/// never larger than the manifests they come from).
const MAX_REFERENCES_BYTES: u64 = MAX_INPUT_BYTES;

/// The image references of a `check -f` file, or `-` for stdin: one a line, surrounding
/// whitespace trimmed; blank lines and lines starting with `#` skipped. A line holding
/// whitespace inside (two references, a trailing comment) is an error naming the file and
/// line: nothing may be dropped unseen. A path is a regular file or a pipe that keeps sending
/// (`-f <(…)`; [`crate::files::read_capped_stream`]); stdin must not be a terminal.
pub(crate) fn read_references(path: &Path) -> Result<Vec<String>, UsageError> {
    use std::io::IsTerminal as _;
    let shown = path.display();
    let text = if path.as_os_str() == "-" {
        if std::io::stdin().is_terminal() {
            return Err(UsageError(
                "-f -: stdin is a terminal; pipe the references in, one a line".into(),
            ));
        }
        let mut text = String::new();
        std::io::stdin()
            .take(MAX_REFERENCES_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| UsageError(format!("-f -: cannot read stdin: {e}")))?;
        if text.len() as u64 > MAX_REFERENCES_BYTES {
            return Err(UsageError(format!(
                "-f -: larger than {MAX_REFERENCES_BYTES} bytes; split the list"
            )));
        }
        text
    } else {
        crate::files::read_capped_stream_text(path, MAX_REFERENCES_BYTES, crate::files::STREAM_IDLE)
            .map_err(|e| UsageError(format!("-f {shown}: cannot read: {e}")))?
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.contains(char::is_whitespace) {
            return Err(UsageError(format!(
                "-f {shown}: line {}: {line:?} holds whitespace; write one image reference a line (comments on lines of their own, starting with #)",
                i + 1
            )));
        }
        out.push(line.to_string());
    }
    if out.is_empty() {
        return Err(UsageError(format!(
            "-f {shown}: no image references in it (one a line; blank and # lines are skipped)"
        )));
    }
    Ok(out)
}
