//! The Go standard library pieces the kubelet's keyring matching relies on, ported as far
//! as registry keys and image names exercise them: `net.SplitHostPort`, `net/url.Parse`
//! (host, port, userinfo and path unescaping) and `path/filepath.Match` on Unix.
//! Sources: Go `src/net/ipsock.go` (`SplitHostPort`), `src/net/url/url.go` (`parse`,
//! `parseHost`, `validOptionalPort`, `validUserinfo`, `unescape`),
//! `src/path/filepath/match.go` (`Match`, `scanChunk`, `matchChunk`, `getEsc`).

/// Go `net.SplitHostPort`; `None` where Go returns an error.
pub(super) fn split_host_port(hostport: &str) -> Option<(&str, &str)> {
    let i = hostport.rfind(':')?;
    let (host, j, k) = if hostport.starts_with('[') {
        let end = hostport.find(']')?;
        if end + 1 != i {
            return None;
        }
        (&hostport[1..end], 1, end + 1)
    } else {
        let host = &hostport[..i];
        if host.contains(':') {
            return None;
        }
        (host, 0, 0)
    };
    if hostport[j..].contains('[') || hostport[k..].contains(']') {
        return None;
    }
    Some((host, &hostport[i + 1..]))
}

/// The parts of a Go `url.URL` the keyring uses. `path` is percent-decoded, as Go's
/// `URL.Path` is.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct GoUrl {
    /// `host[:port]`.
    pub(super) host: String,
    /// The path, percent-decoded.
    pub(super) path: String,
}

impl GoUrl {
    /// Parses `http://…` or `https://…` the way Go's `url.Parse` does, returning `None`
    /// where it returns an error. Only the checks that registry keys and repository names
    /// can reach are reproduced: control characters, the fragment's and path's `%`
    /// escapes, the port, and the characters Go refuses in a host name.
    pub(super) fn parse(s: &str) -> Option<GoUrl> {
        if s.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return None;
        }
        let rest = s
            .strip_prefix("https://")
            .or_else(|| s.strip_prefix("http://"))?;
        let (rest, fragment) = match rest.split_once('#') {
            Some((r, f)) => (r, Some(f)),
            None => (rest, None),
        };
        if let Some(f) = fragment {
            percent_decode(f)?;
        }
        let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let host = match authority.rfind('@') {
            Some(i) => {
                if !valid_userinfo(&authority[..i]) {
                    return None;
                }
                &authority[i + 1..]
            }
            None => authority,
        };
        if !valid_host(host) {
            return None;
        }
        let path = percent_decode(path)?;
        Some(GoUrl {
            host: host.to_owned(),
            path,
        })
    }
}

/// Go `url.parseHost` + `unescape(host, encodeHost)`, as a yes/no.
pub(super) fn valid_host(host: &str) -> bool {
    let name = if host.starts_with('[') {
        let Some(end) = host.rfind(']') else {
            return false;
        };
        if !valid_optional_port(&host[end + 1..]) {
            return false;
        }
        &host[..=end]
    } else if let Some(i) = host.rfind(':') {
        if !valid_optional_port(&host[i..]) {
            return false;
        }
        host
    } else {
        host
    };
    name.bytes()
        .all(|b| b >= 0x80 || b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]<>\"".contains(&b))
}

/// Go `validOptionalPort`: empty, or `:` followed by digits only.
pub(super) fn valid_optional_port(port: &str) -> bool {
    match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(digits) => digits.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// Go `validUserinfo`.
pub(super) fn valid_userinfo(s: &str) -> bool {
    s.bytes()
        .all(|b| b >= 0x80 || b.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&b))
}

/// Go `unescape(s, encodePath)`: `%XX` becomes the byte; a bad escape is an error.
pub(super) fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// A malformed `filepath.Match` pattern (Go's `ErrBadPattern`).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct BadPattern;

/// Go `path/filepath.Match` on Unix (separator `/`, `\` escapes): `*` matches any run of
/// non-`/` characters, `?` one non-`/` character, `[…]` / `[^…]` a class of characters
/// and ranges. A malformed pattern is an error even when an earlier part already failed
/// to match.
pub(super) fn filepath_match(pattern: &str, name: &str) -> Result<bool, BadPattern> {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    let mut pattern: &[char] = &pattern;
    let mut name: &[char] = &name;
    'pattern: while !pattern.is_empty() {
        let (star, chunk, rest) = scan_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            return Ok(!name.contains(&'/'));
        }
        let (t, ok) = match match_chunk(chunk, name) {
            Ok(Some(t)) => (t, true),
            Ok(None) => (name, false),
            Err(e) => return Err(e),
        };
        if ok && (t.is_empty() || !pattern.is_empty()) {
            name = t;
            continue;
        }
        if star {
            let mut i = 0;
            while i < name.len() && name[i] != '/' {
                if let Some(t) = match_chunk(chunk, &name[i + 1..])? {
                    if pattern.is_empty() && !t.is_empty() {
                        i += 1;
                        continue;
                    }
                    name = t;
                    continue 'pattern;
                }
                i += 1;
            }
        }
        while !pattern.is_empty() {
            let (_, chunk, rest) = scan_chunk(pattern);
            pattern = rest;
            match_chunk(chunk, &[])?;
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

/// Go `scanChunk`: leading stars, then everything up to the next unbracketed `*`.
pub(super) fn scan_chunk(mut pattern: &[char]) -> (bool, &[char], &[char]) {
    let mut star = false;
    while pattern.first() == Some(&'*') {
        pattern = &pattern[1..];
        star = true;
    }
    let mut in_range = false;
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            // An escape skips the next character (a trailing `\` is caught by
            // `match_chunk`).
            '\\' if i + 1 < pattern.len() => i += 1,
            '[' => in_range = true,
            ']' => in_range = false,
            '*' if !in_range => break,
            _ => {}
        }
        i += 1;
    }
    (star, &pattern[..i], &pattern[i..])
}

