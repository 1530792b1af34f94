//! A deliberately small blocking HTTP/1.1 client (plain or TLS via rustls),
//! used to seed the registries and for raw probes in tests. One request per
//! connection (`Connection: close`), so the read side is trivial.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// First header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `Authorization: Basic ...` value.
pub fn basic_auth(user: &str, pass: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
    )
}

/// Perform one request. `base` is `http://host:port` or `https://host:port`;
/// `path` starts with `/` (or is an absolute URL on the same base).
/// `ca_file` (PEM) is the only trust root for https.
pub fn request(
    base: &str,
    ca_file: Option<&Path>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> io::Result<Response> {
    let (scheme, host) = base
        .split_once("://")
        .ok_or_else(|| io::Error::other(format!("bad base url {base}")))?;
    let host = host.trim_end_matches('/');
    let path = if let Some(rest) = path.strip_prefix(base) {
        if rest.is_empty() { "/" } else { rest }
    } else {
        path
    };

    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: pullcheck-test-harness\r\nConnection: close\r\n"
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || matches!(method, "PUT" | "POST" | "PATCH") {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);

    let tcp = TcpStream::connect(host)?;
    tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
    tcp.set_write_timeout(Some(Duration::from_secs(20)))?;
    let raw = match scheme {
        "http" => exchange(tcp, &bytes)?,
        "https" => {
            let config = client_config(ca_file)?;
            let host_only = host_without_port(host);
            let name = rustls_pki_types::ServerName::try_from(host_only.to_string())
                .map_err(|e| io::Error::other(format!("server name {host_only}: {e}")))?;
            let conn = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
            exchange(rustls::StreamOwned::new(conn, tcp), &bytes)?
        }
        other => return Err(io::Error::other(format!("unsupported scheme {other}"))),
    };
    parse_response(&raw, method == "HEAD")
}

fn host_without_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((h, _)) => h,
        None => host,
    }
}

fn exchange<S: Read + Write>(mut s: S, bytes: &[u8]) -> io::Result<Vec<u8>> {
    s.write_all(bytes)?;
    s.flush()?;
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            // Peer closed without close_notify: everything it sent is in `out`.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !out.is_empty() => break,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

pub fn client_config(ca_file: Option<&Path>) -> io::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = ca_file {
        let pem = std::fs::read_to_string(ca)?;
        for der in super::tls::pem_blocks(&pem, "CERTIFICATE") {
            roots
                .add(rustls_pki_types::CertificateDer::from(der))
                .map_err(io::Error::other)?;
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(io::Error::other)?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

fn parse_response(raw: &[u8], head: bool) -> io::Result<Response> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| io::Error::other(format!("incomplete response ({} bytes)", raw.len())))?;
    let head_text = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head_text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("bad status line {status_line:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let rest = &raw[end + 4..];
    let mut resp = Response {
        status,
        headers,
        body: Vec::new(),
    };
    if head || status == 204 || status == 304 || (100..200).contains(&status) {
        return Ok(resp);
    }
    if resp
        .header("Transfer-Encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        resp.body = dechunk(rest)?;
    } else if let Some(len) = resp
        .header("Content-Length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        resp.body = rest[..len.min(rest.len())].to_vec();
    } else {
        resp.body = rest.to_vec();
    }
    Ok(resp)
}

fn dechunk(mut data: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| io::Error::other("bad chunk header"))?;
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| io::Error::other(format!("bad chunk size {size_text:?}")))?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size {
            return Err(io::Error::other("truncated chunk"));
        }
        out.extend_from_slice(&data[..size]);
        data = data.get(size + 2..).unwrap_or_default();
    }
}
