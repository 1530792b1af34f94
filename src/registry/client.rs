//! The registry client: fetch a manifest's head or body from one endpoint with one
//! credential, authenticating the way the endpoint's challenge asks.
//!
//! Per endpoint, the first manifest request goes out unauthenticated and its answer
//! teaches how the endpoint authenticates (coalesced: a hundred concurrent checks wait for
//! that one instead of each collecting a 401; a 401 without a challenge, as gcr.io sends on
//! real requests, falls back to `GET /v2/`). After that every manifest request carries its
//! `Authorization` up front: a present tag costs one request once the token is known, and
//! a registry without auth one request per image.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use tokio::sync::OnceCell;
use url::Url;

use super::challenge::{Challenge, Scheme};
use super::error::{Failure, RegistryError, is_retryable_status, redact_url};
use super::guard::{AddrClass, Destination, Guard};
use super::hosts::Endpoint;
use super::http::{Http, Request, Response};
use super::limits;
use super::retry::with_retries;
use super::tls::{ClientPool, TlsProfile};
use super::token::{self, TokenCache, TokenKey};
use crate::credentials::Credential;
use crate::manifest;

/// What a successful manifest request told us.
#[derive(Debug, Clone)]
pub struct ManifestResponse {
    /// `Docker-Content-Digest`, if the registry sent one.
    pub digest: Option<String>,
    /// `Content-Type` without parameters.
    pub media_type: Option<String>,
    /// `Content-Length`, if sent.
    pub size: Option<u64>,
    /// The body (GET only).
    pub body: Option<Vec<u8>>,
}

/// One manifest request: what to fetch, from where, with which credential, by when.
#[derive(Debug, Clone)]
pub struct ManifestRequest<'a> {
    /// The endpoint (a mirror or the registry itself).
    pub endpoint: &'a Endpoint,
    /// The repository path on the registry (`library/busybox`).
    pub repository: &'a str,
    /// A tag or a digest.
    pub reference: &'a str,
    /// The `?ns=` value for mirrors: the reference's registry host.
    pub ns: Option<&'a str>,
    /// The token scope (`repository:<path>:pull`).
    pub scope: &'a str,
    /// HEAD or GET.
    pub method: Method,
    /// The credential to authenticate with, if any.
    pub credential: Option<&'a Credential>,
    /// The absolute deadline of the run.
    pub deadline: Instant,
}

/// How an endpoint wants to be authenticated, learned from `GET /v2/`.
#[derive(Debug, Clone)]
enum Auth {
    None,
    Basic,
    /// A bearer challenge, and the class of the address it came from (what its realm may
    /// be on).
    Bearer(Challenge, AddrClass),
}

/// Shared state of all checks in one process: HTTP clients, pings, tokens.
pub struct Registry {
    http: Arc<Http>,
    tokens: TokenCache,
    pings: Mutex<HashMap<String, Arc<OnceCell<Auth>>>>,
}

impl Registry {
    /// Assemble the transport stack.
    pub fn new(
        ca_files: Vec<std::path::PathBuf>,
        guard: Guard,
        request_timeout: Duration,
    ) -> Result<Registry, super::tls::TlsError> {
        let ua = format!("pullcheck/{}", env!("CARGO_PKG_VERSION"));
        let pool = ClientPool::new(ca_files, guard.clone(), ua)?;
        Ok(Registry {
            http: Http::new(pool, guard, request_timeout),
            tokens: TokenCache::default(),
            pings: Mutex::new(HashMap::new()),
        })
    }

    /// Registry requests sent so far (pings and retries included; token requests excluded).
    pub fn requests_sent(&self) -> u64 {
        self.http.requests_sent()
    }

    /// Token fetches so far.
    pub fn token_fetches(&self) -> u64 {
        self.tokens.fetches()
    }

    /// The address guard every request and realm goes through.
    pub fn guard(&self) -> &Guard {
        self.http.guard()
    }

    fn tls(ep: &Endpoint) -> TlsProfile {
        TlsProfile {
            ca_files: ep.ca_files.clone(),
            skip_verify: ep.skip_verify,
        }
    }