/// Go `matchChunk`: `Ok(Some(rest))` on a match, `Ok(None)` on a mismatch (after checking
/// the rest of the chunk is well-formed), `Err` on a malformed chunk.
pub(super) fn match_chunk<'a>(
    mut chunk: &[char],
    mut s: &'a [char],
) -> Result<Option<&'a [char]>, BadPattern> {
    let mut failed = false;
    while !chunk.is_empty() {
        if !failed && s.is_empty() {
            failed = true;
        }
        match chunk[0] {
            '[' => {
                let mut r = '\0';
                if !failed {
                    r = s[0];
                    s = &s[1..];
                }
                chunk = &chunk[1..];
                let negated = chunk.first() == Some(&'^');
                if negated {
                    chunk = &chunk[1..];
                }
                let mut matched = false;
                let mut nrange = 0;
                loop {
                    if chunk.first() == Some(&']') && nrange > 0 {
                        chunk = &chunk[1..];
                        break;
                    }
                    let (lo, rest) = get_esc(chunk)?;
                    chunk = rest;
                    let mut hi = lo;
                    if chunk[0] == '-' {
                        let (h, rest) = get_esc(&chunk[1..])?;
                        hi = h;
                        chunk = rest;
                    }
                    if lo <= r && r <= hi {
                        matched = true;
                    }
                    nrange += 1;
                }
                if matched == negated {
                    failed = true;
                }
            }
            '?' => {
                if !failed {
                    if s[0] == '/' {
                        failed = true;
                    }
                    s = &s[1..];
                }
                chunk = &chunk[1..];
            }
            c => {
                let c = if c == '\\' {
                    chunk = &chunk[1..];
                    *chunk.first().ok_or(BadPattern)?
                } else {
                    c
                };
                if !failed {
                    if c != s[0] {
                        failed = true;
                    }
                    s = &s[1..];
                }
                chunk = &chunk[1..];
            }
        }
    }
    Ok(if failed { None } else { Some(s) })
}

/// Go `getEsc`: one possibly escaped class character; the chunk must not end after it.
pub(super) fn get_esc(chunk: &[char]) -> Result<(char, &[char]), BadPattern> {
    let mut chunk = chunk;
    match chunk.first() {
        None | Some('-') | Some(']') => return Err(BadPattern),
        Some('\\') => {
            chunk = &chunk[1..];
            if chunk.is_empty() {
                return Err(BadPattern);
            }
        }
        Some(_) => {}
    }
    let r = chunk[0];
    let rest = &chunk[1..];
    if rest.is_empty() {
        return Err(BadPattern);
    }
    Ok((r, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_filepath_match() {
        assert_eq!(filepath_match("*", "abc"), Ok(true));
        assert_eq!(filepath_match("a*c", "abbbc"), Ok(true));
        assert_eq!(filepath_match("a?c", "abc"), Ok(true));
        assert_eq!(filepath_match("[a-c]x", "bx"), Ok(true));
        assert_eq!(filepath_match("[^a-c]x", "bx"), Ok(false));
        assert_eq!(filepath_match("\\*", "*"), Ok(true));
        assert_eq!(filepath_match("[", "a"), Err(BadPattern));
        assert_eq!(filepath_match("x[", "a"), Err(BadPattern));
        assert_eq!(filepath_match("[]a]", "]"), Err(BadPattern));
        assert_eq!(filepath_match("*x", "a/x"), Ok(false));
        assert_eq!(filepath_match("a*b*c", "aXbYbZc"), Ok(true));
    }

    #[test]
    fn go_split_host_port() {
        assert_eq!(split_host_port("a.io:80"), Some(("a.io", "80")));
        assert_eq!(split_host_port("a.io"), None);
        assert_eq!(split_host_port("[::1]:5000"), Some(("::1", "5000")));
        assert_eq!(split_host_port("a:b:80"), None);
        assert_eq!(split_host_port("a.io:"), Some(("a.io", "")));
    }

    #[test]
    fn go_url_parse() {
        let u = GoUrl::parse("https://user@h.io:80/a%2Fb?q=1#f").unwrap();
        assert_eq!(
            u,
            GoUrl {
                host: "h.io:80".into(),
                path: "/a/b".into()
            }
        );
        assert!(GoUrl::parse("https://h.io:8a/x").is_none());
        assert!(GoUrl::parse("https://h.io/%zz").is_none());
        assert!(GoUrl::parse("https://*.h.io/x").is_some());
    }
}
