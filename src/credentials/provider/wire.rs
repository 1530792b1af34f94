//! The kubelet credential-provider wire format (`credentialprovider.kubelet.k8s.io`
//! `CredentialProviderRequest` / `CredentialProviderResponse`, kubernetes
//! `pkg/kubelet/apis/credentialprovider/v1/types.go`) and the strict decoding of a response,
//! as the kubelet's strict codec decodes it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::config::ExecApi;
use super::duration::parse_go_duration;
use super::error::PluginError;
use crate::credentials::docker_config::{DockerConfig, DockerConfigEntry};
use crate::credentials::secret::Secret;

/// What the response says to key its cache entry by (`cacheKeyType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) enum CacheKeyType {
    /// The image (repository) the plugin was asked about.
    Image,
    /// The image's registry: everything before its first `/`.
    Registry,
    /// One entry for every image the provider matches.
    Global,
}

/// A decoded, accepted response.
#[derive(Debug)]
pub(crate) struct Response {
    /// `cacheKeyType`.
    pub cache_key_type: CacheKeyType,
    /// `cacheDuration`: `None` when absent (use the provider's default); zero means "do not
    /// cache".
    pub cache_duration: Option<Duration>,
    /// `auth`: keyring patterns → credentials, matched with the keyring rules.
    pub auth: DockerConfig,
}

/// The request's variable parts.
#[derive(Debug, Default)]
pub(crate) struct Request<'a> {
    /// The image as the kubelet passes it: the repository without tag or digest.
    pub image: &'a str,
    /// Token mode: the ServiceAccount token.
    pub service_account_token: Option<&'a Secret>,
    /// Token mode: the ServiceAccount annotations the provider asked for.
    pub service_account_annotations: Option<&'a BTreeMap<String, String>>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireRequest<'a> {
    pub(super) api_version: &'static str,
    pub(super) kind: &'static str,
    pub(super) image: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) service_account_token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) service_account_annotations: Option<&'a BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WireResponse {
    #[allow(dead_code)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    cache_key_type: String,
    cache_duration: Option<String>,
    #[serde(default)]
    auth: BTreeMap<String, WireAuth>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireAuth {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
}

