//! Image references: parsing and normalisation exactly as the kubelet and containerd do it.
//!
//! Pure and synchronous. The rules come from github.com/distribution/reference
//! (DR @0965666a, parsing identical to v0.6.0: `reference.go`, `normalize.go`,
//! `helpers.go`, `regexp.go`), go-digest v1.0.0 for digests, and the kubelet's
//! `pkg/util/parsers/parsers.go` and `pkg/kubelet/images/image_manager.go`.
//!
//! [`Reference::parse`] is the entry point everything else should use: it is
//! `ParseNormalizedNamed`, the function the kubelet calls. The free functions
//! [`parse_raw`], [`parse_any`], [`with_name`] and [`parse_named`] mirror the other
//! distribution/reference entry points for conformance testing and diagnostics; their
//! results may lack a registry.

mod digest;
mod error;
pub mod grammar;
mod upstream;

use std::fmt;

pub(crate) use digest::Digest;
pub use error::ReferenceError;
pub use upstream::{
    AnyReference, kubelet_image_sent_to_cri, parse_any, parse_named, parse_raw, with_name,
};

/// Registry used when a reference names none (`defaultDomain`).
pub(crate) const DEFAULT_DOMAIN: &str = "docker.io";
/// Legacy Docker Hub name that is rewritten to [`DEFAULT_DOMAIN`] (`legacyDefaultDomain`).
pub(crate) const LEGACY_DEFAULT_DOMAIN: &str = "index.docker.io";
/// Namespace of Docker Hub official images (`officialRepoPrefix`).
pub(crate) const OFFICIAL_REPO_PREFIX: &str = "library/";
/// Tag used when a reference has neither tag nor digest (`defaultTag`).
pub(crate) const DEFAULT_TAG: &str = "latest";
/// Longest repository path, in bytes, not counting the registry (`RepositoryNameTotalLengthMax`,
/// applied to the path only since DR v0.6.0).
pub(crate) const MAX_PATH_LENGTH: usize = 255;

/// A parsed image reference: `[domain/]path[:tag][@digest]`.
///
/// Values from [`Reference::parse`] are normalised: the domain is always set (`docker.io`
/// by default, `index.docker.io` rewritten), and Docker Hub single-component paths carry
/// `library/`. The tag is kept as written even when a digest is present; [`Reference::full`]
/// and [`Reference::for_pull`] drop it, as containerd does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reference {
    domain: String,
    path: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

impl Reference {
    /// Parse the way the kubelet does (DR normalize.go `ParseNormalizedNamed`).
    ///
    /// `busybox` gives `docker.io/library/busybox`; `index.docker.io/x` gives
    /// `docker.io/library/x`; the first `/`-separated component is the registry only if it
    /// is `localhost`, contains `.` or `:`, or has uppercase letters. Otherwise it is part of
    /// the repository (`foo/bar` is `docker.io/foo/bar`), and with no `/` at all
    /// `localhost:5000` is repository `library/localhost` with tag `5000`.
    ///
    /// # Errors
    ///
    /// [`ReferenceError::IdentifierNotAllowed`] for a bare 64-hex image ID,
    /// `NameContainsUppercase` for uppercase in the repository, and everything
    /// [`parse_raw`] returns.
    pub fn parse(input: &str) -> Result<Reference, ReferenceError> {
        if grammar::is_identifier(input) {
            return Err(ReferenceError::IdentifierNotAllowed {
                input: input.to_owned(),
            });
        }
        let (domain, remainder) = split_docker_domain(input);
        let remote = remainder
            .split_once(':')
            .map_or(remainder.as_str(), |(r, _)| r);
        if has_uppercase(remote) {
            return Err(ReferenceError::NameContainsUppercase {
                input: input.to_owned(),
            });
        }
        parse_go(&format!("{domain}/{remainder}"), input)
    }

