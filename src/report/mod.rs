//! Reports: turn outcomes into bytes. No decisions are made here.
//!
//! - [`text`]: one human line per image, for stdout (its warnings for stderr);
//! - [`json`]: the versioned JSON document for `--output json` (docs/json-schema.md);
//! - [`termination`]: the ≤ 4 KiB summary the kubelet shows in `kubectl describe pod`.

pub(crate) mod json;
pub(crate) mod termination;
pub(crate) mod text;

/// `n` and the noun, plural unless `n` is 1: `1 image`, `3 images`.
pub(crate) fn count(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// `s` with control characters (newlines, escapes, NUL…) written as Rust escapes, so text
/// from an image argument or a registry can't forge extra output lines or terminal codes.
pub(crate) fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().any(char::is_control) {
        s.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect::<String>()
            .into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(super::printable("a/b:v1"), "a/b:v1");
        assert_eq!(
            super::printable("a:v1\nFAKE pullable"),
            "a:v1\\nFAKE pullable"
        );
        assert_eq!(super::printable("x\u{1b}[31m"), "x\\u{1b}[31m");
    }
}
