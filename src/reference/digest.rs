//! Content digests (`algorithm:hex`), validated the way go-digest v1.0.0 does it.
//!
//! Source: github.com/opencontainers/go-digest v1.0.0 `digest.go` (`Digest.Validate`) and
//! `algorithm.go` (`Algorithm.Available`, `Algorithm.Validate`). The kubelet links
//! `crypto/sha256` and `crypto/sha512` (k8s `pkg/util/parsers`), so sha256, sha384 and
//! sha512 are all available, as they are here.

use std::fmt;

use sha2::{Digest as _, Sha256, Sha384, Sha512};

use super::ReferenceError;

/// Lowercase hex alphabet, as go-digest encodes.
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// A hash algorithm go-digest considers available in the kubelet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Algorithm {
    Sha256,
    Sha384,
    Sha512,
}

impl Algorithm {
    fn from_name(name: &str) -> Option<Algorithm> {
        match name {
            "sha256" => Some(Algorithm::Sha256),
            "sha384" => Some(Algorithm::Sha384),
            "sha512" => Some(Algorithm::Sha512),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha384 => "sha384",
            Algorithm::Sha512 => "sha512",
        }
    }

    /// Length of the hex encoding: twice the hash size in bytes.
    fn hex_len(self) -> usize {
        match self {
            Algorithm::Sha256 => 64,
            Algorithm::Sha384 => 96,
            Algorithm::Sha512 => 128,
        }
    }

    fn hash_hex(self, body: &[u8]) -> String {
        let bytes: Vec<u8> = match self {
            Algorithm::Sha256 => Sha256::digest(body).to_vec(),
            Algorithm::Sha384 => Sha384::digest(body).to_vec(),
            Algorithm::Sha512 => Sha512::digest(body).to_vec(),
        };
        bytes
            .iter()
            .flat_map(|b| {
                [
                    HEX_DIGITS[usize::from(b >> 4)],
                    HEX_DIGITS[usize::from(b & 0xf)],
                ]
            })
            .map(char::from)
            .collect()
    }
}

/// A validated content digest such as `sha256:<64 lowercase hex>`.
///
/// Only sha256 (64 hex), sha384 (96 hex) and sha512 (128 hex) parse, and the hex is always
/// lowercase. `Display` prints `algorithm:hex`, the form registries send in
/// `Docker-Content-Digest` and the form used in `/v2/<path>/manifests/<digest>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Digest {
    algorithm: Algorithm,
    hex: String,
}

impl Digest {
    /// Parse and validate `algorithm:hex` (go-digest `Parse`).
    ///
    /// # Errors
    ///
    /// Checks run in go-digest's order:
    /// 1. no `:`, or nothing before or after it: [`ReferenceError::DigestInvalidFormat`];
    /// 2. an algorithm other than sha256/sha384/sha512: [`ReferenceError::DigestUnsupported`]
    ///    if the whole string still looks like a digest
    ///    (`[a-z0-9]+([.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+`), else `DigestInvalidFormat`;
    /// 3. hex of the wrong length: [`ReferenceError::DigestInvalidLength`];
    /// 4. hex that is not lowercase `[a-f0-9]`: `DigestInvalidFormat`.
    ///
    /// Errors name `s` as the input.
    pub(crate) fn parse(s: &str) -> Result<Digest, ReferenceError> {
        let invalid_format = || ReferenceError::DigestInvalidFormat {
            input: s.to_owned(),
        };
        let Some((name, hex)) = s
            .split_once(':')
            .filter(|(name, hex)| !name.is_empty() && !hex.is_empty())
        else {
            return Err(invalid_format());
        };
        let Some(algorithm) = Algorithm::from_name(name) else {
            if !looks_like_digest(name, hex) {
                return Err(invalid_format());
            }
            return Err(ReferenceError::DigestUnsupported {
                input: s.to_owned(),
                algorithm: name.to_owned(),
            });
        };
        if hex.len() != algorithm.hex_len() {
            return Err(ReferenceError::DigestInvalidLength {
                input: s.to_owned(),
                algorithm: algorithm.name(),
                expected: algorithm.hex_len(),
                found: hex.len(),
            });
        }
        if !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(invalid_format());
        }
        Ok(Digest {
            algorithm,
            hex: hex.to_owned(),
        })
    }

    /// The sha256 digest of `body`, the algorithm registries use when they compute one
    /// (distribution-spec: a manifest's digest is the hash of its exact bytes).
    pub(crate) fn sha256_of(body: &[u8]) -> Digest {
        Digest {
            algorithm: Algorithm::Sha256,
            hex: Algorithm::Sha256.hash_hex(body),
        }
    }

    /// Whether `body` hashes to this digest with the digest's own algorithm.
    pub(crate) fn verify(&self, body: &[u8]) -> bool {
        self.algorithm.hash_hex(body) == self.hex
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.algorithm.name(), self.hex)
    }
}

/// go-digest `DigestRegexpAnchored`: `^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$`,
/// applied to the halves around the first `:`.
fn looks_like_digest(algorithm: &str, encoded: &str) -> bool {
    let alg_ok = algorithm.split(['.', '+', '_', '-']).all(|c| {
        !c.is_empty()
            && c.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    });
    let encoded_ok = encoded
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'=' | b'_' | b'-'));
    alg_ok && encoded_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_three_sha2_lengths_are_available() {
        assert!(Digest::parse(&format!("sha256:{}", "a".repeat(64))).is_ok());
        assert!(Digest::parse(&format!("sha384:{}", "a".repeat(96))).is_ok());
        assert!(Digest::parse(&format!("sha512:{}", "a".repeat(128))).is_ok());
    }

    #[test]
    fn validation_order_matches_go_digest() {
        let kind = |s: &str| Digest::parse(s).unwrap_err().kind();
        assert_eq!(kind("sha256"), "digest_invalid_format");
        assert_eq!(kind(":abc"), "digest_invalid_format");
        assert_eq!(kind("sha256:"), "digest_invalid_format");
        assert_eq!(
            kind(&format!("md5:{}", "a".repeat(32))),
            "digest_unsupported"
        );
        assert_eq!(kind("MD5:abc"), "digest_invalid_format");
        assert_eq!(
            kind(&format!("sha256:{}", "a".repeat(63))),
            "digest_invalid_length"
        );
        assert_eq!(
            kind(&format!("sha256:{}", "A".repeat(64))),
            "digest_invalid_format"
        );
    }

    #[test]
    fn verify_hashes_the_body() {
        let empty = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let d = Digest::parse(empty).unwrap();
        assert!(d.verify(b""));
        assert!(!d.verify(b"x"));
        assert_eq!(Digest::sha256_of(b""), d);
        assert_eq!(d.to_string(), empty);
    }
}
