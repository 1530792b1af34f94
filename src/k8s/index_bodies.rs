//! The index bodies the webhook hands to the init container it injects, so that on a
//! metered registry (Docker Hub: every manifest GET is a pull, HEAD is free) the check on
//! the node needs only HEADs.
//!
//! The webhook has already read the index a tag resolves to. An index is content-addressed:
//! the bytes behind a digest never change. So `/mutate` writes the bodies it holds into one
//! pod-template annotation, [`ANNOTATION`], a JSON object from digest to the body's text:
//! `{"sha256:…": "{\"schemaVersion\":2,…}"}`. The injected container reads it through a
//! downward-API volume (`pullcheck check --index-bodies FILE`), keeps each body only when it
//! hashes to its digest, and uses one only when the live HEAD answers that very digest.
//!
//! Whoever can write the workload can write the annotation; a forged body fails its digest
//! and is dropped, and a body for another digest is never looked up. A moved tag gets a new
//! digest from the HEAD, so the recorded body goes unused and the check runs as before.

use serde_json::{Map, Value};

/// The pod-template annotation holding the index bodies.
pub(crate) const ANNOTATION: &str = "pullcheck.io/index-bodies";

/// The annotation's value for these `(digest, body)` pairs, in order, each digest once, in
/// at most `max` bytes; a body that is not UTF-8 text (an index is JSON) or doesn't fit is
/// left out. `None` when none is left.
pub(crate) fn encode<'a>(
    bodies: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    max: usize,
) -> Option<String> {
    let mut map = Map::new();
    // `{}` plus, per entry, `"digest":"body",` with the body's JSON escaping.
    let mut size = 2;
    for (digest, body) in bodies {
        if map.contains_key(digest) {
            continue;
        }
        let Ok(text) = std::str::from_utf8(body) else {
            continue;
        };
        let value = Value::String(text.to_string());
        let entry = digest.len() + 4 + value.to_string().len();
        if size + entry > max {
            continue;
        }
        size += entry;
        map.insert(digest.to_string(), value);
    }
    (!map.is_empty()).then(|| Value::Object(map).to_string())
}

/// Why the annotation's file can't be read as index bodies.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// Not a JSON object.
    #[error("not a JSON object of digest to index body ({0})")]
    NotAnObject(String),
    /// An entry whose value is not a string.
    #[error("the entry for {0} is not a string")]
    NotText(String),
}

/// The `(digest, body)` pairs in the annotation's text. Empty text (the downward API writes
/// an empty file for an annotation that isn't there) gives none. The digests are not
/// checked here: the engine keeps only bodies that match theirs.
pub(crate) fn decode(text: &str) -> Result<Vec<(String, Vec<u8>)>, DecodeError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let v: Value =
        serde_json::from_str(text).map_err(|e| DecodeError::NotAnObject(e.to_string()))?;
    let Value::Object(map) = v else {
        return Err(DecodeError::NotAnObject("another JSON value".into()));
    };
    map.into_iter()
        .map(|(digest, body)| match body {
            Value::String(s) => Ok((digest, s.into_bytes())),
            _ => Err(DecodeError::NotText(digest)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_round_trip_byte_for_byte() {
        // Index JSON as registries send it: its own spacing and escapes must survive.
        let a =
            b"{\n   \"schemaVersion\": 2,\n   \"manifests\": [{\"a\": \"\\u00e9\"}]\n}".to_vec();
        let b = br#"{"schemaVersion":2,"manifests":[]}"#.to_vec();
        let text = encode(
            [("sha256:aa", a.as_slice()), ("sha256:bb", b.as_slice())],
            64 * 1024,
        )
        .unwrap();
        assert_eq!(
            decode(&text).unwrap(),
            vec![("sha256:aa".to_string(), a), ("sha256:bb".to_string(), b)]
        );
    }

    #[test]
    fn each_digest_once_text_only_and_within_the_limit() {
        let max = 64 * 1024;
        let big = vec![b'x'; max];
        let text = encode(
            [
                ("sha256:aa", b"{}".as_slice()),
                ("sha256:aa", b"{\"other\":1}".as_slice()),
                ("sha256:bin", [0xff, 0xfe].as_slice()),
                ("sha256:big", big.as_slice()),
                ("sha256:cc", b"[]".as_slice()),
            ],
            max,
        )
        .unwrap();
        assert_eq!(text, r#"{"sha256:aa":"{}","sha256:cc":"[]"}"#);
        assert!(encode([("sha256:big", big.as_slice())], max).is_none());
        // At the limit exactly: 2 + len("sha256:d") + 4 + len("\"…\"") bytes.
        let fits = vec![b'y'; max - 2 - 8 - 4 - 2];
        let text = encode([("sha256:d", fits.as_slice())], max).unwrap();
        assert_eq!(text.len(), max - 1);
        assert!(encode([("sha256:d", fits.as_slice())], max - 1).is_none());
    }

    #[test]
    fn empty_and_bad_files() {
        assert_eq!(decode(""), Ok(Vec::new()));
        assert_eq!(decode(" \n"), Ok(Vec::new()));
        assert_eq!(
            decode("[1]"),
            Err(DecodeError::NotAnObject("another JSON value".into()))
        );
        assert_eq!(
            decode(r#"{"sha256:aa": 1}"#),
            Err(DecodeError::NotText("sha256:aa".into()))
        );
        assert!(matches!(decode("{"), Err(DecodeError::NotAnObject(_))));
    }
}
