//! [`ReferenceError`]: why a string is not an image reference, in the upstream kinds the
//! conformance vectors name and in words a person can act on.

use super::{DEFAULT_TAG, grammar};

/// Why a string is not an acceptable image reference.
///
/// One variant per rule of the grammar; [`ReferenceError::kind`] gives the stable
/// `snake_case` identifier used by the conformance vectors and in JSON output. `input` is the
/// string the caller passed in (for a digest error raised inside a reference, the whole
/// reference). `Display` is one line, with the input quoted and escaped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// The input is empty (`ErrNameEmpty`).
    #[error("invalid reference \"\": an image reference must not be empty")]
    NameEmpty,
    /// The input does not follow `[registry/]repository[:tag][@digest]` (`ErrReferenceInvalidFormat`).
    #[error("invalid reference {input:?}: {}", format_problem(input))]
    InvalidFormat {
        /// The rejected input.
        input: String,
    },
    /// The repository part has uppercase letters (`ErrNameContainsUppercase`, and the
    /// `ParseNormalizedNamed` "must be lowercase" error). Registries may be uppercase.
    #[error("invalid reference {input:?}: {}", uppercase_problem(input))]
    NameContainsUppercase {
        /// The rejected input.
        input: String,
    },
    /// The repository path is longer than [`MAX_PATH_LENGTH`] bytes (`ErrNameTooLong`).
    #[error(
        "invalid reference {input:?}: repository path is {length} characters long, the limit is 255"
    )]
    NameTooLong {
        /// The rejected input.
        input: String,
        /// Length of the repository path, in bytes.
        length: usize,
    },
    /// The input is a 64-character lowercase hex string, i.e. an image ID
    /// (`ParseNormalizedNamed`: "cannot specify 64-byte hexadecimal strings").
    #[error(
        "invalid reference {input:?}: a 64-character hex string is an image ID, not a repository name"
    )]
    IdentifierNotAllowed {
        /// The rejected input.
        input: String,
    },
    /// The digest is not `algorithm:hex` with lowercase hex (go-digest `ErrDigestInvalidFormat`).
    #[error("invalid reference {input:?}: digest must be algorithm:hex with lowercase hex digits")]
    DigestInvalidFormat {
        /// The rejected input.
        input: String,
    },
    /// The digest hex has the wrong length for its algorithm (go-digest `ErrDigestInvalidLength`).
    #[error(
        "invalid reference {input:?}: {algorithm} digest has {found} hex characters; it needs {expected}"
    )]
    DigestInvalidLength {
        /// The rejected input.
        input: String,
        /// `sha256`, `sha384` or `sha512`.
        algorithm: &'static str,
        /// Required number of hex digits.
        expected: usize,
        /// Number of hex digits found.
        found: usize,
    },
    /// The digest algorithm is not sha256, sha384 or sha512 (go-digest `ErrDigestUnsupported`).
    #[error(
        "invalid reference {input:?}: digest algorithm {algorithm:?} is not supported (use sha256, sha384 or sha512)"
    )]
    DigestUnsupported {
        /// The rejected input.
        input: String,
        /// The algorithm as written.
        algorithm: String,
    },
    /// The reference has no repository name ("reference %s has no name"). The grammar makes
    /// this unreachable through `ParseNormalizedNamed`; kept so every upstream error has a kind.
    #[error("invalid reference {input:?}: it has no repository name")]
    NoName {
        /// The rejected input.
        input: String,
    },
    /// `ParseNamed` only: the input is valid but not already in normalised form
    /// (`ErrNameNotCanonical`).
    #[error("invalid reference {input:?}: not in canonical form, which is {canonical:?}")]
    NameNotCanonical {
        /// The rejected input.
        input: String,
        /// What `ParseNormalizedNamed` made of it.
        canonical: String,
    },
}

