//! Hand-written matchers for the image reference grammar.
//!
//! Each function here is the anchored equivalent of one regular expression in
//! distribution/reference `regexp.go` (DR @0965666a, identical to v0.6.0). They work on
//! bytes: the grammar is pure ASCII, so any non-ASCII byte simply fails to match.
//!
//! ```text
//! reference       := name [ ":" tag ] [ "@" digest ]
//! name            := [ domainAndPort "/" ] remoteName
//! domainAndPort   := host [ ":" port ]
//! host            := domainName | "[" [a-fA-F0-9:]+ "]"
//! domainName      := domainComponent ( "." domainComponent )*
//! domainComponent := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
//! port            := [0-9]+
//! remoteName      := pathComponent ( "/" pathComponent )*
//! pathComponent   := [a-z0-9]+ ( separator [a-z0-9]+ )*
//! separator       := "." | "_" | "__" | "-"+
//! tag             := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}
//! digest          := algComponent ( [-_+.] algComponent )* ":" [0-9A-Fa-f]{32,}
//! algComponent    := [A-Za-z] [A-Za-z0-9]*
//! identifier      := [a-f0-9]{64}
//! ```
//!
//! Because no part of the grammar can contain the character that ends it (a domain has no
//! `/`, a remote name no `:` or `@`, a tag no `@`), every successful match splits the input
//! in exactly one way, so the capture groups below are the ones RE2 reports.

/// Longest tag the grammar accepts, in bytes (`[\w][\w.-]{0,127}`).
pub(crate) const MAX_TAG_LENGTH: usize = 128;

/// Length of an image identifier, in hex characters (`anchoredIdentifierRegexp`).
pub(crate) const IDENTIFIER_LENGTH: usize = 64;

/// Shortest hex part the reference grammar lets through to digest validation.
pub(crate) const MIN_DIGEST_HEX_LENGTH: usize = 32;

/// `^domainAndPort$`: a registry host (DNS name or bracketed IPv6) with an optional port.
///
/// Uppercase is allowed in the host; the port is any run of digits, with no range check.
/// Source: DR regexp.go `domainAndPort`.
pub fn is_domain_and_port(s: &str) -> bool {
    let (host, port) = if s.starts_with('[') {
        match s.find(']') {
            Some(end) => (&s[..=end], &s[end + 1..]),
            None => return false,
        }
    } else {
        match s.find(':') {
            Some(colon) => (&s[..colon], &s[colon..]),
            None => (s, ""),
        }
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()));
    port_ok && (is_domain_name(host) || is_ipv6_host(host))
}

/// `domainName`: dot-separated DNS labels; no leading, trailing or doubled dot.
fn is_domain_name(s: &str) -> bool {
    s.split('.').all(is_domain_component)
}

/// `domainComponent`: letters, digits and inner hyphens; never empty.
fn is_domain_component(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        }
        _ => false,
    }
}

/// `ipv6address`: `[` hex digits and colons `]`. No zone, no embedded IPv4.
fn is_ipv6_host(s: &str) -> bool {
    s.strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .is_some_and(|inner| {
            !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_hexdigit() || b == b':')
        })
}

