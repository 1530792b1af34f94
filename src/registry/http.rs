//! One HTTP exchange: guard check, redirects followed hop by hop, deadline, size-capped
//! body, failure classification. Retries live in [`super::retry`]; authentication is the
//! caller's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue, Method, header};
use url::Url;

use super::challenge::{self, Challenge};
use super::error::{Failure, RegistryError, parse_diagnostics, redact_url};
use super::guard::{AddrClass, Destination, DnsError, Guard, GuardError, classify as class_of};
use super::limits;
use super::tls::{ClientPool, TlsProfile};

/// A response with its body already read (empty for HEAD).
#[derive(Debug, Clone)]
pub(crate) struct Response {
    /// HTTP status.
    pub status: u16,
    /// Response headers.
    pub headers: HeaderMap,
    /// Body bytes, at most the request's cap.
    pub body: Vec<u8>,
    /// The class of the address that answered (after redirects): what a realm or a
    /// redirect it announces may be on ([`Destination::Referral`]).
    pub from: AddrClass,
}

impl Response {
    /// A header as text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The challenges in `WWW-Authenticate`.
    pub(crate) fn challenges(&self) -> Vec<Challenge> {
        let lines: Vec<&str> = self
            .headers
            .get_all(header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        challenge::parse_headers(&lines)
    }

    /// `Retry-After` in seconds (the HTTP-date form is ignored).
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        self.header("retry-after")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs)
    }
}

/// One request to send.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// HEAD or GET (POST for the OAuth2 token form, [`Http::send_form`]).
    pub method: Method,
    /// Full URL.
    pub url: Url,
    /// Extra headers (Accept, configured hosts.toml headers).
    pub headers: HeaderMap,
    /// `Authorization` value, if any. Never logged.
    pub authorization: Option<HeaderValue>,
    /// Which client to use.
    pub tls: TlsProfile,
    /// Who chose the URL: decides which address classes the first hop may reach.
    pub destination: Destination,
    /// Body cap in bytes for 2xx responses; error bodies are capped at
    /// [`limits::MAX_ERROR_BODY_BYTES`].
    pub body_limit: usize,
    /// When a 2xx body exceeds `body_limit`, keep what fits instead of failing: for
    /// responses whose body nobody needs (the `/v2/` ping), so a huge or endless one is
    /// not mistaken for an oversized manifest.
    pub truncate_body: bool,
}

/// Sends requests; counts them (for tests and metrics).
pub(crate) struct Http {
    pool: ClientPool,
    guard: Guard,
    request_timeout: Duration,
    sent: AtomicU64,
}

impl Http {
    /// Wrap a client pool.
    pub(crate) fn new(pool: ClientPool, guard: Guard, request_timeout: Duration) -> Arc<Http> {
        Arc::new(Http {
            pool,
            guard,
            request_timeout,
            sent: AtomicU64::new(0),
        })
    }

    /// The guard every request goes through.
    pub(crate) fn guard(&self) -> &Guard {
        &self.guard
    }

    /// Requests sent so far (every attempt counts).
    pub(crate) fn requests_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Send once, following redirects. A non-2xx status is an `Ok` response: the caller
    /// decides. `Err` means no usable response.
    ///
    /// Redirects are followed here rather than by reqwest so that every hop is checked for
    /// the classes its referrer allows: the first hop for `req.destination`, each later one
    /// as a referral from the address that sent the redirect. At most
    /// [`limits::MAX_REDIRECTS`] requests make one chain, as Go's client (containerd's)
    /// stops after ten. `Authorization` is dropped on a hop to another host or port.
    pub(crate) async fn send(
        &self,
        req: &Request,
        deadline: Instant,
    ) -> Result<Response, RegistryError> {
        self.send_with_body(req, None, deadline).await
    }

    /// [`Http::send`] with an `application/x-www-form-urlencoded` body (the OAuth2 token
    /// POST). The body goes with every hop that is still a POST (a 307/308 redirect) and is
    /// dropped when a 303 turns the request into a GET.
    pub(crate) async fn send_form(
        &self,
        req: &Request,
        form: &str,
        deadline: Instant,
    ) -> Result<Response, RegistryError> {
        self.send_with_body(req, Some(form), deadline).await
    }

