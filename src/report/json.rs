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

/// The whole document, pretty-printed, with a trailing newline.
pub(crate) fn document(outcomes: &[Outcome], exit_code: u8) -> String {
    let doc = Document {
        schema_version: SCHEMA_VERSION,
        exit_code,
        images: outcomes,
    };
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}
