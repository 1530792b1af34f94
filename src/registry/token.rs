//! Bearer tokens (Docker token auth, distribution `docs/spec/auth/token.md`): fetched from
//! the validated realm — a GET with Basic auth, or for a refresh token the OAuth2 POST —,
//! cached per (endpoint, scope, credential), and shared by concurrent checks: identical
//! in-flight fetches are coalesced.

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
use crate::credentials::{Credential, Secret, SecretKind};

/// A bearer token and when to stop using it.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    /// The token; `Debug` prints `(redacted)`.
    pub value: Secret,
    /// Expiry, from `expires_in` (at least [`limits::MIN_TOKEN_LIFETIME`]).
    pub expires_at: Instant,
}

/// Cache key: endpoint `host[:port]`, sorted scope list, credential fingerprint
/// (`anonymous` without one). One namespace's credential never answers for another's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct TokenKey {
    /// Registry endpoint host.
    pub endpoint: String,
    /// Space-joined sorted scopes.
    pub scope: String,
    /// [`Credential::fingerprint`] or `anonymous`.
    pub credential: String,
}

/// A settled fetch: a token, or a refusal and when it was answered.
type Settled = Result<Token, (RegistryError, Instant)>;
type Cell = Arc<OnceCell<Settled>>;

/// Token cache with in-flight coalescing.
#[derive(Default)]
pub(crate) struct TokenCache {
    cells: Mutex<HashMap<TokenKey, Cell>>,
    fetched: std::sync::atomic::AtomicU64,
}

/// How long a refusal from a token endpoint (credentials refused, scope denied, a realm the
/// guard blocks) is remembered, so a run of many images does not hammer a token server
/// that said no, while a long-lived webhook still sees a fixed secret soon.
const REFUSAL_TTL: Duration = Duration::from_secs(10);

