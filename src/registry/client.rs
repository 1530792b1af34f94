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

use super::auth::{self, Auth, Origin, auth_from};
use super::error::{Failure, RegistryError, is_retryable_status};
use super::guard::{Destination, Guard};
use super::hosts::Endpoint;
use super::http::{Http, Request, Response};
use super::limits;
use super::quota::Quota;
use super::retry::with_retries;
use super::tls::{ClientPool, TlsProfile};
use super::token::TokenCache;
use crate::credentials::Credential;
use crate::manifest;

/// What a successful manifest request told us.
#[derive(Debug, Clone)]
pub(crate) struct ManifestResponse {
    /// `Docker-Content-Digest`, if the registry sent one.
    pub digest: Option<String>,
    /// `Content-Type` without parameters.
    pub media_type: Option<String>,
    /// The body (GET only).
    pub body: Option<Vec<u8>>,
    /// The pull quota the answer stated (Docker Hub's `ratelimit-*` headers).
    pub quota: Option<Quota>,
}

/// One manifest request: what to fetch, from where, with which credential, by when.
#[derive(Debug, Clone)]
pub(crate) struct ManifestRequest<'a> {
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

/// Shared state of all checks in one process: HTTP clients, pings, tokens.
pub(crate) struct Registry {
    http: Arc<Http>,
    tokens: TokenCache,
    pings: Mutex<HashMap<String, Arc<OnceCell<Auth>>>>,
    /// What redirect targets asked for, by origin (`scheme://host:port`): a protocol fact
    /// about each host, so a second request redirected there is authorized up front.
    referrals: Mutex<HashMap<String, Auth>>,
}

impl Registry {
    /// Assemble the transport stack.
    pub(crate) fn new(
        ca_files: Vec<std::path::PathBuf>,
        ca_pems: &[String],
        guard: Guard,
        request_timeout: Duration,
    ) -> Result<Registry, super::tls::TlsError> {
        let ua = format!("pullcheck/{}", env!("CARGO_PKG_VERSION"));
        let pool = ClientPool::new(ca_files, ca_pems, guard.clone(), ua)?;
        Ok(Registry {
            http: Http::new(pool, guard, request_timeout),
            tokens: TokenCache::default(),
            pings: Mutex::new(HashMap::new()),
            referrals: Mutex::new(HashMap::new()),
        })
    }

    /// Registry requests sent so far (pings and retries included; token requests excluded).
    pub(crate) fn requests_sent(&self) -> u64 {
        self.http.requests_sent()
    }

    /// Token fetches so far.
    pub(crate) fn token_fetches(&self) -> u64 {
        self.tokens.fetches()
    }

    /// The address guard every request and realm goes through.
    pub(crate) fn guard(&self) -> &Guard {
        self.http.guard()
    }

