//! A Docker-registry token server (the "token" auth flow) over HTTPS on
//! loopback (or a named [`Bind`], `TokenServer::start_on`). It signs ES256 JWTs with a self-signed certificate that is the
//! registry's `rootcertbundle`, carried in the JWT header's `x5c`.
//!
//! Policy: anonymous may pull everything except `private/*`; `alice` may pull
//! everything; `bob` authenticates but gets nothing on `private/*`. A wrong
//! password (or unknown user) gets 401 from the token server itself.
//!
//! Besides the GET with HTTP Basic, it answers the OAuth2 POST form (distribution
//! `docs/spec/auth/oauth.md`) with `grant_type=password` or `grant_type=refresh_token`;
//! the only refresh token it knows is alice's ([`super::ALICE_REFRESH_TOKEN`]).

use std::io::{self, Read, Write};
use std::net::TcpStream;

use super::named::Bind;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};

pub const ISSUER: &str = "pullcheck-test-token-issuer";
const ALICE_USER: &str = "alice";
/// alice and bob with their passwords (`super::ALICE`, `super::BOB`).
pub fn users() -> [(&'static str, &'static str); 2] {
    [*super::ALICE, *super::BOB]
}

/// One request the token server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    /// "GET" or "POST".
    pub method: String,
    /// `service` parameter, if sent.
    pub service: Option<String>,
    /// `scope` parameters, one per scope (POST: split on spaces).
    pub scopes: Vec<String>,
    /// Username from HTTP Basic (GET) or the form (POST); None = anonymous.
    pub user: Option<String>,
    /// Status the token server answered.
    pub status: u16,
    /// The access granted in the token (`repository:<name>:pull` entries).
    pub granted: Vec<String>,
    /// POST: every form field in order, with the values of `password` and
    /// `refresh_token` replaced by `(redacted)`. Empty for a GET.
    pub form: Vec<(String, String)>,
}

pub struct TokenServer {
    pub port: u16,
    /// `https://127.0.0.1:PORT/token` (`https://NAME:PORT/token` on a named [`Bind`])
    pub realm: String,
    log: Mutex<Vec<TokenRequest>>,
    signer: EcdsaKeyPair,
    x5c: String,
    tls: Arc<rustls::ServerConfig>,
}

impl TokenServer {
    /// `tls_cert_pem`/`tls_key_pem`: HTTPS identity; `sign_cert_pem`/`sign_key_pem`:
    /// the JWT signing certificate (EC P-256, PKCS#8 key).
    pub fn start(
        tls_cert_pem: &str,
        tls_key_pem: &str,
        sign_cert_pem: &str,
        sign_key_pem: &str,
    ) -> Arc<TokenServer> {
        TokenServer::start_on(
            &Bind::loopback(),
            tls_cert_pem,
            tls_key_pem,
            sign_cert_pem,
            sign_key_pem,
        )
    }

