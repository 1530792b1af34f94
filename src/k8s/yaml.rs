//! Multi-document YAML in and out, keeping key order and every unknown field.
//!
//! Documents are parsed into [`serde_json::Value`] (serde_json's `preserve_order` feature
//! keeps mapping keys in file order), changed there, and written back. The crate is
//! `serde-saphyr`: pure Rust (no libyaml port), actively released, with input budgets
//! against alias bombs, and a serializer that quotes strings a YAML 1.1 reader would
//! retype (`"yes"`, `"on"`, `"0755"`, `"2024-01-01"`); `kubectl` reads YAML 1.1, so an
//! annotation value `"yes"` written bare would become a boolean there. The forks of the
//! archived serde_yaml (serde_yaml_ng, serde_norway) emit `yes` unquoted; saphyr and
//! yaml-rust2 have no serde layer of their own.
//!
//! What does not survive a round trip: comments, anchors and aliases (expanded), flow vs
//! block style, quoting style, and empty documents. Values (including string vs number vs
//! boolean) and key order do.

use serde_json::Value;

/// Serializer options: two-space indentation, sequences not indented under their key
/// (the `kubectl` layout), multi-line strings as literal blocks, long single lines never
/// folded (a folded scalar reads back the same but diffs badly).
fn serializer_options() -> serde_saphyr::SerializerOptions {
    let mut o = serde_saphyr::SerializerOptions::default();
    o.indent_step = 2;
    o.compact_list_indent = true;
    o.prefer_block_scalars = true;
    o.folded_wrap_chars = usize::MAX / 2;
    o
}

/// One non-empty YAML document of a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// 1-based position among the non-empty documents of the stream (what messages print).
    pub number: usize,
    /// 1-based line where the document's content starts in the input.
    pub line: usize,
    /// The parsed document.
    pub value: Value,
}

/// A document that is not valid YAML, or a value that can't be written as YAML.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum YamlError {
    /// Parsing failed; `line` is counted in the whole input (1-based).
    #[error("document {document}, line {line}: {message}")]
    Parse {
        /// 1-based document number (see [`Document::number`]).
        document: usize,
        /// 1-based line in the whole input.
        line: usize,
        /// The parser's one-line message.
        message: String,
    },
    /// Serialization failed (not expected for values that came from YAML).
    #[error("cannot write YAML: {0}")]
    Emit(String),
}

/// True for a line that starts a new document (`---`, `--- …`) or ends one (`...`).
fn is_document_marker(line: &str) -> Option<&str> {
    let l = line.trim_end_matches(['\r', '\n']);
    for marker in ["---", "..."] {
        if let Some(rest) = l.strip_prefix(marker)
            && (rest.is_empty() || rest.starts_with([' ', '\t']))
        {
            // What follows `---` on the same line is content (`--- {a: 1}`); after `...` only
            // a comment is allowed.
            return Some(if marker == "---" { rest } else { "" });
        }
    }
    None
}

/// Split a stream at its document markers: (first content line, text) per chunk.
///
/// YAML forbids `---`/`...` at column 0 inside any scalar, so the split is exact; directives
/// (`%YAML`) are not supported (Kubernetes manifests don't use them).
fn split(text: &str) -> Vec<(usize, String)> {
    let mut chunks = vec![(1usize, String::new())];
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if let Some(rest) = is_document_marker(line) {
            let mut s = rest.trim_start().to_string();
            if !s.is_empty() {
                s.push('\n');
            }
            // Content starts on the marker line when something follows `---`, else below it.
            chunks.push((if s.is_empty() { i + 2 } else { i + 1 }, s));
        } else if let Some(last) = chunks.last_mut() {
            last.1.push_str(line);
        }
    }
    chunks
}

/// Reduce the parser's rendered error to one line without its own (chunk-relative) position.
fn one_line(err: &serde_saphyr::Error) -> (Option<usize>, String) {
    let rendered = err.to_string();
    let first = rendered.lines().next().unwrap_or("invalid YAML");
    let mut msg = first.strip_prefix("error: ").unwrap_or(first);
    if msg.starts_with("line ")
        && let Some((_, rest)) = msg.split_once(": ")
    {
        msg = rest;
    }
    let line = err.location().map(|l| l.line() as usize).filter(|l| *l > 0);
    (line, msg.to_string())
}

/// Parse a multi-document YAML stream; empty documents (only comments or whitespace) are
/// dropped, and every other document is numbered from 1.
///
/// Errors: [`YamlError::Parse`] for the first document that does not parse.
pub fn parse_documents(text: &str) -> Result<Vec<Document>, YamlError> {
    let mut out = Vec::new();
    for (start, chunk) in split(text) {
        let number = out.len() + 1;
        match serde_saphyr::from_str::<Option<Value>>(&chunk) {
            Ok(None) | Ok(Some(Value::Null)) => {}
            Ok(Some(value)) => {
                let skip = chunk.lines().take_while(|l| is_blank_or_comment(l)).count();
                out.push(Document {
                    number,
                    line: start + skip,
                    value,
                });
            }
            Err(e) => {
                let (line, message) = one_line(&e);
                let line = start + line.unwrap_or(1) - 1;
                return Err(YamlError::Parse {
                    document: number,
                    line,
                    message,
                });
            }
        }
    }
    Ok(out)
}

fn is_blank_or_comment(l: &str) -> bool {
    let t = l.trim();
    t.is_empty() || t.starts_with('#')
}

/// Write one value as a YAML document (no `---`, ends with a newline).
pub fn to_yaml(value: &Value) -> Result<String, YamlError> {
    serde_saphyr::to_string_with_options(value, serializer_options())
        .map_err(|e| YamlError::Emit(e.to_string()))
}

/// Write a stream: the documents joined by `---` lines (none before the first).
pub(crate) fn to_yaml_stream<'a>(
    values: impl IntoIterator<Item = &'a Value>,
) -> Result<String, YamlError> {
    let mut out = String::new();
    for (i, v) in values.into_iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        let doc = to_yaml(v)?;
        out.push_str(&doc);
        if !doc.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_documents_and_drops_empty_ones() {
        let docs = parse_documents("# head\n---\na: 1\n---\n# nothing\n--- {b: 2}\n...\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].value, serde_json::json!({"a": 1}));
        assert_eq!((docs[0].number, docs[0].line), (1, 3));
        assert_eq!(docs[1].value, serde_json::json!({"b": 2}));
        assert_eq!((docs[1].number, docs[1].line), (2, 6));
    }

    #[test]
    fn error_names_document_and_absolute_line() {
        let err = parse_documents("a: 1\n---\nb: 2\n---\nc: [1, 2\nd: 3\n").unwrap_err();
        match err {
            YamlError::Parse {
                document,
                line,
                message,
            } => {
                assert_eq!(document, 3);
                assert!((5..=6).contains(&line), "line {line}");
                assert!(!message.contains('\n'));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn round_trip_keeps_order_and_yaml11_lookalikes_quoted() {
        let src = "z: 1\na:\n  y: \"yes\"\n  o: \"on\"\n  n: \"0755\"\n  t: \"true\"\nl:\n- x\n";
        let v = &parse_documents(src).unwrap()[0].value;
        let out = to_yaml(v).unwrap();
        assert!(out.starts_with("z: 1\na:\n"), "{out}");
        for quoted in ["\"yes\"", "\"on\"", "\"0755\"", "\"true\""] {
            assert!(out.contains(quoted), "{quoted} in {out}");
        }
        assert_eq!(&parse_documents(&out).unwrap()[0].value, v);
    }
}
