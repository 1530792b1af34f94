//! `WWW-Authenticate` parsing: one challenge per header line.
//!
//! Source: containerd `core/remotes/docker/auth/parse.go` (`ParseAuthHeader`,
//! `parseValueAndParams`, `expectTokenOrQuoted`); compared with distribution
//! `internal/client/auth/challenge/authchallenge.go`. Facts §3.5.
//!
//! Grammar, as containerd implements it:
//! - the scheme is an RFC 2616 token at the start of the line, lowercased;
//! - then `key=value` parameters separated by `,` with optional spaces/tabs around the
//!   separators; keys are tokens, lowercased; `=` must follow the key directly; a value is
//!   a token or a quoted string in which `\x` becomes `x`;
//! - parsing stops silently at the first thing that does not fit, keeping what came
//!   before; several challenges packed into one line are therefore not split (only the
//!   first scheme is seen);
//! - a repeated key keeps the later value.
//!
//! Where containerd and distribution differ, pullcheck follows containerd (the runtime
//! the kubelet drives):
//! - an empty value (`error=""`, or `error=` followed by `,`) is **kept** as `""`;
//!   distribution stops parsing there;
//! - an unterminated quoted string gives `""` for that key and ends parsing; distribution
//!   drops the key;
//! - containerd discards schemes other than basic/digest/bearer and sorts the rest
//!   bearer > digest > basic; pullcheck keeps every scheme in header order
//!   ([`Scheme::Other`]) and lets [`preferred`] make the same choice.

use std::collections::BTreeMap;
use std::fmt;

/// An authentication scheme, lowercased.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `basic` (RFC 7617): send `Authorization: Basic …` on the registry request.
    Basic,
    /// `bearer` (RFC 6750 / the Docker token spec): fetch a token from `realm`.
    Bearer,
    /// Any other scheme (e.g. `digest`, `negotiate`), lowercased. Never chosen by
    /// [`preferred`].
    Other(String),
}

impl Scheme {
    fn from_lowercase(s: String) -> Scheme {
        match s.as_str() {
            "basic" => Scheme::Basic,
            "bearer" => Scheme::Bearer,
            _ => Scheme::Other(s),
        }
    }

    /// The lowercase scheme name.
    pub fn as_str(&self) -> &str {
        match self {
            Scheme::Basic => "basic",
            Scheme::Bearer => "bearer",
            Scheme::Other(s) => s,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One parsed `WWW-Authenticate` line: the scheme and its parameters (lowercased keys,
/// unescaped values).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Challenge {
    /// The scheme, lowercased.
    pub scheme: Scheme,
    /// Parameters by lowercased key.
    pub params: BTreeMap<String, String>,
}

impl Challenge {
    /// A parameter by (lowercase) key.
    pub(crate) fn param(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// `realm`: the token endpoint URL for bearer (required there; validate it before use),
    /// informational for basic.
    pub fn realm(&self) -> Option<&str> {
        self.param("realm")
    }

    /// `service`: sent back as `service=` in the token request when non-empty.
    pub fn service(&self) -> Option<&str> {
        self.param("service")
    }

    /// `scope`: a space-separated list of `type:name:actions` scopes.
    pub(crate) fn scope(&self) -> Option<&str> {
        self.param("scope")
    }

    /// `error`: e.g. `insufficient_scope`, `invalid_token`.
    pub fn error(&self) -> Option<&str> {
        self.param("error")
    }
}

impl fmt::Display for Challenge {
    /// `bearer realm="…",service="…"` with values quoted and `"`/`\` escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.scheme.as_str())?;
        for (i, (k, v)) in self.params.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { "," })?;
            write!(f, "{k}=\"")?;
            for c in v.chars() {
                if c == '"' || c == '\\' {
                    f.write_str("\\")?;
                }
                write!(f, "{c}")?;
            }
            f.write_str("\"")?;
        }
        Ok(())
    }
}

/// Parses every `WWW-Authenticate` header line, in order, one challenge per line. Lines
/// that do not start with a token (empty, or starting with a separator) give nothing.
pub fn parse_headers<S: AsRef<str>>(lines: &[S]) -> Vec<Challenge> {
    lines
        .iter()
        .filter_map(|l| parse_header(l.as_ref()))
        .collect()
}

/// Parses one `WWW-Authenticate` line; `None` if it does not start with a scheme token.
pub fn parse_header(line: &str) -> Option<Challenge> {
    let s = line.as_bytes();
    let (scheme, mut rest) = take_token(s);
    if scheme.is_empty() {
        return None;
    }
    let scheme = Scheme::from_lowercase(ascii_lower(scheme));
    let mut params = BTreeMap::new();
    loop {
        let (key, after_key) = take_token(skip_space(rest));
        if key.is_empty() {
            break;
        }
        let Some(after_eq) = after_key.strip_prefix(b"=") else {
            break;
        };
        let (value, after_value) = take_token_or_quoted(after_eq);
        params.insert(ascii_lower(key), value);
        rest = skip_space(after_value);
        match rest.strip_prefix(b",") {
            Some(r) => rest = r,
            None => break,
        }
    }
    Some(Challenge { scheme, params })
}

/// The challenge to answer: the first bearer, else the first basic (containerd's
/// preference order, stable). `None` if neither is offered.
pub fn preferred(ch: &[Challenge]) -> Option<&Challenge> {
    ch.iter()
        .find(|c| c.scheme == Scheme::Bearer)
        .or_else(|| ch.iter().find(|c| c.scheme == Scheme::Basic))
}

/// RFC 2616 token characters: US-ASCII, not a control, not a separator.
fn is_token(b: u8) -> bool {
    b > 31 && b < 127 && !b" \t\"(),/:;<=>?@[]\\{}".contains(&b)
}

/// containerd's space class: SP, HT, CR, LF.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn skip_space(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|b| is_space(**b)).count();
    &s[n..]
}