/// `pathComponent`: lowercase alphanumeric runs joined by `.`, `_`, `__` or one or more `-`.
///
/// Source: DR regexp.go `pathComponent`, `separator` (the code's `[-]+`, not the doc
/// comment's `[-]*`).
pub(crate) fn is_path_component(s: &str) -> bool {
    let b = s.as_bytes();
    let is_alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut i = 0;
    loop {
        let start = i;
        while i < b.len() && is_alnum(b[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == b.len() {
            return true;
        }
        let sep_start = i;
        while i < b.len() && !is_alnum(b[i]) {
            i += 1;
        }
        let sep = &s[sep_start..i];
        let sep_ok = matches!(sep, "." | "_" | "__") || sep.bytes().all(|c| c == b'-');
        if !sep_ok {
            return false;
        }
    }
}

/// `remoteName`: one or more path components separated by single `/`.
pub(crate) fn is_remote_name(s: &str) -> bool {
    s.split('/').all(is_path_component)
}

/// `^tag$`: 1 to 128 of `[A-Za-z0-9_.-]`, not starting with `.` or `-`.
///
/// Source: DR regexp.go `tag` (`\w` is ASCII in RE2).
pub(crate) fn is_tag(s: &str) -> bool {
    let word = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
    let b = s.as_bytes();
    b.len() <= MAX_TAG_LENGTH
        && b.first().is_some_and(word)
        && b.iter().all(|c| word(c) || *c == b'.' || *c == b'-')
}

/// `^digest$` as the reference grammar sees it: `algorithm:hex` with at least 32 hex
/// digits of either case.
///
/// This is only the syntactic gate; the digest is then validated with go-digest rules
/// (see [`super::Digest::parse`]). Source: DR regexp.go `digestPat`.
pub(crate) fn is_reference_digest(s: &str) -> bool {
    let Some((algorithm, hex)) = s.split_once(':') else {
        return false;
    };
    let alg_component = |c: &str| {
        let b = c.as_bytes();
        b.first().is_some_and(u8::is_ascii_alphabetic) && b.iter().all(u8::is_ascii_alphanumeric)
    };
    algorithm.split(['-', '_', '+', '.']).all(alg_component)
        && hex.len() >= MIN_DIGEST_HEX_LENGTH
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `anchoredIdentifierRegexp`: exactly 64 lowercase hex characters (an image ID).
pub fn is_identifier(s: &str) -> bool {
    s.len() == IDENTIFIER_LENGTH
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `anchoredNameRegexp`: split a name into `(domain, path)`.
///
/// Returns `None` when `s` is not a valid name. The domain is `Some` whenever the text
/// before the first `/` matches `domainAndPort` and the rest is a valid remote name, so
/// `foo/bar` gives `Some("foo")` (the optional group is greedy). The normalising parser
/// decides "domain or not" differently; this is the raw `Parse`/`WithName` view.
pub fn split_name(s: &str) -> Option<(Option<&str>, &str)> {
    if let Some((domain, path)) = s.split_once('/')
        && is_domain_and_port(domain)
        && is_remote_name(path)
    {
        return Some((Some(domain), path));
    }
    is_remote_name(s).then_some((None, s))
}

/// `referenceRegexp`: split a reference into `(name, tag, digest)`.
///
/// Returns `None` when `s` does not match. The name is validated with [`split_name`], the
/// tag with [`is_tag`] and the digest with [`is_reference_digest`] only.
pub fn split_reference(s: &str) -> Option<(&str, Option<&str>, Option<&str>)> {
    let (before_digest, digest) = match s.split_once('@') {
        Some((left, right)) => (left, Some(right)),
        None => (s, None),
    };
    if digest.is_some_and(|d| !is_reference_digest(d)) {
        return None;
    }
    // A tag colon is the last colon and must come after the last slash: the only other
    // colons (port, IPv6) live in the domain, which always ends with a slash.
    let last_slash = before_digest.rfind('/');
    let (name, tag) = match before_digest.rfind(':') {
        Some(colon) if last_slash.is_none_or(|slash| colon > slash) => {
            (&before_digest[..colon], Some(&before_digest[colon + 1..]))
        }
        _ => (before_digest, None),
    };
    if tag.is_some_and(|t| !is_tag(t)) || split_name(name).is_none() {
        return None;
    }
    Some((name, tag, digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_follow_the_code_not_the_doc_comment() {
        assert!(is_path_component("a---b"));
        assert!(is_path_component("a__b"));
        assert!(!is_path_component("a___b"));
        assert!(!is_path_component("a._b"));
        assert!(!is_path_component("a-"));
        assert!(!is_path_component("-a"));
    }

    #[test]
    fn domain_allows_uppercase_and_any_port_length() {
        assert!(is_domain_and_port("Asdf.com"));
        assert!(is_domain_and_port("192.168.1.1:750050"));
        assert!(is_domain_and_port("[fd00:1:2::3]:75050"));
        assert!(!is_domain_and_port("[fd00:1:2::3%eth0]:75050"));
        assert!(!is_domain_and_port("example.com:"));
        assert!(!is_domain_and_port("foo_bar"));
    }

    #[test]
    fn reference_split_puts_a_bare_port_in_the_tag() {
        let d = "sha256:be178c0543eb17f5f3043021c9e5fcf30285e557a4fc309cce97ff9ca6182912";
        let s = format!("localhost:8080@{d}");
        assert_eq!(
            split_reference(&s),
            Some(("localhost", Some("8080"), Some(d)))
        );
        assert_eq!(
            split_reference("localhost:8080/name:v1"),
            Some(("localhost:8080/name", Some("v1"), None))
        );
    }

    #[test]
    fn tag_length_limit() {
        assert!(is_tag(&"a".repeat(128)));
        assert!(!is_tag(&"a".repeat(129)));
        assert!(!is_tag(".a"));
        assert!(is_tag("_A"));
    }
}