    /// The registry, e.g. `"docker.io"`, `"127.0.0.1:5000"`, `"[::1]:5000"`. Kept verbatim
    /// (uppercase allowed). Empty only for [`parse_raw`]/[`with_name`] results without one.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The repository path without the registry, e.g. `"library/busybox"`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The tag as written, if any (kept even when a digest is present).
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest, if any.
    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// `domain/path`, without tag or digest (DR `Name()`). For a parsed reference this is the
    /// kubelet's `repoToPull`, the key for the credential keyring lookup.
    pub fn name(&self) -> String {
        if self.domain.is_empty() {
            self.path.clone()
        } else {
            format!("{}/{}", self.domain, self.path)
        }
    }

    /// `name[:tag][@digest]` (DR `String()`); for a value from [`Reference::parse`] this is
    /// `ParseNormalizedNamed(..).String()`. No default tag is added.
    pub fn normalized(&self) -> String {
        let mut s = self.name();
        if let Some(tag) = &self.tag {
            s.push(':');
            s.push_str(tag);
        }
        if let Some(digest) = &self.digest {
            s.push('@');
            s.push_str(&digest.to_string());
        }
        s
    }

    /// The reference containerd pulls (DR `ParseDockerRef` applied to this value): with a
    /// digest the tag is dropped, with neither tag nor digest the tag becomes `latest`.
    #[must_use]
    pub fn for_pull(&self) -> Reference {
        let mut pulled = self.clone();
        if pulled.digest.is_some() {
            pulled.tag = None;
        } else if pulled.tag.is_none() {
            pulled.tag = Some(DEFAULT_TAG.to_owned());
        }
        pulled
    }

    /// `ParseDockerRef(..).String()`: e.g. `docker.io/library/busybox:latest`, or
    /// `docker.io/library/busybox@sha256:…` when a digest is present.
    pub fn full(&self) -> String {
        self.for_pull().normalized()
    }

    /// `FamiliarName`: [`Reference::name`] as Docker prints it, without `docker.io/` and,
    /// for single-component official images, without `library/`.
    pub fn familiar_name(&self) -> String {
        if self.domain != DEFAULT_DOMAIN {
            return self.name();
        }
        match self.path.strip_prefix(OFFICIAL_REPO_PREFIX) {
            Some(rest) if !rest.contains('/') => rest.to_owned(),
            _ => self.path.clone(),
        }
    }

    /// `FamiliarString`: [`Reference::familiar_name`] plus `:tag` and `@digest` as present,
    /// e.g. `busybox:1.36`.
    pub fn familiar(&self) -> String {
        let familiar = Reference {
            domain: String::new(),
            path: self.familiar_name(),
            tag: self.tag.clone(),
            digest: self.digest.clone(),
        };
        familiar.normalized()
    }

    /// What goes in `/v2/<path>/manifests/<X>`: the digest if present, else the tag, else
    /// `latest`.
    pub fn manifest_reference(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(digest), _) => digest.to_string(),
            (None, Some(tag)) => tag.clone(),
            (None, None) => DEFAULT_TAG.to_owned(),
        }
    }

    /// The token scope for pulling this repository: `repository:<path>:pull`.
    ///
    /// Source: distribution docs/content/spec/auth/scope.md. This is the only place a scope
    /// string is built.
    pub fn pull_scope(&self) -> String {
        format!("repository:{}:pull", self.path)
    }

    /// The same repository pinned to `digest`, with any tag dropped.
    #[must_use]
    #[cfg(test)]
    pub(crate) fn with_digest(&self, digest: Digest) -> Reference {
        Reference {
            domain: self.domain.clone(),
            path: self.path.clone(),
            tag: None,
            digest: Some(digest),
        }
    }
}

/// Prints [`Reference::full`], the reference containerd pulls.
impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full())
    }
}

/// Same as [`Reference::parse`], so `"busybox".parse::<Reference>()` works.
impl std::str::FromStr for Reference {
    type Err = ReferenceError;

    fn from_str(input: &str) -> Result<Reference, ReferenceError> {
        Reference::parse(input)
    }
}