impl TokenCache {
    /// Token requests made so far (each fetch counts once, retries included as one).
    pub(crate) fn fetches(&self) -> u64 {
        self.fetched.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The cached token for `key`, or the result of `fetch`, run once for concurrent
    /// callers. Only tokens and refusals ([`RegistryError::is_refusal`]) are kept: a
    /// timeout or an outage is handed to the caller whose fetch it was and forgotten, so
    /// the next caller (with its own deadline) fetches again — one slow answer never turns
    /// the webhook's next seconds of admissions into transient verdicts. A caller dropped
    /// mid-fetch (its deadline passed) leaves the cell empty for the others likewise.
    pub(crate) async fn get_or_fetch<F, Fut>(
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
            let stale = match cells.get(&key).and_then(|c| c.get()) {
                Some(Ok(t)) => t.expires_at <= now + Duration::from_secs(5),
                Some(Err((_, at))) => now.duration_since(*at) > REFUSAL_TTL,
                None => false,
            };
            if stale || !cells.contains_key(&key) {
                cells.insert(key.clone(), Arc::new(OnceCell::new()));
            }
            cells.get(&key).expect("just inserted").clone()
        };
        let settled = cell
            .get_or_try_init(|| async {
                self.fetched
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                match fetch().await {
                    Ok(t) => Ok(Ok(t)),
                    Err(e) if e.is_refusal() => Ok(Err((e, Instant::now()))),
                    Err(e) => Err(e),
                }
            })
            .await?;
        settled.clone().map_err(|(e, _)| e)
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
pub(crate) fn basic_header(c: &Credential) -> HeaderValue {
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
pub(crate) struct TokenRequest<'a> {
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

/// The OAuth2 `client_id` pullcheck names itself with (containerd sends `containerd-client`,
/// the docker CLI `docker`); registries accept any value.
pub(crate) const OAUTH_CLIENT_ID: &str = "pullcheck";

/// The body of the OAuth2 refresh-token POST, following containerd
/// `core/remotes/docker/auth/fetch.go` `FetchTokenWithOAuth`: `grant_type=refresh_token`,
/// the token, `service` (sent even when the challenge has none, as an empty value),
/// `client_id`, and the scopes joined by spaces into one `scope` field, left out when there
/// are none. The credential goes in the form, never in an `Authorization` header.
fn refresh_form(refresh_token: &Secret, service: &str, scope: &str) -> String {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    let scopes: Vec<&str> = scope.split(' ').filter(|s| !s.is_empty()).collect();
    if !scopes.is_empty() {
        form.append_pair("scope", &scopes.join(" "));
    }
    form.append_pair("service", service)
        .append_pair("client_id", OAUTH_CLIENT_ID)
        .append_pair("grant_type", "refresh_token")
        .append_pair("refresh_token", refresh_token.expose());
    form.finish()
}

/// Fetch a token from the realm in the challenge for the scope.
///
/// A [`SecretKind::RefreshToken`] credential is exchanged with a POST of
/// [`refresh_form`], and the answer must carry `access_token` (`FetchTokenWithOAuth`
/// accepts nothing else); there is no fallback to a GET, which would send the refresh token
/// as a Basic password. Anything else is a GET with `service` and `scope` query parameters
/// and the credential, if any, as Basic auth; the answer's `token` or `access_token` is
/// used. Both are bounded by `deadline` and retried as [`with_retries`] allows.
///
/// Errors: token endpoint statuses (401/403 → credentials refused), transport failures, an
/// undecodable body.
pub(crate) async fn fetch(
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
    let credential = credential.filter(|c| !c.is_anonymous());
    let service = challenge.service().filter(|s| !s.is_empty());
    let refresh = credential.filter(|c| c.kind == SecretKind::RefreshToken);
    let (method, url, authorization, form) = match refresh {
        Some(c) => (
            Method::POST,
            realm.clone(),
            None,
            Some(refresh_form(
                &c.password,
                service.unwrap_or_default(),
                scope,
            )),
        ),
        None => {
            let mut url = realm.clone();
            {
                let mut q = url.query_pairs_mut();
                if let Some(service) = service {
                    q.append_pair("service", service);
                }
                for s in scope.split(' ').filter(|s| !s.is_empty()) {
                    q.append_pair("scope", s);
                }
            }
            (Method::GET, url, credential.map(basic_header), None)
        }
    };
    let req = Request {
        method,
        url,
        headers: HeaderMap::new(),
        authorization,
        tls: tls.clone(),
        destination: Destination::Referral { from },
        body_limit: limits::MAX_TOKEN_BYTES,
        truncate_body: false,
    };
    let resp = with_retries(deadline, || async {
        let resp = match &form {
            Some(form) => http.send_form(&req, form, deadline).await?,
            None => http.send(&req, deadline).await?,
        };
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
    let value = if form.is_some() {
        parsed.access_token
    } else if !parsed.token.is_empty() {
        parsed.token
    } else {
        parsed.access_token
    };
    if value.is_empty() {
        return Err(RegistryError::Protocol {
            url: super::error::redact_url(realm),
            message: if form.is_some() {
                "OAuth2 token response has no access_token".into()
            } else {
                "token response has neither token nor access_token".into()
            },
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn key() -> TokenKey {
        TokenKey {
            endpoint: "r.example".into(),
            scope: "repository:app:pull".into(),
            credential: "anonymous".into(),
        }
    }

    fn token(v: &str) -> Token {
        Token {
            value: Secret::new(v.to_string()),
            expires_at: Instant::now() + Duration::from_secs(300),
        }
    }

    fn timeout() -> RegistryError {
        RegistryError::Transport {
            method: "GET".into(),
            url: "https://auth.example/token".into(),
            failure: Failure::Timeout,
        }
    }

    fn refused() -> RegistryError {
        RegistryError::Status {
            method: "GET".into(),
            url: "https://auth.example/token".into(),
            status: 401,
            diagnostics: vec![],
            retry_after: None,
            credential_sent: true,
            from_token_endpoint: true,
        }
    }

    #[test]
    fn refresh_form_fields() {
        let form = refresh_form(
            &Secret::new("rt+/="),
            "reg.example",
            "repository:a:pull repository:b:pull",
        );
        let fields: Vec<(String, String)> = url::form_urlencoded::parse(form.as_bytes())
            .into_owned()
            .collect();
        let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("grant_type"), Some("refresh_token"));
        assert_eq!(get("refresh_token"), Some("rt+/="));
        assert_eq!(get("service"), Some("reg.example"));
        assert_eq!(get("client_id"), Some("pullcheck"));
        assert_eq!(get("scope"), Some("repository:a:pull repository:b:pull"));
        let bare = refresh_form(&Secret::new("t"), "", "");
        assert!(
            bare.contains("service=&") && !bare.contains("scope"),
            "{bare}"
        );
    }

    #[tokio::test]
    async fn a_transient_failure_is_not_remembered() {
        let cache = TokenCache::default();
        let first = cache.get_or_fetch(key(), || async { Err(timeout()) }).await;
        assert!(matches!(
            first,
            Err(RegistryError::Transport {
                failure: Failure::Timeout,
                ..
            })
        ));
        let second = cache
            .get_or_fetch(key(), || async { Ok(token("t2")) })
            .await
            .unwrap();
        assert_eq!(second.value.expose(), "t2");
        assert_eq!(cache.fetches(), 2);
    }

    #[tokio::test]
    async fn a_refusal_is_remembered_briefly() {
        let cache = TokenCache::default();
        for _ in 0..3 {
            let r = cache.get_or_fetch(key(), || async { Err(refused()) }).await;
            assert_eq!(r.unwrap_err().status(), Some(401));
        }
        assert_eq!(cache.fetches(), 1);
    }

    #[tokio::test]
    async fn a_waiter_fetches_again_when_the_fetch_it_waited_for_times_out() {
        let cache = TokenCache::default();
        let calls = AtomicUsize::new(0);
        let slow_then_fail = cache.get_or_fetch(key(), || async {
            calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err(timeout())
        });
        let waiter = async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            cache
                .get_or_fetch(key(), || async {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Ok(token("fresh"))
                })
                .await
        };
        let (a, b) = tokio::join!(slow_then_fail, waiter);
        assert!(a.is_err());
        assert_eq!(b.unwrap().value.expose(), "fresh");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_caller_dropped_mid_fetch_does_not_poison_the_cell() {
        let cache = TokenCache::default();
        let hung = cache.get_or_fetch(key(), || async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(token("never"))
        });
        assert!(
            tokio::time::timeout(Duration::from_millis(20), hung)
                .await
                .is_err()
        );
        let next = cache
            .get_or_fetch(key(), || async { Ok(token("next")) })
            .await
            .unwrap();
        assert_eq!(next.value.expose(), "next");
    }
}
