//! Reading what `inject`, `lint` and `scan` take: a manifest stream and the kind table.

use std::io::Read as _;
use std::path::Path;

use super::UsageError;
use crate::k8s::templates::Table;
use crate::k8s::yaml::{Document, parse_documents};

/// The largest manifest stream read, in bytes.
pub(crate) const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// Read a manifest stream from a file or `-` (stdin). Input larger than
/// [`MAX_INPUT_BYTES`] is refused whole: cutting it would silently drop documents.
pub(crate) fn read_input(path: &Path) -> Result<String, UsageError> {
    let shown = path.display();
    let mut text = String::new();
    // One byte over the cap tells "exactly at the cap" from "larger".
    let limit = MAX_INPUT_BYTES + 1;
    let result = if path.as_os_str() == "-" {
        std::io::stdin().take(limit).read_to_string(&mut text)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(limit).read_to_string(&mut text))
    };
    result.map_err(|e| UsageError(format!("{shown}: cannot read: {e}")))?;
    if text.len() as u64 > MAX_INPUT_BYTES {
        return Err(UsageError(format!(
            "{shown}: larger than {} MiB; split the manifests into several files",
            MAX_INPUT_BYTES / (1024 * 1024)
        )));
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
    let shown = path.display();
    let text = read_input(path)?;
    let docs = parse_documents(&text).map_err(|e| UsageError(format!("{shown}: {e}")))?;
    if docs
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
