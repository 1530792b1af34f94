//! Docker Hub's pull quota, as its answers state it: `ratelimit-limit` and
//! `ratelimit-remaining`, each `<count>;w=<window seconds>` (Docker's "Usage and limits"
//! documentation: both HEAD and GET answers carry them; HEAD does not count as a pull;
//! no headers means the pull is not limited).

/// The quota one answer stated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Quota {
    /// Pulls allowed per window.
    pub limit: u64,
    /// Pulls left in the current window.
    pub remaining: u64,
    /// The window in seconds (`w=`), when given.
    pub window_seconds: Option<u64>,
}

/// Reads `<count>[;w=<seconds>]` (extra `;` parameters are ignored).
fn parse_value(v: &str) -> Option<(u64, Option<u64>)> {
    let mut parts = v.split(';').map(str::trim);
    let count = parts.next()?.parse().ok()?;
    let window = parts
        .filter_map(|p| p.strip_prefix("w="))
        .find_map(|w| w.parse().ok());
    Some((count, window))
}

impl Quota {
    /// The quota from the two header values; `None` when either is absent or unreadable
    /// (then the answer states no limit).
    pub(crate) fn from_headers(limit: Option<&str>, remaining: Option<&str>) -> Option<Quota> {
        let (limit, lw) = parse_value(limit?)?;
        let (remaining, rw) = parse_value(remaining?)?;
        Some(Quota {
            limit,
            remaining,
            window_seconds: rw.or(lw),
        })
    }
}

impl std::fmt::Display for Quota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {} pulls left", self.remaining, self.limit)?;
        if let Some(w) = self.window_seconds {
            if w % 3600 == 0 {
                write!(f, " per {} h", w / 3600)?;
            } else {
                write!(f, " per {w} s")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_docker_hub_headers() {
        assert_eq!(
            Quota::from_headers(Some("100;w=21600"), Some("76;w=21600")),
            Some(Quota {
                limit: 100,
                remaining: 76,
                window_seconds: Some(21600)
            })
        );
        assert_eq!(
            Quota::from_headers(Some("100;w=21600"), Some("76;w=21600"))
                .unwrap()
                .to_string(),
            "76 of 100 pulls left per 6 h"
        );
        assert_eq!(
            Quota::from_headers(Some("200"), Some("0"))
                .unwrap()
                .to_string(),
            "0 of 200 pulls left"
        );
        assert_eq!(Quota::from_headers(None, Some("1;w=60")), None);
        assert_eq!(Quota::from_headers(Some("x;w=60"), Some("1;w=60")), None);
    }
}
