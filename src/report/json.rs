//! `--output json`: `{"schema_version":1,"exit_code":N,"images":[Outcome…]}`.
//! The schema is documented in docs/json-schema.md; a field rename bumps `schema_version`.

use crate::engine::Outcome;

/// Current schema version.
pub(crate) const SCHEMA_VERSION: u32 = 1;

#[derive(serde::Serialize)]
struct Document<'a> {
    schema_version: u32,
    exit_code: u8,
    images: &'a [Outcome],
}

/// A document that could not be serialized (a map with non-string keys; never expected of
/// pullcheck's plain data). The CLI exits 1 (internal) with it: never an empty stdout under
/// a verdict's exit code.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the JSON document: {0}")]
pub(crate) struct RenderError(#[from] serde_json::Error);

/// `doc` pretty-printed with a trailing newline. Every `-o json` document (check, scan,
/// lint, explain, watch --once, the usage-error document) is written by this, so they share
/// one layout and one failure rule.
pub(crate) fn render<T: serde::Serialize + ?Sized>(doc: &T) -> Result<String, RenderError> {
    let mut s = serde_json::to_string_pretty(doc)?;
    s.push('\n');
    Ok(s)
}

/// The whole `check -o json` document.
pub(crate) fn document(outcomes: &[Outcome], exit_code: u8) -> Result<String, RenderError> {
    render(&Document {
        schema_version: SCHEMA_VERSION,
        exit_code,
        images: outcomes,
    })
}