/// Decode a plugin's stdout. Errors say where and what kind of problem, never the text.
pub(crate) fn decode(name: &str, api: ExecApi, out: &[u8]) -> Result<Response, PluginError> {
    let bad = |problem: String| PluginError::BadResponse {
        name: name.to_owned(),
        problem,
    };
    let position = |e: &serde_json::Error| {
        format!(
            "the answer is not a CredentialProviderResponse ({} at line {} column {})",
            match e.classify() {
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof =>
                    "invalid JSON",
                _ => "unexpected field or value",
            },
            e.line(),
            e.column()
        )
    };
    let meta: TypeMeta = serde_json::from_slice(out).map_err(|e| bad(position(&e)))?;
    if meta.api_version != api.as_str() {
        return Err(PluginError::ApiVersion {
            name: name.to_owned(),
            want: api.as_str(),
            got: meta.api_version.chars().take(80).collect(),
        });
    }
    let wire: WireResponse = serde_json::from_slice(out).map_err(|e| bad(position(&e)))?;
    if wire.kind != "CredentialProviderResponse" {
        return Err(bad(format!(
            "kind {:?} is not CredentialProviderResponse",
            wire.kind.chars().take(80).collect::<String>()
        )));
    }
    let cache_key_type = match wire.cache_key_type.as_str() {
        "Image" => CacheKeyType::Image,
        "Registry" => CacheKeyType::Registry,
        "Global" => CacheKeyType::Global,
        other => {
            return Err(bad(format!(
                "cacheKeyType {:?} is not Image, Registry or Global",
                other.chars().take(40).collect::<String>()
            )));
        }
    };
    let cache_duration = match wire.cache_duration.as_deref() {
        None => None,
        Some(d) => match parse_go_duration(d) {
            Some(s) => Some(Duration::from_secs_f64(s.max(0.0))),
            None => {
                return Err(bad(format!(
                    "cacheDuration {:?} is not a duration such as \"12h\"",
                    d.chars().take(40).collect::<String>()
                )));
            }
        },
    };
    let mut auth = DockerConfig::new();
    for (pattern, a) in wire.auth {
        auth.insert(
            pattern,
            DockerConfigEntry {
                username: a.username,
                password: Secret::new(a.password),
                email: String::new(),
            },
        );
    }
    Ok(Response {
        cache_key_type,
        cache_duration,
        auth,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: ExecApi = ExecApi::V1;

    #[test]
    fn decodes_an_ecr_style_answer() {
        let r = decode(
            "ecr",
            V1,
            br#"{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Registry","cacheDuration":"6h0m0s","auth":{"123456789012.dkr.ecr.us-east-1.amazonaws.com":{"username":"AWS","password":"pw"}}}"#,
        )
        .unwrap();
        assert_eq!(r.cache_key_type, CacheKeyType::Registry);
        assert_eq!(r.cache_duration, Some(Duration::from_secs(6 * 3600)));
        let e = r
            .auth
            .get("123456789012.dkr.ecr.us-east-1.amazonaws.com")
            .unwrap();
        assert_eq!((e.username.as_str(), e.password.expose()), ("AWS", "pw"));
    }

    #[test]
    fn refusals_name_the_provider_and_never_the_secret() {
        let cases: &[(&[u8], &str)] = &[
            (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","kind":"CredentialProviderResponse","cacheKeyType":"Image"}"#,
             "credential provider p: answered apiVersion \"credentialprovider.kubelet.k8s.io/v1beta1\", but its config says credentialprovider.kubelet.k8s.io/v1; the answer was not used"),
            (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","cacheKeyType":"Image"}"#,
             "credential provider p: kind \"CredentialProviderRequest\" is not CredentialProviderResponse; the answer was not used"),
            (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Pod"}"#,
             "credential provider p: cacheKeyType \"Pod\" is not Image, Registry or Global; the answer was not used"),
            (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","cacheDuration":"soon"}"#,
             "credential provider p: cacheDuration \"soon\" is not a duration such as \"12h\"; the answer was not used"),
            (b"not json s3cr3t",
             "credential provider p: the answer is not a CredentialProviderResponse (invalid JSON at line 1 column 2); the answer was not used"),
            (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"r.io":{"username":"u","password":7}}}"#,
             "credential provider p: the answer is not a CredentialProviderResponse (unexpected field or value at line 1 column 155); the answer was not used"),
            (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"r.io":{"username":"u","password":"s3cr3t","extra":"s3cr3t"}}}"#,
             "credential provider p: the answer is not a CredentialProviderResponse (unexpected field or value at line 1 column 170); the answer was not used"),
        ];
        for (out, want) in cases {
            let got = decode("p", V1, out).unwrap_err().to_string();
            assert_eq!(got, *want);
            assert!(!got.contains("s3cr3t"));
        }
    }

    #[test]
    fn absent_and_zero_durations_differ() {
        let base = r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1alpha1","kind":"CredentialProviderResponse","cacheKeyType":"Global""#;
        let absent = decode("p", ExecApi::V1alpha1, format!("{base}}}").as_bytes()).unwrap();
        assert_eq!(absent.cache_duration, None);
        assert!(absent.auth.is_empty());
        let zero = decode(
            "p",
            ExecApi::V1alpha1,
            format!("{base},\"cacheDuration\":\"0s\"}}").as_bytes(),
        )
        .unwrap();
        assert_eq!(zero.cache_duration, Some(Duration::ZERO));
    }

    #[test]
    fn the_request_is_the_kubelet_shape() {
        let token = Secret::new("tok");
        let mut ann = BTreeMap::new();
        ann.insert("a.io/k".to_string(), "v".to_string());
        let body = serde_json::to_string(&WireRequest {
            api_version: V1.as_str(),
            kind: "CredentialProviderRequest",
            image: "r.io/team/app",
            service_account_token: Some(token.expose()),
            service_account_annotations: Some(&ann),
        })
        .unwrap();
        assert_eq!(
            body,
            r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"r.io/team/app","serviceAccountToken":"tok","serviceAccountAnnotations":{"a.io/k":"v"}}"#
        );
        let plain = serde_json::to_string(&WireRequest {
            api_version: ExecApi::V1alpha1.as_str(),
            kind: "CredentialProviderRequest",
            image: "r.io/x",
            service_account_token: None,
            service_account_annotations: None,
        })
        .unwrap();
        assert_eq!(
            plain,
            r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1alpha1","kind":"CredentialProviderRequest","image":"r.io/x"}"#
        );
    }
}
