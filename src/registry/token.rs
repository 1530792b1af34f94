//! Bearer tokens (Docker token auth, distribution `docs/spec/auth/token.md`): fetched with a
//! GET to the validated realm, cached per (endpoint, scope, credential), and shared by
//! concurrent checks: identical in-flight fetches are coalesced.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use http::{HeaderMap, HeaderValue, Method};
use tokio::sync::OnceCell;
use url::Url;

use super::challenge::Challenge;
use super::error::{Failure, RegistryError};
use super::guard::{AddrClass, Destination};
use super::http::{Http, Request};
use super::limits;
use super::retry::with_retries;
use super::tls::TlsProfile;
use crate::credentials::{Credential, Secret};

/// A bearer token and when to stop using it.
#[derive(Debug, Clone)]
pub struct Token {
    /// The token; `Debug` prints `(redacted)`.
    pub value: Secret,
    /// Expiry, from `expires_in` (at least [`limits::MIN_TOKEN_LIFETIME`]).
    pub expires_at: Instant,
}

/// Cache key: endpoint `host[:port]`, sorted scope list, credential fingerprint
/// (`anonymous` without one). One namespace's credential never answers for another's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenKey {
    /// Registry endpoint host.
    pub endpoint: String,
    /// Space-joined sorted scopes.
    pub scope: String,
    /// [`Credential::fingerprint`] or `anonymous`.
    pub credential: String,
}

type Cell = Arc<OnceCell<Result<Token, RegistryError>>>;

/// Token cache with in-flight coalescing.
#[derive(Default)]
pub struct TokenCache {
    cells: Mutex<HashMap<TokenKey, (Instant, Cell)>>,
    fetched: std::sync::atomic::AtomicU64,
}

/// How long a failed token fetch is remembered (seconds), so a run of many images does not
/// hammer a token server that refused, while a long-lived webhook still recovers.
const FAILURE_TTL: Duration = Duration::from_secs(10);

impl TokenCache {
    /// Token requests made so far (each fetch counts once, retries included as one).
    pub fn fetches(&self) -> u64 {
        self.fetched.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The cached token for `key`, or the result of `fetch` (run once for concurrent callers).
    pub async fn get_or_fetch<F, Fut>(
        &self,
        key: TokenKey,
        fetch: F,
    ) -> Result<Token, RegistryError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Token, RegistryError>>,
    {
        let cell = {
            let mut cells = self.cells.lock().expect("token cache lock");
            let now = Instant::now();
            let stale = match cells.get(&key) {
                Some((created, c)) => match c.get() {
                    Some(Ok(t)) => t.expires_at <= now + Duration::from_secs(5),
                    Some(Err(_)) => now.duration_since(*created) > FAILURE_TTL,
                    None => false,
                },
                None => true,
            };
            if stale {
                cells.insert(key.clone(), (now, Arc::new(OnceCell::new())));
            }
            cells.get(&key).expect("just inserted").1.clone()
        };
        cell.get_or_init(|| async {
            self.fetched
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            fetch().await
        })
        .await
        .clone()
    }
}

#[derive(serde::Deserialize)]
struct TokenResponse {
    #[serde(default)]
    token: String,
    #[serde(default)]
    access_token: String,
    #[serde(default)]
    expires_in: Option<i64>,
}

/// The scopes to ask for: ours (`repository:<path>:pull`) plus the challenge's, sorted and
/// de-duplicated, as containerd does (`GetTokenScopes`).
pub fn scopes(ours: &str, challenge: &Challenge) -> String {
    let mut all: Vec<String> = vec![ours.to_string()];
    if let Some(s) = challenge.scope() {
        all.extend(s.split_whitespace().map(str::to_string));
    }
    all.sort();
    all.dedup();
    all.join(" ")
}

/// `Authorization: Basic …` for a credential.
pub fn basic_header(c: &Credential) -> HeaderValue {
    let raw = format!("{}:{}", c.username, c.password.expose());
    let mut v = HeaderValue::from_str(&format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("Basic"));
    v.set_sensitive(true);
    v
}

/// What to ask a token realm for.
pub struct TokenRequest<'a> {
    /// The realm, already admitted by the guard.
    pub realm: &'a Url,
    /// The challenge that named it (`service`).
    pub challenge: &'a Challenge,
    /// Space-separated scopes ([`scopes`]).
    pub scope: &'a str,
    /// Sent as Basic auth when present and not anonymous.
    pub credential: Option<&'a Credential>,
    /// The registry endpoint's TLS profile.
    pub tls: &'a TlsProfile,
    /// The class of the registry address that announced the realm.
    pub from: AddrClass,
}

/// Fetch a token from the realm in the challenge for the scope. Errors: token endpoint
/// statuses (401/403 → credentials refused), transport failures, an undecodable body.
pub async fn fetch(
    http: &Http,
    t: &TokenRequest<'_>,
    deadline: Instant,
) -> Result<Token, RegistryError> {
    let TokenRequest {
        realm,
        challenge,
        scope,
        credential,
        tls,
        from,
    } = *t;
    let mut url = realm.clone();
    {
        let mut q = url.query_pairs_mut();
        if let Some(service) = challenge.service().filter(|s| !s.is_empty()) {
            q.append_pair("service", service);
        }
        for s in scope.split(' ').filter(|s| !s.is_empty()) {
            q.append_pair("scope", s);
        }
    }
    let credential = credential.filter(|c| !c.is_anonymous());
    let req = Request {
        method: Method::GET,
        url,
        headers: HeaderMap::new(),
        authorization: credential.map(basic_header),
        tls: tls.clone(),
        destination: Destination::Referral { from },
        body_limit: limits::MAX_TOKEN_BYTES,
        truncate_body: false,
    };
    let resp = with_retries(deadline, || async {
        let resp = http.send(&req, deadline).await?;
        if resp.status == 200 {
            Ok(resp)
        } else {
            Err(Http::status_error(&req, &resp, credential.is_some(), true))
        }
    })
    .await
    .map_err(|e| match e {
        // An oversized token response is a broken token server, not an oversized manifest
        // (which the engine would report as not found).
        RegistryError::Transport {
            failure: Failure::TooLarge(n),
            ..
        } => RegistryError::Protocol {
            url: super::error::redact_url(realm),
            message: format!("token response larger than {n} bytes"),
        },
        other => other,
    })?;
    let parsed: TokenResponse =
        serde_json::from_slice(&resp.body).map_err(|e| RegistryError::Protocol {
            url: super::error::redact_url(realm),
            message: format!("token response is not JSON with a token: {e}"),
        })?;
    let value = if !parsed.token.is_empty() {
        parsed.token
    } else {
        parsed.access_token
    };
    if value.is_empty() {
        return Err(RegistryError::Protocol {
            url: super::error::redact_url(realm),
            message: "token response has neither token nor access_token".into(),
        });
    }
    let lifetime = parsed
        .expires_in
        .filter(|s| *s > 0)
        .map(|s| Duration::from_secs(s as u64))
        .unwrap_or(limits::MIN_TOKEN_LIFETIME)
        .max(limits::MIN_TOKEN_LIFETIME);
    Ok(Token {
        value: Secret::new(value),
        expires_at: Instant::now() + lifetime,
    })
}
