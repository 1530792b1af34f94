//! The other distribution/reference entry points (`Parse`, `ParseAnyReference`,
//! `WithName`, `ParseNamed`) and the kubelet's `applyDefaultImageTag`, beside
//! [`super::Reference::parse`] (`ParseNormalizedNamed`): for conformance tests and
//! diagnostics; their results may lack a registry.

use super::*;

/// The result of [`parse_any`]: a named reference, or a bare digest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AnyReference {
    /// A repository reference (from `ParseNormalizedNamed`).
    Named(Reference),
    /// A bare digest: the input was a digest or a 64-hex image ID (`digestReference`).
    Digest(Digest),
}

/// DR reference.go `Parse`: the grammar with no normalisation.
///
/// The registry is whatever matches the domain grammar before the first `/` (so `foo/bar`
/// has registry `foo`) and may be empty.
///
/// # Errors
///
/// In order: [`ReferenceError::NameEmpty`],
/// `NameContainsUppercase` (when lowercasing would make it valid), `InvalidFormat`,
/// `NameTooLong` (path over 255 bytes), then any digest error from [`Digest::parse`].
pub fn parse_raw(input: &str) -> Result<Reference, ReferenceError> {
    parse_go(input, input)
}

/// DR normalize.go `ParseAnyReference`: a 64-hex image ID becomes digest `sha256:<id>`, a
/// valid digest stays a digest, anything else goes through [`Reference::parse`].
pub fn parse_any(input: &str) -> Result<AnyReference, ReferenceError> {
    if grammar::is_identifier(input) {
        return Digest::parse(&format!("sha256:{input}")).map(AnyReference::Digest);
    }
    if let Ok(digest) = Digest::parse(input) {
        return Ok(AnyReference::Digest(digest));
    }
    Reference::parse(input).map(AnyReference::Named)
}

/// DR reference.go `WithName`: a bare name (no tag, no digest), not normalised.
///
/// # Errors
///
/// [`ReferenceError::InvalidFormat`] for anything that is not a name (including the
/// empty string, a tag or a digest), `NameTooLong` for a path over 255 bytes.
pub fn with_name(input: &str) -> Result<Reference, ReferenceError> {
    let (domain, path) =
        grammar::split_name(input).ok_or_else(|| ReferenceError::InvalidFormat {
            input: input.to_owned(),
        })?;
    check_path_length(path, input)?;
    Ok(Reference {
        domain: domain.unwrap_or_default().to_owned(),
        path: path.to_owned(),
        tag: None,
        digest: None,
    })
}

/// DR normalize.go `ParseNamed`: [`Reference::parse`], but the input must already be in
/// normalised form, else [`ReferenceError::NameNotCanonical`].
pub fn parse_named(input: &str) -> Result<Reference, ReferenceError> {
    let reference = Reference::parse(input)?;
    let canonical = reference.normalized();
    if canonical != input {
        return Err(ReferenceError::NameNotCanonical {
            input: input.to_owned(),
            canonical,
        });
    }
    Ok(reference)
}

/// The image string the kubelet hands to the CRI (`applyDefaultImageTag` in
/// `pkg/kubelet/images/image_manager.go`). It is NOT normalised: `busybox` becomes
/// `busybox:latest`. `:<tag>` is appended only when there is no digest and `input` does not
/// already end with it; with a digest the input is returned unchanged.
///
/// # Errors
///
/// Whatever [`Reference::parse`] returns (the kubelet reports `InvalidImageName`).
pub fn kubelet_image_sent_to_cri(input: &str) -> Result<String, ReferenceError> {
    let reference = Reference::parse(input)?;
    if reference.digest.is_some() {
        return Ok(input.to_owned());
    }
    let tag = reference.tag().unwrap_or(DEFAULT_TAG);
    if input.ends_with(&format!(":{tag}")) {
        Ok(input.to_owned())
    } else {
        Ok(format!("{input}:{tag}"))
    }
}
