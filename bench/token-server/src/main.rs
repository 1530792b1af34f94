//! Benchmark token server: the Docker registry "token" auth flow over HTTPS on loopback.
//!
//! distribution 2.8 (Debian's docker-registry) accepts ES256 JWTs whose `x5c` header
//! carries a certificate chaining to its `rootcertbundle`; here the signing certificate is
//! self-signed and is itself the bundle. Policy: anyone (anonymous or any credentials) may
//! pull every repository; push is never granted.
//!
//! One line per request goes to the log file (`method status service scope...`), so
//! bench/run.sh can count token requests per check.
//!
//! Usage: bench-token-server --tls-cert F --tls-key F --sign-cert F --sign-key F
//!        --issuer NAME --port-file F --log F
//! Keys are PKCS#8 PEM (the signing key EC P-256). Listens on 127.0.0.1, ephemeral port.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

struct Server {
    tls: Arc<rustls::ServerConfig>,
    signer: EcdsaKeyPair,
    x5c: String,
    issuer: String,
    rng: SystemRandom,
    log: Mutex<std::fs::File>,
}

fn main() {
    let mut opts: HashMap<String, String> = HashMap::new();
    let mut args = std::env::args().skip(1);
    while let Some(k) = args.next() {
        let v = args.next().unwrap_or_else(|| die(&format!("{k} needs a value")));
        opts.insert(k.trim_start_matches('-').to_string(), v);
    }
    let opt = |k: &str| {
        opts.get(k)
            .cloned()
            .unwrap_or_else(|| die(&format!("missing --{k}")))
    };

    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(opt("tls-cert"))
        .unwrap_or_else(|e| die(&format!("tls-cert: {e}")))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| die(&format!("tls-cert: {e}")));
    let key = PrivateKeyDer::from_pem_file(opt("tls-key"))
        .unwrap_or_else(|e| die(&format!("tls-key: {e}")));
    let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap_or_else(|e| die(&format!("TLS identity: {e}")));

    let sign_key = PrivatePkcs8KeyDer::from_pem_file(opt("sign-key"))
        .unwrap_or_else(|e| die(&format!("sign-key (PKCS#8 PEM): {e}")));
    let rng = SystemRandom::new();
    let signer =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, sign_key.secret_pkcs8_der(), &rng)
            .unwrap_or_else(|e| die(&format!("sign-key is not EC P-256: {e}")));
    let sign_cert = CertificateDer::from_pem_file(opt("sign-cert"))
        .unwrap_or_else(|e| die(&format!("sign-cert: {e}")));
    let x5c = base64::engine::general_purpose::STANDARD.encode(sign_cert.as_ref());

    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(opt("log"))
        .unwrap_or_else(|e| die(&format!("log: {e}")));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| die(&format!("bind: {e}")));
    let port = listener.local_addr().expect("local addr").port();
    std::fs::write(opt("port-file"), format!("{port}\n"))
        .unwrap_or_else(|e| die(&format!("port-file: {e}")));

    let server = Arc::new(Server {
        tls: Arc::new(tls),
        signer,
        x5c,
        issuer: opt("issuer"),
        rng,
        log: Mutex::new(log),
    });
    for stream in listener.incoming().flatten() {
        let s = server.clone();
        std::thread::spawn(move || {
            let _ = s.serve(stream);
        });
    }
}

fn die(msg: &str) -> ! {
    eprintln!("bench-token-server: {msg}");
    std::process::exit(2)
}