fn take_token(s: &[u8]) -> (&[u8], &[u8]) {
    let n = s.iter().take_while(|b| is_token(**b)).count();
    s.split_at(n)
}

/// A token, or a quoted string with `\x` → `x`. An unterminated quoted string yields
/// `""` and consumes everything (containerd).
fn take_token_or_quoted(s: &[u8]) -> (String, &[u8]) {
    let Some(body) = s.strip_prefix(b"\"") else {
        let (tok, rest) = take_token(s);
        return (String::from_utf8_lossy(tok).into_owned(), rest);
    };
    let mut out = Vec::new();
    let mut escaped = false;
    for (i, &b) in body.iter().enumerate() {
        if escaped {
            out.push(b);
            escaped = false;
        } else if b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            return (String::from_utf8_lossy(&out).into_owned(), &body[i + 1..]);
        } else {
            out.push(b);
        }
    }
    (String::new(), &[])
}

fn ascii_lower(s: &[u8]) -> String {
    // Tokens are ASCII by construction.
    String::from_utf8_lossy(s).to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Challenge {
        parse_header(line).unwrap()
    }

    #[test]
    fn docker_hub() {
        let c = one(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull""#,
        );
        assert_eq!(c.scheme, Scheme::Bearer);
        assert_eq!(c.realm(), Some("https://auth.docker.io/token"));
        assert_eq!(c.service(), Some("registry.docker.io"));
        assert_eq!(c.scope(), Some("repository:library/busybox:pull"));
        assert_eq!(c.error(), None);
    }

    #[test]
    fn case_spaces_escapes_and_empty_values() {
        let c = one("BASIC Realm = \"x\"");
        // `=` must follow the key directly: parsing stops, the scheme survives.
        assert_eq!(c.scheme, Scheme::Basic);
        assert!(c.params.is_empty());
        let c = one("bearer  REALM=\"a\\\"b\\\\c\" ,  error=\"\", x=tok,y=");
        assert_eq!(c.realm(), Some("a\"b\\c"));
        assert_eq!(c.error(), Some(""));
        assert_eq!(c.param("x"), Some("tok"));
        assert_eq!(c.param("y"), Some(""));
        let c = one("Bearer realm=\"unterminated, service=x");
        assert_eq!(c.realm(), Some(""));
        assert_eq!(c.service(), None);
        let c = one("Bearer a=1,a=2");
        assert_eq!(c.param("a"), Some("2"));
        assert!(parse_header("").is_none());
        assert!(parse_header(" Bearer realm=x").is_none());
        assert_eq!(one("Negotiate").scheme, Scheme::Other("negotiate".into()));
    }

    #[test]
    fn packed_challenges_are_not_split() {
        let c = one(r#"Basic realm="r", Bearer realm="t""#);
        assert_eq!(c.scheme, Scheme::Basic);
        assert_eq!(c.realm(), Some("r"));
        assert_eq!(c.params.len(), 1);
    }

    #[test]
    fn preference_is_bearer_then_basic_stable() {
        let cs = parse_headers(&[
            "Digest realm=d",
            "Basic realm=b1",
            "Bearer realm=t1",
            "Bearer realm=t2",
        ]);
        assert_eq!(cs.len(), 4);
        assert_eq!(preferred(&cs).unwrap().realm(), Some("t1"));
        let cs = parse_headers(&["Digest realm=d", "Basic realm=b1", "Basic realm=b2"]);
        assert_eq!(preferred(&cs).unwrap().realm(), Some("b1"));
        assert!(preferred(&parse_headers(&["Digest realm=d"])).is_none());
    }

    #[test]
    fn display_round_trips() {
        let c = one(r#"Bearer realm="https://a/t",service="s\"q""#);
        assert_eq!(one(&c.to_string()), c);
    }
}
