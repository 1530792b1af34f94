//! Go's `time.ParseDuration`, the syntax of every duration in the kubelet's provider
//! config and in a plugin's `cacheDuration` (apimachinery `metav1.Duration` decodes JSON
//! strings with it).
//!
//! Written here rather than taken from a crate: `humantime` accepts spellings Go refuses
//! (`"12 hours"`, `"1day"`) and refuses ones Go accepts (`"1.5h"`, `"-1s"`, `"1h30m"` is
//! fine in both), and a plugin's answer must be read exactly as the kubelet reads it.

/// Seconds (negative allowed), or `None` where Go returns an error: an optional sign,
/// then one or more `<decimal><unit>` with units `ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`,
/// `h`; a bare `0` is the only number without a unit.
pub(crate) fn parse_go_duration(s: &str) -> Option<f64> {
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0.0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(rest.len(), |(i, _)| i);
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    Some(if negative { -total } else { total })
}

#[cfg(test)]
mod tests {
    use super::parse_go_duration;

    #[test]
    fn go_spellings() {
        let cases: &[(&str, Option<f64>)] = &[
            ("0", Some(0.0)),
            ("0s", Some(0.0)),
            ("12h", Some(43_200.0)),
            ("1h30m", Some(5_400.0)),
            ("1.5h", Some(5_400.0)),
            ("90m", Some(5_400.0)),
            ("300ms", Some(0.3)),
            ("-1s", Some(-1.0)),
            ("+2s", Some(2.0)),
            ("1µs", Some(1e-6)),
            ("", None),
            ("12", None),
            ("12 hours", None),
            ("1d", None),
            ("h", None),
            ("1..2s", None),
            ("-", None),
        ];
        for (text, want) in cases {
            let got = parse_go_duration(text);
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-12, "{text}: {g} vs {w}"),
                _ => assert_eq!(got, *want, "{text}"),
            }
        }
    }
}
