//! [`Secret`]: a credential value that never reaches `Debug`, `Display`, a log line or an
//! error message.

use std::fmt;

/// A password, registry token or helper secret.
///
/// `Debug` and `Display` both print `(redacted)`; the only way to the text is
/// [`Secret::expose`], so every use is greppable. The type deliberately implements neither
/// `serde::Serialize` nor `Deserialize`: values enter through the decoders in this module
/// (pull secrets, docker config, credential helpers) and leave only through `expose`, at
/// the point where an `Authorization` header is built.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value. An empty string is a valid (empty) secret.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret text. Call this only where the value leaves the process (an HTTP header)
    /// or is hashed (see `Credential::fingerprint`).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True if the secret is the empty string.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret(value.to_owned())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(redacted)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(redacted)")
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn debug_and_display_are_redacted() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "(redacted)");
        assert_eq!(format!("{s}"), "(redacted)");
        assert_eq!(format!("{s:#?}"), "(redacted)");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn empty_secret() {
        assert!(Secret::default().is_empty());
        assert!(!Secret::from("x").is_empty());
    }
}
