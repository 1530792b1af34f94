//! Reading what `inject`, `lint` and `scan` take: a manifest stream and the kind table.

use std::io::Read as _;
use std::path::Path;

use super::UsageError;
use crate::k8s::templates::Table;

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
