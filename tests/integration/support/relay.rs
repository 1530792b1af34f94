//! A recording relay: a scripted server (`hostile_server.rs`, TLS on loopback, or on a
//! named [`Bind`] with `start_on`, with a test-CA certificate) in front of a real one. Each request is recorded (with its
//! `Authorization`), forwarded with its `Accept` and `Authorization` to the real server, and
//! the real answer is sent back, after `edit` (e.g. a rewritten challenge). Used where a
//! real server's own log lacks what a test must assert: distribution's access log has no
//! request headers.

use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::hostile_server::{Flow, Out, Seen, Server, Transport};
use super::http;
use super::named::Bind;

/// TLS identity for 127.0.0.1 and localhost from the test CA (the one `check` trusts).
pub fn loopback_tls() -> Transport {
    let (cert_pem, key_pem) = super::make_cert(
        &["127.0.0.1", "localhost"],
        SystemTime::now() + Duration::from_secs(86_400),
    );
    Transport::Tls { cert_pem, key_pem }
}

/// Forward `seen` to `base` (trusting `ca`) with its `Accept` and `Authorization`.
pub fn forward(base: &str, ca: &Path, seen: &Seen) -> io::Result<http::Response> {
    let mut headers = Vec::new();
    for name in ["Accept", "Authorization"] {
        if let Some(v) = seen.header(name) {
            headers.push((name, v));
        }
    }
    http::request(base, Some(ca), &seen.method, &seen.target, &headers, &[])
}

/// Copy `resp` onto the wire (its own `Content-Length`, also for HEAD).
pub fn pass_back(out: &mut Out, resp: &http::Response) -> io::Result<Flow> {
    let mut headers: Vec<(&str, &str)> = resp
        .headers
        .iter()
        .filter(|(k, _)| {
            !["connection", "transfer-encoding", "content-length"]
                .iter()
                .any(|h| k.eq_ignore_ascii_case(h))
        })
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let length = resp
        .header("content-length")
        .map(str::to_string)
        .unwrap_or_else(|| resp.body.len().to_string());
    headers.push(("Content-Length", &length));
    out.reply(resp.status, &headers, &resp.body)?;
    Ok(Flow::KeepAlive)
}

/// Start a relay to `base` (`https://127.0.0.1:PORT`) whose answers pass through `edit`.
pub fn start(base: &str, edit: impl Fn(&mut http::Response) + Send + Sync + 'static) -> Server {
    start_with(&Bind::loopback(), loopback_tls(), base, edit)
}

/// [`start`] on `bind`, with a certificate for its name.
pub fn start_on(
    bind: &Bind,
    base: &str,
    edit: impl Fn(&mut http::Response) + Send + Sync + 'static,
) -> Server {
    start_with(bind, bind.tls(), base, edit)
}

fn start_with(
    bind: &Bind,
    tls: Transport,
    base: &str,
    edit: impl Fn(&mut http::Response) + Send + Sync + 'static,
) -> Server {
    let base = base.to_string();
    let ca = super::fixture().ca_file.clone();
    Server::start_on(bind, tls, move |seen: &Seen, out: &mut Out| {
        let mut resp = forward(&base, &ca, seen)?;
        edit(&mut resp);
        pass_back(out, &resp)
    })
}
