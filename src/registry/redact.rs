//! URLs as they may appear in messages and logs: the one redaction rule, used by the
//! transport's errors and by the address guard's refusals.

/// Strip userinfo, query and fragment from a URL for messages and logs (the query of a
/// token request can carry nothing secret, but a hostile realm could).
pub(crate) fn redact_url(url: &url::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}