/// `Parse(s)`, reporting errors against `input` (which differs from `s` when called from
/// the normalising parser).
fn parse_go(s: &str, input: &str) -> Result<Reference, ReferenceError> {
    let Some((name, tag, digest)) = grammar::split_reference(s) else {
        if s.is_empty() {
            return Err(ReferenceError::NameEmpty);
        }
        if has_uppercase(s) && grammar::split_reference(&go_to_lower(s)).is_some() {
            return Err(ReferenceError::NameContainsUppercase {
                input: input.to_owned(),
            });
        }
        return Err(ReferenceError::InvalidFormat {
            input: input.to_owned(),
        });
    };
    let (domain, path) = grammar::split_name(name).unwrap_or((None, name));
    check_path_length(path, input)?;
    let digest = digest
        .map(Digest::parse)
        .transpose()
        .map_err(|e| e.for_input(input))?;
    Ok(Reference {
        domain: domain.unwrap_or_default().to_owned(),
        path: path.to_owned(),
        tag: tag.map(str::to_owned),
        digest,
    })
}

fn check_path_length(path: &str, input: &str) -> Result<(), ReferenceError> {
    if path.len() > MAX_PATH_LENGTH {
        return Err(ReferenceError::NameTooLong {
            input: input.to_owned(),
            length: path.len(),
        });
    }
    Ok(())
}

/// DR normalize.go `splitDockerDomain`: decide the registry and the rest.
fn split_docker_domain(input: &str) -> (String, String) {
    let (mut domain, mut remainder) = match input.split_once('/') {
        Some((first, rest))
            if first == "localhost" || first.contains(['.', ':']) || has_uppercase(first) =>
        {
            (first.to_owned(), rest.to_owned())
        }
        _ => (DEFAULT_DOMAIN.to_owned(), input.to_owned()),
    };
    if domain == LEGACY_DEFAULT_DOMAIN {
        domain = DEFAULT_DOMAIN.to_owned();
    }
    if domain == DEFAULT_DOMAIN && !remainder.contains('/') {
        remainder = format!("{OFFICIAL_REPO_PREFIX}{remainder}");
    }
    (domain, remainder)
}

/// Go `strings.ToLower`: per-character simple case mapping (U+0130 maps to plain `i`,
/// where Rust's full mapping would add a combining dot).
fn go_to_lower(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c == '\u{130}' {
                'i'
            } else {
                c.to_lowercase().next().unwrap_or(c)
            }
        })
        .collect()
}