    async fn send_with_body(
        &self,
        req: &Request,
        form: Option<&str>,
        deadline: Instant,
    ) -> Result<Response, RegistryError> {
        let chain = async {
            let mut hop = req.clone();
            for _ in 0..limits::MAX_REDIRECTS {
                let body = form.filter(|_| hop.method == Method::POST);
                let resp = self.hop(&hop, body).await?;
                match next_hop(&hop, &resp) {
                    Some(next) => hop = next.map_err(|f| transport(&hop, f))?,
                    None => return Ok(resp),
                }
            }
            Err(transport(
                &hop,
                Failure::Redirect("too many redirects".into()),
            ))
        };
        self.within(req, deadline, chain).await
    }

    /// Run `work` (one exchange of `req`, redirects included) within the request timeout
    /// and the overall deadline, whichever ends first.
    pub(crate) async fn within<T>(
        &self,
        req: &Request,
        deadline: Instant,
        work: impl std::future::Future<Output = Result<T, RegistryError>>,
    ) -> Result<T, RegistryError> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(transport(req, Failure::Timeout));
        }
        match tokio::time::timeout(remaining.min(self.request_timeout), work).await {
            Ok(r) => r,
            Err(_) => Err(transport(req, Failure::Timeout)),
        }
    }

    /// One request of a chain, redirects not followed.
    pub(crate) async fn send_hop(&self, req: &Request) -> Result<Response, RegistryError> {
        self.hop(req, None).await
    }

    async fn hop(&self, req: &Request, form: Option<&str>) -> Result<Response, RegistryError> {
        let method = req.method.to_string();
        let shown = redact_url(&req.url);
        let fail = |failure: Failure| RegistryError::Transport {
            method: method.clone(),
            url: shown.clone(),
            failure,
        };
        let allowed = self.guard.allowed(req.destination);
        self.guard
            .admit_url(&req.url, allowed)
            .map_err(|e| fail(Failure::Guard(e)))?;
        let client = self
            .pool
            .client(&req.tls, allowed)
            .map_err(|e| fail(Failure::Other(e.to_string())))?;
        let mut builder = client
            .request(req.method.clone(), req.url.clone())
            .headers(req.headers.clone());
        if let Some(a) = &req.authorization {
            builder = builder.header(header::AUTHORIZATION, a.clone());
        }
        if let Some(form) = form {
            builder = builder
                .header(
                    header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded; charset=utf-8",
                )
                .body(form.to_owned());
        }
        self.sent.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(method = %req.method, url = %shown, "request");
        let mut resp = builder.send().await.map_err(|e| fail(classify(&e)))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let from = resp
            .remote_addr()
            .map_or(AddrClass::Ordinary, |a| class_of(a.ip()));
        let ok = (200..300).contains(&status);
        let cap = if ok {
            req.body_limit
        } else {
            limits::MAX_ERROR_BODY_BYTES
        };
        // Only a 2xx body that is needed whole can be too large.
        let strict = ok && !req.truncate_body;
        let mut body = Vec::new();
        if req.method != Method::HEAD {
            if let Some(len) = resp.content_length()
                && len > cap as u64
                && strict
            {
                return Err(fail(Failure::TooLarge(cap)));
            }
            while let Some(chunk) = resp.chunk().await.map_err(|e| fail(classify(&e)))? {
                if body.len() + chunk.len() > cap {
                    if strict {
                        return Err(fail(Failure::TooLarge(cap)));
                    }
                    // Error and ping bodies are only diagnostics: keep what fits.
                    body.extend_from_slice(&chunk[..cap - body.len()]);
                    break;
                }
                body.extend_from_slice(&chunk);
            }
        }
        tracing::debug!(method = %req.method, url = %shown, status, "response");
        if speaks_https(req, status, &headers) {
            let host = req.url.host_str().unwrap_or_default();
            let host = match req.url.port() {
                Some(p) => format!("{host}:{p}"),
                None => host.to_string(),
            };
            return Err(fail(Failure::HttpsOnly(host)));
        }
        Ok(Response {
            status,
            headers,
            body,
            from,
        })
    }

    /// Turn a non-success response into a [`RegistryError::Status`].
    pub(crate) fn status_error(
        req: &Request,
        resp: &Response,
        credential_sent: bool,
        from_token_endpoint: bool,
    ) -> RegistryError {
        RegistryError::Status {
            method: req.method.to_string(),
            url: redact_url(&req.url),
            status: resp.status,
            diagnostics: parse_diagnostics(&resp.body),
            retry_after: resp.retry_after(),
            credential_sent,
            from_token_endpoint,
        }
    }
}