    /// [`TokenServer::start`] listening on `bind`, its realm named by `bind`'s name.
    pub fn start_on(
        bind: &Bind,
        tls_cert_pem: &str,
        tls_key_pem: &str,
        sign_cert_pem: &str,
        sign_key_pem: &str,
    ) -> Arc<TokenServer> {
        let chain: Vec<rustls_pki_types::CertificateDer<'static>> =
            super::tls::pem_blocks(tls_cert_pem, "CERTIFICATE")
                .into_iter()
                .map(Into::into)
                .collect();
        let key_der = super::tls::pem_blocks(tls_key_pem, "PRIVATE KEY")
            .pop()
            .expect("PKCS#8 TLS key");
        let key = rustls_pki_types::PrivateKeyDer::Pkcs8(key_der.into());
        let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("rustls protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("token server TLS identity");

        let sign_der = super::tls::pem_blocks(sign_key_pem, "PRIVATE KEY")
            .pop()
            .expect("PKCS#8 signing key");
        let rng = ring::rand::SystemRandom::new();
        let signer = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &sign_der, &rng)
            .expect("EC P-256 PKCS#8 signing key");
        let cert_der = super::tls::pem_blocks(sign_cert_pem, "CERTIFICATE")
            .pop()
            .expect("signing certificate");
        let x5c = base64::engine::general_purpose::STANDARD.encode(cert_der);

        let listener = bind.listen();
        let port = listener.local_addr().unwrap().port();
        let server = Arc::new(TokenServer {
            port,
            realm: format!("https://{}/token", bind.host(port)),
            log: Mutex::new(Vec::new()),
            signer,
            x5c,
            tls: Arc::new(tls),
        });
        let srv = server.clone();
        std::thread::Builder::new()
            .name("harness-token-server".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    let srv = srv.clone();
                    std::thread::spawn(move || {
                        let _ = srv.serve(stream);
                    });
                }
            })
            .expect("start token server thread");
        server
    }

    /// Every request answered so far (including refused ones).
    pub fn log(&self) -> Vec<TokenRequest> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn count(&self) -> usize {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Requests for one `service` (i.e. one registry).
    pub fn count_for_service(&self, service: &str) -> usize {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|r| r.service.as_deref() == Some(service))
            .count()
    }

    fn serve(&self, tcp: TcpStream) -> io::Result<()> {
        tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
        tcp.set_write_timeout(Some(Duration::from_secs(10)))?;
        let conn = rustls::ServerConnection::new(self.tls.clone()).map_err(io::Error::other)?;
        let mut s = rustls::StreamOwned::new(conn, tcp);

        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let header_end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p;
            }
            let n = s.read(&mut chunk)?;
            if n == 0 || buf.len() > 64 * 1024 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
        let mut lines = head.split("\r\n");
        let request_line = lines.next().unwrap_or_default().to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let mut body = buf[header_end + 4..].to_vec();
        let want = header("content-length")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
        while body.len() < want.min(1 << 20) {
            let n = s.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }

        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_string();
        let target = parts.next().unwrap_or_default().to_string();
        let url = url::Url::parse(&format!("https://token.invalid{target}"))
            .unwrap_or_else(|_| url::Url::parse("https://token.invalid/").unwrap());

        let (status, extra_headers, reply) = if url.path() != "/token" {
            (
                404,
                vec![],
                r#"{"errors":[{"code":"NOT_FOUND","message":"not found"}]}"#.to_string(),
            )
        } else if method == "GET" {
            let service = url
                .query_pairs()
                .find(|(k, _)| k == "service")
                .map(|(_, v)| v.into_owned());
            let scopes: Vec<String> = url
                .query_pairs()
                .filter(|(k, _)| k == "scope")
                .flat_map(|(_, v)| v.split(' ').map(str::to_string).collect::<Vec<_>>())
                .filter(|s| !s.is_empty())
                .collect();
            let creds = header("authorization").and_then(|v| decode_basic(&v));
            self.answer(Asked::get(service, scopes), creds)
        } else if method == "POST" {
            let form: Vec<(String, String)> = url::form_urlencoded::parse(&body)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
            let service = field("service");
            let scopes: Vec<String> = field("scope")
                .unwrap_or_default()
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            let shown: Vec<(String, String)> = form
                .iter()
                .map(|(k, v)| match k.as_str() {
                    "password" | "refresh_token" => (k.clone(), "(redacted)".to_string()),
                    _ => (k.clone(), v.clone()),
                })
                .collect();
            match field("grant_type").as_deref() {
                Some("password") => {
                    let creds = Some((
                        field("username").unwrap_or_default(),
                        field("password").unwrap_or_default(),
                    ));
                    self.answer(Asked::post(service, scopes, shown), creds)
                }
                Some("refresh_token") => {
                    // A known refresh token stands for its user; any other is refused
                    // like a wrong password.
                    let token = field("refresh_token").unwrap_or_default();
                    let creds = if token == *super::ALICE_REFRESH_TOKEN {
                        (ALICE_USER.to_string(), super::ALICE.1.to_string())
                    } else {
                        ("(unknown refresh token)".to_string(), String::new())
                    };
                    self.answer(Asked::post(service, scopes, shown), Some(creds))
                }
                _ => {
                    self.record(Asked::post(service, scopes, shown), None, 400, vec![]);
                    (
                        400,
                        vec![],
                        r#"{"error":"unsupported_grant_type"}"#.to_string(),
                    )
                }
            }
        } else {
            (405, vec![], "method not allowed\n".to_string())
        };

        let reason = match status {
            200 => "OK",
            400 => "Bad Request",
            401 => "Unauthorized",
            404 => "Not Found",
            _ => "Method Not Allowed",
        };
        let mut out = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
            reply.len()
        );
        for (k, v) in extra_headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        out.push_str(&reply);
        s.write_all(out.as_bytes())?;
        s.conn.send_close_notify();
        s.flush()?;
        let _ = s.sock.shutdown(std::net::Shutdown::Write);
        Ok(())
    }

    fn record(&self, asked: Asked, user: Option<String>, status: u16, granted: Vec<String>) {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(TokenRequest {
                method: asked.method.to_string(),
                service: asked.service,
                scopes: asked.scopes,
                user,
                status,
                granted,
                form: asked.form,
            });
    }

    fn answer(
        &self,
        asked: Asked,
        creds: Option<(String, String)>,
    ) -> (u16, Vec<(String, String)>, String) {
        let post = asked.method == "POST";
        let (service, scopes) = (asked.service.clone(), asked.scopes.clone());
        let user = match &creds {
            None => None,
            Some((u, p)) => {
                if users().iter().any(|(uu, pp)| uu == u && pp == p) {
                    Some(u.clone())
                } else {
                    self.record(asked, Some(u.clone()), 401, vec![]);
                    return (
                        401,
                        vec![("WWW-Authenticate".into(), "Basic realm=\"pullcheck-token\"".into())],
                        r#"{"errors":[{"code":"UNAUTHORIZED","message":"invalid username or password"}]}"#.into(),
                    );
                }
            }
        };

        // Intersect requested access with the policy: pull only.
        let mut access = Vec::new();
        let mut granted = Vec::new();
        for scope in &scopes {
            let mut it = scope.splitn(3, ':');
            let (Some(kind), Some(name), Some(actions)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            let kind = kind.split('(').next().unwrap_or(kind);
            if kind != "repository" {
                continue;
            }
            let wants_pull = actions.split(',').any(|a| a == "pull" || a == "*");
            let may = match user.as_deref() {
                None => !name.starts_with("private/"),
                Some("alice") => true,
                Some(_) => !name.starts_with("private/"),
            };
            if wants_pull && may {
                access.push(
                    serde_json::json!({"type": "repository", "name": name, "actions": ["pull"]}),
                );
                granted.push(format!("repository:{name}:pull"));
            }
        }

        let now = SystemTime::now();
        let iat = super::time::unix_secs(now);
        let mut jti = [0u8; 12];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut jti).unwrap();
        let claims = serde_json::json!({
            "iss": ISSUER,
            "sub": user.clone().unwrap_or_default(),
            "aud": service.clone().unwrap_or_default(),
            "exp": iat + 300,
            "nbf": iat - 5,
            "iat": iat,
            "jti": jti.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "access": access,
        });
        let header = serde_json::json!({"typ": "JWT", "alg": "ES256", "x5c": [self.x5c]});
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let signing_input = format!(
            "{}.{}",
            b64.encode(serde_json::to_vec(&header).unwrap()),
            b64.encode(serde_json::to_vec(&claims).unwrap())
        );
        let sig = self
            .signer
            .sign(&ring::rand::SystemRandom::new(), signing_input.as_bytes())
            .expect("sign JWT");
        let jwt = format!("{signing_input}.{}", b64.encode(sig.as_ref()));
        let issued_at = super::time::rfc3339(now);
        let body = if post {
            serde_json::json!({"access_token": jwt, "expires_in": 300, "issued_at": issued_at, "scope": granted.join(" ")})
        } else {
            serde_json::json!({"token": jwt, "access_token": jwt, "expires_in": 300, "issued_at": issued_at})
        };
        self.record(asked, user, 200, granted);
        (200, vec![], body.to_string())
    }
}

/// What a request asked for, before the server decides.
struct Asked {
    method: &'static str,
    service: Option<String>,
    scopes: Vec<String>,
    form: Vec<(String, String)>,
}

impl Asked {
    fn get(service: Option<String>, scopes: Vec<String>) -> Asked {
        Asked {
            method: "GET",
            service,
            scopes,
            form: Vec::new(),
        }
    }

    fn post(service: Option<String>, scopes: Vec<String>, form: Vec<(String, String)>) -> Asked {
        Asked {
            method: "POST",
            service,
            scopes,
            form,
        }
    }
}

fn decode_basic(value: &str) -> Option<(String, String)> {
    let (scheme, b64) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}