    fn base_headers(ep: &Endpoint) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in &ep.headers {
            if let (Ok(k), Ok(v)) = (HeaderName::try_from(k.as_str()), HeaderValue::from_str(v)) {
                h.append(k, v);
            }
        }
        h
    }

    /// Learn how the endpoint authenticates, once per endpoint, coalesced across
    /// concurrent callers. The first caller learns it from its own unauthenticated
    /// manifest request (`probe`), as containerd does, instead of a separate `GET /v2/`:
    /// a registry without auth then costs one request per image, not two. That caller
    /// also gets the probe's response back, to use as the answer when no credential would
    /// change it. A 401 without a usable challenge (gcr.io sends none on the real request)
    /// falls back to the `/v2/` ping.
    async fn learn(
        &self,
        ep: &Endpoint,
        probe: &Request,
        deadline: Instant,
    ) -> Result<(Auth, Option<Response>), RegistryError> {
        let key = ep.base_url();
        let cell = self
            .pings
            .lock()
            .expect("ping lock")
            .entry(key.clone())
            .or_default()
            .clone();
        if let Some(auth) = cell.get() {
            return Ok((auth.clone(), None));
        }
        let mut probed: Option<Response> = None;
        let slot = &mut probed;
        let auth = cell
            .get_or_try_init(|| async move {
                let resp = self.send(probe, deadline).await?;
                let auth = match auth_from(&resp) {
                    Auth::None if resp.status == 401 => self.ping(ep, deadline).await?,
                    learned => learned,
                };
                *slot = Some(resp);
                Ok::<Auth, RegistryError>(auth)
            })
            .await?
            .clone();
        Ok((auth, probed))
    }

    /// `GET /v2/` for its challenge: only when a 401 came without one.
    async fn ping(&self, ep: &Endpoint, deadline: Instant) -> Result<Auth, RegistryError> {
        let key = ep.base_url();
        let url = Url::parse(&format!("{}/", key.trim_end_matches('/'))).map_err(|e| {
            RegistryError::Protocol {
                url: key.clone(),
                message: e.to_string(),
            }
        })?;
        let req = Request {
            method: Method::GET,
            url,
            headers: Self::base_headers(ep),
            authorization: None,
            tls: Self::tls(ep),
            destination: Destination::Registry,
            body_limit: limits::MAX_ERROR_BODY_BYTES,
            // Only the status and the challenge matter.
            truncate_body: true,
        };
        Ok(auth_from(&self.send(&req, deadline).await?))
    }

    /// The `Authorization` header for a request to `ep` for `scope` with `credential`.
    async fn authorization(
        &self,
        ep: &Endpoint,
        auth: &Auth,
        scope: &str,
        credential: Option<&Credential>,
        deadline: Instant,
    ) -> Result<Option<HeaderValue>, RegistryError> {
        let credential = credential.filter(|c| !c.is_anonymous());
        match auth {
            Auth::None => Ok(None),
            Auth::Basic => Ok(credential.map(token::basic_header)),
            Auth::Bearer(ch, from) => {
                let realm_text = ch.realm().unwrap_or_default().to_string();
                let realm = Url::parse(&realm_text).map_err(|_| RegistryError::Protocol {
                    url: ep.base_url(),
                    message: format!(
                        "bearer challenge has an unusable realm {:?}",
                        super::error::one_line(&realm_text, 80)
                    ),
                })?;
                self.guard()
                    .admit_realm(&realm, ep.scheme.as_str(), *from)
                    .map_err(|e| RegistryError::Transport {
                        method: "GET".into(),
                        url: redact_url(&realm),
                        failure: Failure::Guard(e.0),
                    })?;
                let scopes = token::scopes(scope, ch);
                let key = TokenKey {
                    endpoint: ep.host.clone(),
                    scope: scopes.clone(),
                    credential: credential
                        .map_or_else(|| "anonymous".to_string(), |c| c.fingerprint()),
                };
                let tls = Self::tls(ep);
                let request = token::TokenRequest {
                    realm: &realm,
                    challenge: ch,
                    scope: &scopes,
                    credential,
                    tls: &tls,
                    from: *from,
                };
                let tok = self
                    .tokens
                    .get_or_fetch(key, || token::fetch(&self.http, &request, deadline))
                    .await?;
                let mut v = HeaderValue::from_str(&format!("Bearer {}", tok.value.expose()))
                    .map_err(|_| RegistryError::Protocol {
                        url: redact_url(&realm),
                        message: "token contains characters not allowed in a header".into(),
                    })?;
                v.set_sensitive(true);
                Ok(Some(v))
            }
        }
    }

    /// HEAD or GET `/v2/<repository>/manifests/<reference>` on the request's endpoint.
    ///
    /// `Ok` only for 2xx; every other status is a [`RegistryError::Status`] that records
    /// whether a credential was sent.
    pub async fn manifest(
        &self,
        m: &ManifestRequest<'_>,
    ) -> Result<ManifestResponse, RegistryError> {
        let ManifestRequest {
            endpoint: ep,
            repository,
            reference,
            ns,
            scope,
            method,
            credential,
            deadline,
        } = m;
        let (ep, credential, deadline) = (*ep, *credential, *deadline);
        self.guard()
            .admit_registry(&ep.host)
            .map_err(|e| RegistryError::Transport {
                method: method.to_string(),
                url: ep.base_url(),
                failure: Failure::Guard(e.0),
            })?;
        let url_text = ep.manifest_url(repository, reference, *ns);
        let url = Url::parse(&url_text).map_err(|e| RegistryError::Protocol {
            url: url_text.clone(),
            message: e.to_string(),
        })?;
        let mut headers = Self::base_headers(ep);
        headers.insert(header::ACCEPT, HeaderValue::from_static(manifest::ACCEPT));
        let mut req = Request {
            method: method.clone(),
            url,
            headers,
            authorization: None,
            tls: Self::tls(ep),
            destination: Destination::Registry,
            body_limit: limits::MAX_MANIFEST_BYTES,
            truncate_body: false,
        };
        let sent_cred = |req: &Request| {
            req.authorization.is_some() && credential.is_some_and(|c| !c.is_anonymous())
        };
        let (auth, probed) = self.learn(ep, &req, deadline).await?;
        req.authorization = self
            .authorization(ep, &auth, scope, credential, deadline)
            .await?;
        let mut resp = match probed {
            // The unauthenticated probe is the answer when nothing would be sent with it.
            Some(r) if req.authorization.is_none() => r,
            _ => self.send(&req, deadline).await?,
        };
        // The endpoint said no auth (or basic) but this repository wants a token: one
        // handshake.
        if resp.status == 401 && !matches!(auth, Auth::Bearer(..)) {
            let retry_auth = auth_from(&resp);
            if let Auth::Bearer(..) = retry_auth {
                req.authorization = self
                    .authorization(ep, &retry_auth, scope, credential, deadline)
                    .await?;
                resp = self.send(&req, deadline).await?;
            }
        }
        if (200..300).contains(&resp.status) {
            let size = resp.header("content-length").and_then(|v| v.parse().ok());
            let digest = resp
                .header("docker-content-digest")
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_string);
            let media_type = manifest::media_type_of(resp.header("content-type"), &resp.body);
            let body = (req.method == Method::GET).then(|| std::mem::take(&mut resp.body));
            Ok(ManifestResponse {
                digest,
                media_type,
                size,
                body,
            })
        } else {
            Err(Http::status_error(&req, &resp, sent_cred(&req), false))
        }
    }

    async fn send(&self, req: &Request, deadline: Instant) -> Result<Response, RegistryError> {
        with_retries(deadline, || async {
            let r = self.http.send(req, deadline).await?;
            if is_retryable_status(r.status) {
                return Err(Http::status_error(
                    req,
                    &r,
                    req.authorization.is_some(),
                    false,
                ));
            }
            Ok(r)
        })
        .await
    }
}

/// The authentication an endpoint asks for, from a response's challenges (bearer preferred).
fn auth_from(resp: &Response) -> Auth {
    if resp.status != 401 {
        return Auth::None;
    }
    let challenges = resp.challenges();
    match super::challenge::preferred(&challenges) {
        Some(ch) if ch.scheme == Scheme::Bearer => Auth::Bearer(ch.clone(), resp.from),
        Some(ch) if ch.scheme == Scheme::Basic => Auth::Basic,
        _ => Auth::None,
    }
}