/// Why `input` fails the grammar, in the terms a person can act on: the first character
/// no reference may contain, else a digest too short for the grammar, else a tag too
/// long, else the grammar's shape. Only the message: the kind stays the upstream one.
pub(super) fn format_problem(input: &str) -> String {
    if let Some(prefix) = transport_prefix(input) {
        let rest = &input[prefix.len()..];
        let (what, plain_http) = match prefix {
            "http://" => ("a URL scheme", true),
            "https://" => ("a URL scheme", false),
            "docker://" => ("a transport prefix (skopeo's)", false),
            "oci://" => ("a URL scheme (Helm's, for charts in a registry)", false),
            p if p.contains("://") => ("a transport prefix", false),
            _ => {
                return format!(
                    "{prefix} is skopeo's transport for an image outside any registry; the \
kubelet pulls registry references such as registry.example.com/app:v1"
                );
            }
        };
        let mut why = format!(
            "{prefix} is {what}, not part of an image reference; drop the {prefix} prefix: {rest}"
        );
        if plain_http {
            let host = rest.split('/').next().unwrap_or_default();
            why.push_str(&format!(
                " (and pass --insecure-registry {host} for a plain-HTTP registry)"
            ));
        }
        return why;
    }
    if let Some(bad) = bad_character(input) {
        return bad;
    }
    if let Some((_, digest)) = input.rsplit_once('@')
        && let Some((algorithm, hex)) = digest.split_once(':')
        && !hex.is_empty()
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
        && hex.len() < grammar::MIN_DIGEST_HEX_LENGTH
    {
        let needs = match algorithm {
            "sha256" => "64".to_string(),
            "sha384" => "96".to_string(),
            "sha512" => "128".to_string(),
            _ => format!("at least {}", grammar::MIN_DIGEST_HEX_LENGTH),
        };
        return format!(
            "{algorithm} digest has {} hex characters; it needs {needs}",
            hex.len()
        );
    }
    let name = input.split_once('@').map_or(input, |(n, _)| n);
    if let Some((repo, tag)) = name.rsplit_once(':')
        && !tag.contains('/')
        && !repo.is_empty()
    {
        if tag.is_empty() {
            return format!(
                "the tag after ':' is empty; name one ({repo}:TAG) or drop the ':' to pull {repo}:{DEFAULT_TAG}"
            );
        }
        if tag.len() > grammar::MAX_TAG_LENGTH {
            return format!(
                "tag is {} characters long, the limit is {}",
                tag.len(),
                grammar::MAX_TAG_LENGTH
            );
        }
    }
    "not of the form [registry/]repository[:tag][@digest]".into()
}

/// The `scheme://` or skopeo transport (`containers/image` `transports/alltransports`:
/// `docker://`, `docker-archive:`, …) an image reference was pasted with, e.g. `docker://`
/// in `docker://busybox:1.36` or `https://` in a registry URL: the kubelet takes a bare
/// reference. Only asked about an input that already failed the grammar, so a valid
/// reference such as `oci:v1` (repository `oci`, tag `v1`) is never misread.
pub(super) fn transport_prefix(input: &str) -> Option<&str> {
    if let Some(i) = input.find("://") {
        let scheme = &input[..i];
        if !scheme.is_empty()
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        {
            return Some(&input[..i + 3]);
        }
    }
    // skopeo's transports without slashes: `docker-daemon:`, `oci:`, `containers-storage:`.
    [
        "docker-daemon:",
        "containers-storage:",
        "oci-archive:",
        "docker-archive:",
    ]
    .into_iter()
    .find(|t| input.starts_with(t))
    .map(|t| &input[..t.len()])
}

/// The uppercase message, unless a character no reference may contain is the real problem
/// (`"Busy box"`: lowercasing would not make it valid).
pub(super) fn uppercase_problem(input: &str) -> String {
    bad_character(input).unwrap_or_else(|| "repository name must be lowercase".into())
}

/// The first character no part of the grammar accepts (`[A-Za-z0-9._-]`, the separators
/// `/ : @`, IPv6 brackets, and `+ =` of digest algorithms and encodings), with its 1-based
/// column, e.g. `a space at column 5 is not allowed in an image reference`.
pub(super) fn bad_character(input: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._-/:@[]+=".contains(c);
    input
        .chars()
        .enumerate()
        .find(|(_, c)| !allowed(*c))
        .map(|(i, c)| {
            let shown = match c {
                ' ' => "a space".to_string(),
                c => format!("{c:?}"),
            };
            format!(
                "{shown} at column {} is not allowed in an image reference",
                i + 1
            )
        })
}

impl ReferenceError {
    /// Stable identifier of the rule that failed, e.g. `"invalid_reference_format"`.
    ///
    /// These are the `error_kind` strings of the conformance vectors
    /// (`tests/data/reference-vectors.json#error_kinds`).
    pub fn kind(&self) -> &'static str {
        match self {
            ReferenceError::NameEmpty => "name_empty",
            ReferenceError::InvalidFormat { .. } => "invalid_reference_format",
            ReferenceError::NameContainsUppercase { .. } => "name_contains_uppercase",
            ReferenceError::NameTooLong { .. } => "name_too_long",
            ReferenceError::IdentifierNotAllowed { .. } => "identifier_not_allowed",
            ReferenceError::DigestInvalidFormat { .. } => "digest_invalid_format",
            ReferenceError::DigestInvalidLength { .. } => "digest_invalid_length",
            ReferenceError::DigestUnsupported { .. } => "digest_unsupported",
            ReferenceError::NoName { .. } => "no_name",
            ReferenceError::NameNotCanonical { .. } => "name_not_canonical",
        }
    }

    /// The same error, naming `input` instead (used when a digest fails inside a reference).
    pub(super) fn for_input(self, input: &str) -> ReferenceError {
        let input = input.to_owned();
        match self {
            ReferenceError::DigestInvalidFormat { .. } => {
                ReferenceError::DigestInvalidFormat { input }
            }
            ReferenceError::DigestInvalidLength {
                algorithm,
                expected,
                found,
                ..
            } => ReferenceError::DigestInvalidLength {
                input,
                algorithm,
                expected,
                found,
            },
            ReferenceError::DigestUnsupported { algorithm, .. } => {
                ReferenceError::DigestUnsupported { input, algorithm }
            }
            other => other,
        }
    }
}