    fn tls(ep: &Endpoint) -> TlsProfile {
        TlsProfile {
            ca_files: ep.ca_files.clone(),
            ca_pems: ep.ca_pems.clone(),
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
        chain: &Chain<'_>,
        deadline: Instant,
    ) -> Result<(Auth, Option<Answer>), RegistryError> {
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
        let mut probed: Option<Answer> = None;
        let slot = &mut probed;
        let auth = cell
            .get_or_try_init(|| async move {
                let answer = self.send_chain(probe, chain, deadline).await?;
                // A redirect means the endpoint itself asked for nothing: what the target
                // wants is settled per hop (`hop_authorization`).
                let auth = match auth_from(&answer.resp) {
                    _ if answer.redirected => Auth::None,
                    Auth::None if answer.resp.status == 401 => self.ping(ep, deadline).await?,
                    learned => learned,
                };
                *slot = Some(answer);
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

    /// HEAD or GET `/v2/<repository>/manifests/<reference>` on the request's endpoint.
    ///
    /// `Ok` only for 2xx; every other status is a [`RegistryError::Status`] that records
    /// whether a credential was sent.
    pub(crate) async fn manifest(
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
                failure: Failure::Guard(e),
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
        let origin = Origin::of(ep);
        let chain = Chain {
            tls: Self::tls(ep),
            scope,
            credential,
        };
        let (auth, probed) = self.learn(ep, &req, &chain, deadline).await?;
        req.authorization = auth::authorization(
            &self.http,
            &self.tokens,
            &origin,
            &auth,
            scope,
            credential,
            deadline,
        )
        .await?;
        let mut answer = match probed {
            // The unauthenticated probe is the answer when nothing would be sent with it.
            Some(a) if req.authorization.is_none() => a,
            _ => self.send_chain(&req, &chain, deadline).await?,
        };
        // The endpoint said no auth (or basic) but this repository wants a token: one
        // handshake.
        if answer.resp.status == 401 && !answer.redirected && !matches!(auth, Auth::Bearer(..)) {
            let retry_auth = auth_from(&answer.resp);
            if let Auth::Bearer(..) = retry_auth {
                req.authorization = auth::authorization(
                    &self.http,
                    &self.tokens,
                    &origin,
                    &retry_auth,
                    scope,
                    credential,
                    deadline,
                )
                .await?;
                answer = self.send_chain(&req, &chain, deadline).await?;
            }
        }
        let Answer {
            mut resp,
            last: last_hop,
            ..
        } = answer;
        if (200..300).contains(&resp.status) {
            let digest = resp
                .header("docker-content-digest")
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_string);
            let media_type = manifest::media_type_of(resp.header("content-type"), &resp.body);
            let body = (req.method == Method::GET).then(|| std::mem::take(&mut resp.body));
            let quota = Quota::from_headers(
                resp.header("ratelimit-limit"),
                resp.header("ratelimit-remaining"),
            );
            Ok(ManifestResponse {
                digest,
                media_type,
                body,
                quota,
            })
        } else {
            Err(Http::status_error(
                &last_hop,
                &resp,
                sent_cred(&last_hop),
                false,
            ))
        }
    }

    /// One request without per-host authorization (the `/v2/` ping): the transport follows
    /// its redirects and drops `Authorization` on another origin. With retries.
    async fn send(&self, req: &Request, deadline: Instant) -> Result<Response, RegistryError> {
        with_retries(deadline, || async {
            let r = self.http.send(req, deadline).await?;
            retry_on_status(req, &r)?;
            Ok(r)
        })
        .await
    }

    /// A manifest request with its redirects, each hop authorized for its own host, with
    /// retries of the whole chain.
    async fn send_chain(
        &self,
        req: &Request,
        chain: &Chain<'_>,
        deadline: Instant,
    ) -> Result<Answer, RegistryError> {
        with_retries(deadline, || async {
            let a = self
                .http
                .within(req, deadline, self.follow(req, chain, deadline))
                .await?;
            retry_on_status(&a.last, &a.resp)?;
            Ok(a)
        })
        .await
    }

    /// Follow redirects the way containerd does (`core/remotes/docker/resolver.go`: its
    /// client's CheckRedirect authorizes every hop for that hop's host): a hop to the same
    /// origin keeps the request's `Authorization`; a hop to another origin gets what that
    /// origin asked for before, and when it answers 401 with a challenge, one handshake
    /// with its own realm — a token issued by the target's realm, scoped by the original
    /// repository, cached for the target host, and never sent anywhere else. The pod's
    /// credential goes to that realm as containerd sends it (the registry it was matched
    /// for chose the target; README's deviation list says so). Every hop passes the
    /// guard as a referral from the address that redirected.
    async fn follow(
        &self,
        req: &Request,
        chain: &Chain<'_>,
        deadline: Instant,
    ) -> Result<Answer, RegistryError> {
        let mut hop = req.clone();
        for n in 0..limits::MAX_REDIRECTS {
            let mut resp = self.http.send_hop(&hop).await?;
            if n > 0 && resp.status == 401 {
                let origin = Origin::of_url(&hop.url, chain.tls.clone());
                let auth = auth_from(&resp);
                if !matches!(auth, Auth::None) {
                    self.referrals
                        .lock()
                        .expect("referral lock")
                        .insert(origin.key(), auth.clone());
                    let authorization = auth::authorization(
                        &self.http,
                        &self.tokens,
                        &origin,
                        &auth,
                        chain.scope,
                        chain.credential,
                        deadline,
                    )
                    .await?;
                    if authorization.is_some() && authorization != hop.authorization {
                        hop.authorization = authorization;
                        resp = self.http.send_hop(&hop).await?;
                    }
                }
            }
            match super::http::next_hop(&hop, &resp) {
                None => {
                    return Ok(Answer {
                        resp,
                        redirected: n > 0,
                        last: hop,
                    });
                }
                Some(next) => {
                    let mut next = next.map_err(|f| RegistryError::Transport {
                        method: hop.method.to_string(),
                        url: super::error::redact_url(&hop.url),
                        failure: f,
                    })?;
                    if !same_origin(&next.url, &req.url) {
                        let origin = Origin::of_url(&next.url, chain.tls.clone());
                        let known = self
                            .referrals
                            .lock()
                            .expect("referral lock")
                            .get(&origin.key())
                            .cloned();
                        next.authorization = match known {
                            Some(auth) => {
                                auth::authorization(
                                    &self.http,
                                    &self.tokens,
                                    &origin,
                                    &auth,
                                    chain.scope,
                                    chain.credential,
                                    deadline,
                                )
                                .await?
                            }
                            None => None,
                        };
                    } else {
                        next.authorization = req.authorization.clone();
                    }
                    hop = next;
                }
            }
        }
        Err(RegistryError::Transport {
            method: hop.method.to_string(),
            url: super::error::redact_url(&hop.url),
            failure: Failure::Redirect("too many redirects".into()),
        })
    }
}

/// What a redirect chain needs besides the request: the endpoint's TLS profile (kept on
/// every hop, as containerd keeps its client), and the scope and credential a hop's own
/// challenge is answered with.
struct Chain<'a> {
    tls: TlsProfile,
    scope: &'a str,
    credential: Option<&'a Credential>,
}

/// The final answer of a chain, and the hop that got it.
struct Answer {
    resp: Response,
    /// True when the answer came from a hop after a redirect.
    redirected: bool,
    /// The request that got `resp`.
    last: Request,
}

/// A retryable status as an error, so [`with_retries`] sends again.
fn retry_on_status(req: &Request, resp: &Response) -> Result<(), RegistryError> {
    if is_retryable_status(resp.status) {
        return Err(Http::status_error(
            req,
            resp,
            req.authorization.is_some(),
            false,
        ));
    }
    Ok(())
}

fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}