/// The request for the hop a redirect answer points to, `None` when `resp` is not a
/// redirect that can be followed (no usable `Location`: the caller sees the 3xx), or the
/// reason the hop is refused. 303 turns the request into a GET; HEAD stays HEAD otherwise.
pub(crate) fn next_hop(req: &Request, resp: &Response) -> Option<Result<Request, Failure>> {
    if !matches!(resp.status, 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    let next = req.url.join(resp.header("location")?).ok()?;
    if req.url.scheme() == "https" && next.scheme() != "https" {
        return Some(Err(Failure::Guard(GuardError::new(format!(
            "redirect from https to {}",
            redact_url(&next)
        )))));
    }
    let same_origin = next.host_str() == req.url.host_str()
        && next.port_or_known_default() == req.url.port_or_known_default();
    Some(Ok(Request {
        method: if resp.status == 303 {
            Method::GET
        } else {
            req.method.clone()
        },
        url: next,
        authorization: req.authorization.clone().filter(|_| same_origin),
        destination: Destination::Referral { from: resp.from },
        ..req.clone()
    }))
}

/// True when a plain-HTTP request reached a port that speaks HTTPS: a 400 that no registry
/// sent (no `Docker-Distribution-API-Version`, which distribution sets on every answer,
/// errors included) — Go's TLS servers answer "Client sent an HTTP request to an HTTPS
/// server", nginx "The plain HTTP request was sent to HTTPS port". Without this the 400
/// would read as the registry refusing the request, a false "not found".
fn speaks_https(req: &Request, status: u16, headers: &HeaderMap) -> bool {
    req.url.scheme() == "http"
        && status == 400
        && !headers.contains_key("docker-distribution-api-version")
}

/// A transport failure of `req`, for messages: method and redacted URL.
fn transport(req: &Request, failure: Failure) -> RegistryError {
    RegistryError::Transport {
        method: req.method.to_string(),
        url: redact_url(&req.url),
        failure,
    }
}

/// What an untrusted registry certificate's message tells the user to do.
const REGISTRY_CA_HINT: &str = "pass its CA with --ca-file or hosts.toml ca";

/// Map a reqwest error of a registry request to a [`Failure`].
fn classify(err: &reqwest::Error) -> Failure {
    classify_transport(err, REGISTRY_CA_HINT)
}

/// Map a reqwest error to a [`Failure`] by walking its source chain: the one
/// classification of transport failures, for registry and Kubernetes API requests alike.
/// `ca_hint` ends the message of an untrusted certificate (which flag holds the CA).
pub(crate) fn classify_transport(err: &reqwest::Error, ca_hint: &str) -> Failure {
    if err.is_timeout() {
        return Failure::Timeout;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    let mut io_kind = None;
    while let Some(e) = source {
        if let Some(d) = e.downcast_ref::<DnsError>() {
            return Failure::Dns(format!("{} ({})", d.host, d.message));
        }
        if let Some(g) = e.downcast_ref::<GuardError>() {
            return Failure::Guard(g.clone());
        }
        if let Some(t) = e.downcast_ref::<rustls::Error>() {
            if let (true, Some(host)) = (is_plain_http(t), err.url().map(host_port)) {
                return Failure::PlainHttp(host);
            }
            return Failure::Tls(describe_tls(t, ca_hint));
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            io_kind.get_or_insert(io.kind());
            // io::Error::source() skips the wrapped error itself: descend into it.
            if let Some(inner) = io.get_ref() {
                source = Some(inner as &(dyn std::error::Error + 'static));
                continue;
            }
        }
        source = e.source();
    }
    if err.is_redirect() {
        return Failure::Redirect(err.to_string());
    }
    if let Some(kind) = io_kind {
        return Failure::Connect(kind.to_string());
    }
    if err.is_connect() {
        return Failure::Connect(innermost(err));
    }
    Failure::Other(innermost(err))
}

fn innermost(err: &(dyn std::error::Error + 'static)) -> String {
    let mut last = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        last = e.to_string();
        source = e.source();
    }
    last
}

/// A plain-HTTP server's answer to a ClientHello starts with `HTTP/1.`: its first byte, `H`
/// (0x48), is no TLS record type, which rustls reports as an invalid content type.
fn is_plain_http(e: &rustls::Error) -> bool {
    matches!(
        e,
        rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)
    )
}

/// `HOST:PORT` as `--insecure-registry` and hosts.toml spell it (the port only when given).
fn host_port(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

fn describe_tls(e: &rustls::Error, ca_hint: &str) -> String {
    use rustls::CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(C::UnknownIssuer) => {
            format!("certificate not trusted (unknown issuer); {ca_hint}")
        }
        rustls::Error::InvalidCertificate(C::NotValidForName) => {
            "certificate is for another name".into()
        }
        rustls::Error::InvalidCertificate(C::NotValidForNameContext {
            expected,
            presented,
        }) => name_mismatch(&expected.to_str(), presented),
        rustls::Error::InvalidCertificate(C::Expired)
        | rustls::Error::InvalidCertificate(C::ExpiredContext { .. }) => {
            "certificate expired".into()
        }
        rustls::Error::InvalidCertificate(C::NotValidYet)
        | rustls::Error::InvalidCertificate(C::NotValidYetContext { .. }) => {
            "certificate not valid yet (is this machine's clock right?)".into()
        }
        rustls::Error::InvalidCertificate(C::InvalidPurpose)
        | rustls::Error::InvalidCertificate(C::InvalidPurposeContext { .. }) => {
            "certificate is not for TLS servers (its extendedKeyUsage lacks serverAuth)".into()
        }
        rustls::Error::InvalidCertificate(C::Other(o)) => match o.0.downcast_ref::<webpki::Error>()
        {
            Some(w) => describe_webpki(w),
            None => format!("certificate refused: {}", o.0),
        },
        rustls::Error::InvalidCertificate(c) => format!("certificate refused: {c:?}"),
        other => other.to_string(),
    }
}

/// The rustls-webpki refusals a self-made CA or server certificate runs into, in words
/// (their `Display` is the variant's name). Go's crypto/x509 accepts X.509 v1 certificates,
/// webpki accepts only v3 (rustls-webpki `src/cert.rs`, `version3`): `openssl x509 -req`
/// without `-extfile` makes v1.
fn describe_webpki(e: &webpki::Error) -> String {
    match e {
        webpki::Error::UnsupportedCertVersion => {
            "certificate is X.509 v1, and only v3 certificates are accepted; reissue it with extensions (openssl x509 -req ... -extfile with subjectAltName)"
                .into()
        }
        webpki::Error::CaUsedAsEndEntity => {
            "certificate is a CA certificate (basicConstraints CA:TRUE) used as the server's own; serve a leaf certificate signed by it"
                .into()
        }
        other => format!("certificate refused: {other:?}"),
    }
}

/// At most this many of a certificate's names are listed in a name-mismatch message.
const MAX_NAMES_SHOWN: usize = 8;

/// "certificate is for another name" with the names the certificate holds and the one asked
/// for. `presented` is rustls-webpki's list of the leaf's subjectAltName entries in its
/// `Debug` form (`DnsName("reg.example")`, `IpAddress(10.0.0.1)`): only those count, the
/// subject's common name is never matched (rustls-webpki `subject_name/dns_name.rs`, as Go's crypto/x509
/// since 1.15).
fn name_mismatch(expected: &str, presented: &[String]) -> String {
    let names: Vec<&str> = presented
        .iter()
        .map(|p| {
            p.strip_prefix("DnsName(\"")
                .and_then(|r| r.strip_suffix("\")"))
                .or_else(|| {
                    p.strip_prefix("IpAddress(")
                        .and_then(|r| r.strip_suffix(')'))
                })
                .unwrap_or(p)
        })
        .collect();
    if names.is_empty() {
        return format!(
            "certificate is for another name: it has no subjectAltName, and the common name is \
not used; reissue it with {expected} in its subjectAltName"
        );
    }
    let mut shown = names
        .iter()
        .take(MAX_NAMES_SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > MAX_NAMES_SHOWN {
        shown.push_str(&format!(" and {} more", names.len() - MAX_NAMES_SHOWN));
    }
    format!(
        "certificate is for another name: it names {shown}, not {expected}; use one of those \
names or reissue the certificate with {expected} in its subjectAltName"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_mismatch_names_the_certificate_names() {
        let e =
            rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForNameContext {
                expected: rustls::pki_types::ServerName::try_from("reg.example").unwrap(),
                presented: vec![
                    "DnsName(\"localhost\")".into(),
                    "IpAddress(127.0.0.1)".into(),
                    "DnsName(\"*.internal.example\")".into(),
                ],
            });
        assert_eq!(
            describe_tls(&e, REGISTRY_CA_HINT),
            "certificate is for another name: it names localhost, 127.0.0.1, *.internal.example, \
not reg.example; use one of those names or reissue the certificate with reg.example in its \
subjectAltName"
        );
        let none =
            rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForNameContext {
                expected: rustls::pki_types::ServerName::try_from("10.0.0.1").unwrap(),
                presented: vec![],
            });
        assert_eq!(
            describe_tls(&none, REGISTRY_CA_HINT),
            "certificate is for another name: it has no subjectAltName, and the common name is \
not used; reissue it with 10.0.0.1 in its subjectAltName"
        );
        let many: Vec<String> = (0..10)
            .map(|i| format!("DnsName(\"n{i}.example\")"))
            .collect();
        assert_eq!(
            name_mismatch("x.example", &many),
            "certificate is for another name: it names n0.example, n1.example, n2.example, \
n3.example, n4.example, n5.example, n6.example, n7.example and 2 more, not x.example; use one \
of those names or reissue the certificate with x.example in its subjectAltName"
        );
    }

    fn request(url: &str, method: Method) -> Request {
        Request {
            method,
            url: Url::parse(url).unwrap(),
            headers: HeaderMap::new(),
            authorization: Some(HeaderValue::from_static("Bearer t")),
            tls: TlsProfile::default(),
            destination: Destination::Registry,
            body_limit: 1024,
            truncate_body: false,
        }
    }

    fn redirect(status: u16, location: &str, from: AddrClass) -> Response {
        let mut headers = HeaderMap::new();
        headers.insert(header::LOCATION, HeaderValue::from_str(location).unwrap());
        Response {
            status,
            headers,
            body: Vec::new(),
            from,
        }
    }

    #[test]
    fn redirects_never_downgrade() {
        let req = request("https://a.example/v2/x/manifests/y", Method::HEAD);
        let resp = redirect(307, "http://a.example/x", AddrClass::Ordinary);
        let err = next_hop(&req, &resp).unwrap().unwrap_err();
        assert_eq!(
            err,
            Failure::Guard(GuardError::new("redirect from https to http://a.example/x"))
        );
    }

    #[test]
    fn a_hop_to_another_host_drops_authorization_and_is_a_referral() {
        let req = request("https://a.example/v2/x/manifests/y", Method::HEAD);
        let resp = redirect(307, "https://b.example/blob?sig=1", AddrClass::Loopback);
        let next = next_hop(&req, &resp).unwrap().unwrap();
        assert_eq!(next.url.as_str(), "https://b.example/blob?sig=1");
        assert_eq!(next.method, Method::HEAD);
        assert!(next.authorization.is_none());
        assert_eq!(
            next.destination,
            Destination::Referral {
                from: AddrClass::Loopback
            }
        );
        // The same host keeps it; a relative Location resolves against the request.
        let same = next_hop(
            &req,
            &redirect(302, "/v2/x/manifests/z", AddrClass::Ordinary),
        )
        .unwrap()
        .unwrap();
        assert_eq!(same.url.as_str(), "https://a.example/v2/x/manifests/z");
        assert!(same.authorization.is_some());
        // Another port is another origin.
        let port = next_hop(
            &req,
            &redirect(308, "https://a.example:8443/x", AddrClass::Ordinary),
        )
        .unwrap()
        .unwrap();
        assert!(port.authorization.is_none());
    }

    #[test]
    fn see_other_becomes_get_and_non_redirects_are_answers() {
        let req = request("https://a.example/v2/x/manifests/y", Method::HEAD);
        let next = next_hop(&req, &redirect(303, "/elsewhere", AddrClass::Ordinary))
            .unwrap()
            .unwrap();
        assert_eq!(next.method, Method::GET);
        assert!(next_hop(&req, &redirect(200, "/x", AddrClass::Ordinary)).is_none());
        let mut no_location = redirect(307, "/x", AddrClass::Ordinary);
        no_location.headers.clear();
        assert!(next_hop(&req, &no_location).is_none());
    }
}