impl Server {
    /// One connection; keep-alive is honoured so clients that reuse connections can.
    fn serve(&self, tcp: TcpStream) -> io::Result<()> {
        tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
        tcp.set_nodelay(true)?;
        let conn = rustls::ServerConnection::new(self.tls.clone()).map_err(io::Error::other)?;
        let mut s = rustls::StreamOwned::new(conn, tcp);
        let mut buf: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let end = loop {
                if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break p;
                }
                let n = s.read(&mut chunk)?;
                if n == 0 || buf.len() > 64 * 1024 {
                    return Ok(());
                }
                buf.extend_from_slice(&chunk[..n]);
            };
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let mut lines = head.split("\r\n");
            let request_line = lines.next().unwrap_or_default().to_string();
            let mut headers = HashMap::new();
            for l in lines {
                if let Some((k, v)) = l.split_once(':') {
                    headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                }
            }
            let want: usize = headers
                .get("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
                .min(1 << 20);
            buf.drain(..end + 4);
            while buf.len() < want {
                let n = s.read(&mut chunk)?;
                if n == 0 {
                    return Ok(());
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body: Vec<u8> = buf.drain(..want).collect();
            let close = headers
                .get("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("close"));

            let mut parts = request_line.split_whitespace();
            let method = parts.next().unwrap_or_default();
            let target = parts.next().unwrap_or_default();
            let (path, query) = target.split_once('?').unwrap_or((target, ""));
            let params = match method {
                "GET" => form(query),
                "POST" => form(&String::from_utf8_lossy(&body)),
                _ => Vec::new(),
            };
            let (status, reply) = if path != "/token" {
                (404, r#"{"errors":[{"code":"NOT_FOUND","message":"not found"}]}"#.to_string())
            } else if method == "GET" || method == "POST" {
                let service = params
                    .iter()
                    .find(|(k, _)| k == "service")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                let scopes: Vec<String> = params
                    .iter()
                    .filter(|(k, _)| k == "scope")
                    .flat_map(|(_, v)| v.split(' ').map(str::to_string).collect::<Vec<_>>())
                    .filter(|s| !s.is_empty())
                    .collect();
                let grant = params.iter().find(|(k, _)| k == "grant_type").map(|(_, v)| v.as_str());
                if method == "POST" && grant != Some("password") {
                    self.record(method, 400, &service, &scopes);
                    (400, r#"{"error":"unsupported_grant_type"}"#.to_string())
                } else {
                    self.record(method, 200, &service, &scopes);
                    (200, self.token(&service, &scopes))
                }
            } else {
                (405, "{}".to_string())
            };
            let reason = match status {
                200 => "OK",
                400 => "Bad Request",
                404 => "Not Found",
                _ => "Method Not Allowed",
            };
            let out = format!(
                "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n{reply}",
                reply.len(),
                if close { "Connection: close\r\n" } else { "" }
            );
            s.write_all(out.as_bytes())?;
            s.flush()?;
            if close {
                s.conn.send_close_notify();
                let _ = s.flush();
                return Ok(());
            }
        }
    }

    fn record(&self, method: &str, status: u16, service: &str, scopes: &[String]) {
        let mut f = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(f, "{method} {status} {service} {}", scopes.join(" "));
    }

    /// A signed token granting pull on every repository scope asked for.
    fn token(&self, service: &str, scopes: &[String]) -> String {
        let mut access = Vec::new();
        for scope in scopes {
            let mut it = scope.splitn(3, ':');
            let (Some(kind), Some(name), Some(actions)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if kind.split('(').next() != Some("repository") {
                continue;
            }
            if actions.split(',').any(|a| a == "pull" || a == "*") {
                access.push(format!(
                    r#"{{"type":"repository","name":{},"actions":["pull"]}}"#,
                    json_str(name)
                ));
            }
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut jti = [0u8; 12];
        self.rng.fill(&mut jti).expect("random");
        let jti: String = jti.iter().map(|b| format!("{b:02x}")).collect();
        let claims = format!(
            r#"{{"iss":{},"sub":"","aud":{},"exp":{},"nbf":{},"iat":{now},"jti":"{jti}","access":[{}]}}"#,
            json_str(&self.issuer),
            json_str(service),
            now + 3600,
            now.saturating_sub(5),
            access.join(",")
        );
        let header = format!(r#"{{"typ":"JWT","alg":"ES256","x5c":["{}"]}}"#, self.x5c);
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let input = format!("{}.{}", b64.encode(header), b64.encode(claims));
        let sig = self.signer.sign(&self.rng, input.as_bytes()).expect("sign");
        let jwt = format!("{input}.{}", b64.encode(sig.as_ref()));
        format!(r#"{{"token":"{jwt}","access_token":"{jwt}","expires_in":3600}}"#)
    }
}

/// `application/x-www-form-urlencoded` pairs.
fn form(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (unescape(k), unescape(v))
        })
        .collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}
