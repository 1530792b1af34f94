//! What a host asks for ([`Auth`], from its 401 challenge) and the `Authorization` header
//! that answers it for one scope and credential: Basic as is, Bearer through a token from
//! the challenge's realm, admitted by the guard and cached per host, scope and credential.

use std::time::Instant;

use http::HeaderValue;
use url::Url;

use super::challenge::{Challenge, Scheme};
use super::error::{Failure, RegistryError, one_line, redact_url};
use super::guard::AddrClass;
use super::hosts::Endpoint;
use super::http::{Http, Response};
use super::tls::TlsProfile;
use super::token::{self, TokenCache, TokenKey};
use crate::credentials::{Credential, SecretKind};

/// How a host wants to be authenticated.
#[derive(Debug, Clone)]
pub(crate) enum Auth {
    /// Nothing asked.
    None,
    /// `WWW-Authenticate: Basic`.
    Basic,
    /// A bearer challenge, and the class of the address it came from (what its realm may
    /// be on).
    Bearer(Challenge, AddrClass),
}

/// The authentication a response asks for, from its challenges (bearer preferred, as
/// containerd's `core/remotes/docker/auth/parse.go` orders them).
pub(crate) fn auth_from(resp: &Response) -> Auth {
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

/// A host that authorizations are issued for: a registry endpoint or a redirect target.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    /// `host[:port]`: the token cache's key, so a token never serves another host.
    pub host: String,
    /// `http` or `https`: a plain-http host may use a plain-http realm.
    pub scheme: String,
    /// TLS profile for the realm request.
    pub tls: TlsProfile,
}

impl Origin {
    /// A registry endpoint.
    pub(crate) fn of(ep: &Endpoint) -> Origin {
        Origin {
            host: ep.host.clone(),
            scheme: ep.scheme.as_str().to_string(),
            tls: TlsProfile {
                ca_files: ep.ca_files.clone(),
                ca_pems: ep.ca_pems.clone(),
                skip_verify: ep.skip_verify,
            },
        }
    }

    /// The host of a URL (a redirect target), with the TLS profile it is reached with.
    pub(crate) fn of_url(url: &Url, tls: TlsProfile) -> Origin {
        let host = match (url.host_str(), url.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => String::new(),
        };
        Origin {
            host,
            scheme: url.scheme().to_string(),
            tls,
        }
    }

    /// `scheme://host[:port]`.
    pub(crate) fn key(&self) -> String {
        format!("{}://{}", self.scheme, self.host)
    }
}

/// The `Authorization` header for a request to `origin` for `scope` with `credential`, as
/// `auth` asks: nothing, Basic, or a bearer token from the realm (checked by the guard as a
/// referral from the address that challenged).
pub(crate) async fn authorization(
    http: &Http,
    tokens: &TokenCache,
    origin: &Origin,
    auth: &Auth,
    scope: &str,
    credential: Option<&Credential>,
    deadline: Instant,
) -> Result<Option<HeaderValue>, RegistryError> {
    let credential = credential.filter(|c| !c.is_anonymous());
    match auth {
        Auth::None => Ok(None),
        // A refresh token is no password: containerd sends no Basic header without a
        // username (`core/remotes/docker/authorizer.go`), and neither does pullcheck.
        Auth::Basic => Ok(credential
            .filter(|c| c.kind != SecretKind::RefreshToken)
            .map(token::basic_header)),
        Auth::Bearer(ch, from) => {
            let realm_text = ch.realm().unwrap_or_default().to_string();
            let realm = Url::parse(&realm_text).map_err(|_| RegistryError::Protocol {
                url: origin.key(),
                message: format!(
                    "bearer challenge has an unusable realm {:?}",
                    one_line(&realm_text, 80)
                ),
            })?;
            http.guard()
                .admit_realm(&realm, &origin.scheme, *from)
                .map_err(|e| RegistryError::Transport {
                    method: "GET".into(),
                    url: redact_url(&realm),
                    failure: Failure::Guard(e),
                })?;
            let scopes = token::scopes(scope, ch);
            let key = TokenKey {
                endpoint: origin.host.clone(),
                scope: scopes.clone(),
                credential: credential.map_or_else(|| "anonymous".to_string(), |c| c.fingerprint()),
            };
            let request = token::TokenRequest {
                realm: &realm,
                challenge: ch,
                scope: &scopes,
                credential,
                tls: &origin.tls,
                from: *from,
            };
            let tok = tokens
                .get_or_fetch(key, || token::fetch(http, &request, deadline))
                .await?;
            let mut v =
                HeaderValue::from_str(&format!("Bearer {}", tok.value.expose())).map_err(|_| {
                    RegistryError::Protocol {
                        url: redact_url(&realm),
                        message: "token contains characters not allowed in a header".into(),
                    }
                })?;
            v.set_sensitive(true);
            Ok(Some(v))
        }
    }
}