/// `strings.ToLower(s) != s`.
fn has_uppercase(s: &str) -> bool {
    go_to_lower(s) != s
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX64: &str = "e6693c20186f837fc393390135d8a598a96a833917917789d63766cab6c59582";

    /// Messages name what is wrong; kinds stay the upstream ones.
    #[test]
    fn invalid_references_say_what_is_wrong() {
        let long_tag = format!("busybox:{}", "a".repeat(129));
        for (input, kind, why) in [
            (
                "Busybox",
                "name_contains_uppercase",
                "repository name must be lowercase",
            ),
            (
                "Busy box",
                "name_contains_uppercase",
                "a space at column 5 is not allowed in an image reference",
            ),
            (
                "app:v1!",
                "invalid_reference_format",
                "'!' at column 7 is not allowed in an image reference",
            ),
            (
                "app@sha256:abc",
                "invalid_reference_format",
                "sha256 digest has 3 hex characters; it needs 64",
            ),
            (
                long_tag.as_str(),
                "invalid_reference_format",
                "tag is 129 characters long, the limit is 128",
            ),
            (
                "a//b",
                "invalid_reference_format",
                "not of the form [registry/]repository[:tag][@digest]",
            ),
            (
                "docker://busybox:1.36",
                "invalid_reference_format",
                "docker:// is a transport prefix (skopeo's), not part of an image reference; \
drop the docker:// prefix: busybox:1.36",
            ),
            (
                "http://127.0.0.1:5000/app:v1",
                "invalid_reference_format",
                "http:// is a URL scheme, not part of an image reference; drop the http:// \
prefix: 127.0.0.1:5000/app:v1 (and pass --insecure-registry 127.0.0.1:5000 for a plain-HTTP \
registry)",
            ),
            (
                "https://ghcr.io/org/app",
                "invalid_reference_format",
                "https:// is a URL scheme, not part of an image reference; drop the https:// \
prefix: ghcr.io/org/app",
            ),
            (
                "oci://ghcr.io/org/charts/app:1.0",
                "invalid_reference_format",
                "oci:// is a URL scheme (Helm's, for charts in a registry), not part of an image \
reference; drop the oci:// prefix: ghcr.io/org/charts/app:1.0",
            ),
            (
                "docker-archive:/tmp/app.tar",
                "invalid_reference_format",
                "docker-archive: is skopeo's transport for an image outside any registry; the \
kubelet pulls registry references such as registry.example.com/app:v1",
            ),
            (
                "trainer:",
                "invalid_reference_format",
                "the tag after ':' is empty; name one (trainer:TAG) or drop the ':' to pull \
trainer:latest",
            ),
            (
                "ghcr.io/org/trainer:",
                "invalid_reference_format",
                "the tag after ':' is empty; name one (ghcr.io/org/trainer:TAG) or drop the ':' \
to pull ghcr.io/org/trainer:latest",
            ),
        ] {
            let e = Reference::parse(input).unwrap_err();
            assert_eq!(e.kind(), kind, "{input}");
            assert_eq!(e.to_string(), format!("invalid reference {input:?}: {why}"));
        }
    }

    #[test]
    fn short_name_is_docker_hub_official() {
        let r = Reference::parse("busybox").unwrap();
        assert_eq!(r.name(), "docker.io/library/busybox");
        assert_eq!(r.full(), "docker.io/library/busybox:latest");
        assert_eq!(r.familiar(), "busybox");
        assert_eq!(r.pull_scope(), "repository:library/busybox:pull");
        assert_eq!(r.manifest_reference(), "latest");
        assert_eq!(
            kubelet_image_sent_to_cri("busybox").unwrap(),
            "busybox:latest"
        );
    }

    #[test]
    fn bare_host_and_port_is_a_tag_on_docker_hub() {
        let r = Reference::parse("localhost:5000").unwrap();
        assert_eq!(r.full(), "docker.io/library/localhost:5000");
        let r = Reference::parse("localhost:5000/foo").unwrap();
        assert_eq!((r.domain(), r.path()), ("localhost:5000", "foo"));
    }

    #[test]
    fn legacy_hub_is_canonicalised_but_registry_1_is_not() {
        assert_eq!(
            Reference::parse("index.docker.io/busybox").unwrap().full(),
            "docker.io/library/busybox:latest"
        );
        assert_eq!(
            Reference::parse("registry-1.docker.io/busybox")
                .unwrap()
                .full(),
            "registry-1.docker.io/busybox:latest"
        );
    }

    #[test]
    fn tag_and_digest_pulls_by_digest_only() {
        let input = format!("busybox:1.36@sha256:{HEX64}");
        let r = Reference::parse(&input).unwrap();
        assert_eq!(r.tag(), Some("1.36"));
        assert_eq!(
            r.full(),
            format!("docker.io/library/busybox@sha256:{HEX64}")
        );
        assert_eq!(r.manifest_reference(), format!("sha256:{HEX64}"));
        assert_eq!(kubelet_image_sent_to_cri(&input).unwrap(), input);
        let pinned = Reference::parse("busybox:1.36")
            .unwrap()
            .with_digest(r.digest().unwrap().clone());
        assert_eq!(
            pinned.normalized(),
            format!("docker.io/library/busybox@sha256:{HEX64}")
        );
    }

    #[test]
    fn errors_name_the_input_on_one_line() {
        let err = Reference::parse("Busybox").unwrap_err();
        assert_eq!(err.kind(), "name_contains_uppercase");
        assert_eq!(
            err.to_string(),
            "invalid reference \"Busybox\": repository name must be lowercase"
        );
        let err = Reference::parse("busybox\n").unwrap_err();
        assert_eq!(err.kind(), "invalid_reference_format");
        assert!(!err.to_string().contains('\n'));
        assert_eq!(
            Reference::parse(HEX64).unwrap_err().kind(),
            "identifier_not_allowed"
        );
    }

    #[test]
    fn path_length_excludes_the_registry() {
        assert!(Reference::parse(&format!("example.com/{}", "a".repeat(255))).is_ok());
        let err = Reference::parse(&format!("example.com/{}", "a".repeat(256))).unwrap_err();
        assert_eq!(err.kind(), "name_too_long");
    }
}
