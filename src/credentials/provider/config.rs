//! The kubelet's `CredentialProviderConfig`, read and validated as the kubelet reads it.
//!
//! Rules (kubernetes `pkg/credentialprovider/plugin/config.go` `readCredentialProviderConfig`,
//! `decode`, `validateCredentialProviderConfig`; types in kubelet
//! `pkg/apis/config/v1/types.go`):
//! - the path is a file, or (since 1.35) a directory whose `*.json`, `*.yaml` and `*.yml`
//!   files are read in lexicographic order and their providers concatenated; a directory
//!   with none of them is an error, and so is one provider name in two files;
//! - each file is `kind: CredentialProviderConfig` in `kubelet.config.k8s.io/v1`, `v1beta1`
//!   or `v1alpha1`, decoded strictly (an unknown field is an error);
//! - a provider needs a `name` without `/` or spaces and not `.` or `..`, unique; at least
//!   one `matchImages` entry, each a valid schemeless URL; a `defaultCacheDuration` ≥ 0; an
//!   `apiVersion` in `credentialprovider.kubelet.k8s.io` `v1`, `v1beta1` or `v1alpha1`;
//! - `tokenAttributes` only with the `v1` provider apiVersion, with an audience, an explicit
//!   `requireServiceAccount`, a `cacheType` of `Token` or `ServiceAccount`, annotation keys
//!   that are qualified names, none both required and optional, and no required keys when
//!   `requireServiceAccount` is false.
//!
//! Errors are one line naming the file and the field, and the fix.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::duration::parse_go_duration;

/// Files larger than this are not a credential provider config.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The three versions of the plugin exec API a provider may speak, as its `apiVersion`
/// field names them (kubelet `pkg/apis/credentialprovider/{v1,v1beta1,v1alpha1}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExecApi {
    /// `credentialprovider.kubelet.k8s.io/v1`: the only one with service-account tokens.
    V1,
    /// `credentialprovider.kubelet.k8s.io/v1beta1`.
    V1beta1,
    /// `credentialprovider.kubelet.k8s.io/v1alpha1`.
    V1alpha1,
}

impl ExecApi {
    fn parse(s: &str) -> Option<ExecApi> {
        match s {
            "credentialprovider.kubelet.k8s.io/v1" => Some(ExecApi::V1),
            "credentialprovider.kubelet.k8s.io/v1beta1" => Some(ExecApi::V1beta1),
            "credentialprovider.kubelet.k8s.io/v1alpha1" => Some(ExecApi::V1alpha1),
            _ => None,
        }
    }

    /// `group/version`, as sent in the request and expected in the response.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ExecApi::V1 => "credentialprovider.kubelet.k8s.io/v1",
            ExecApi::V1beta1 => "credentialprovider.kubelet.k8s.io/v1beta1",
            ExecApi::V1alpha1 => "credentialprovider.kubelet.k8s.io/v1alpha1",
        }
    }
}

/// How credentials obtained with a service-account token are cached (kubelet
/// `ServiceAccountTokenCacheType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenCacheType {
    /// Keyed by the token itself: a new token means a new plugin call.
    Token,
    /// Keyed by the ServiceAccount (namespace, name, UID, the annotations passed).
    ServiceAccount,
}

/// `tokenAttributes`: the provider wants the workload's ServiceAccount token (KEP-4412).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TokenAttributes {
    /// `serviceAccountTokenAudience`: the one audience the token is issued for.
    pub audience: String,
    /// `cacheType`.
    pub cache_type: TokenCacheType,
    /// `requireServiceAccount`: without a ServiceAccount the plugin is not run.
    pub require_service_account: bool,
    /// `requiredServiceAccountAnnotationKeys`: the plugin is not run unless the
    /// ServiceAccount has all of them.
    pub required_annotation_keys: Vec<String>,
    /// `optionalServiceAccountAnnotationKeys`: passed when present.
    pub optional_annotation_keys: Vec<String>,
}

/// One `providers[]` entry, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProviderSpec {
    /// The executable's file name in the bin dir.
    pub name: String,
    /// Keyring globs (`*.dkr.ecr.*.amazonaws.com`); the plugin runs only for images one
    /// of them matches.
    pub match_images: Vec<String>,
    /// `defaultCacheDuration`: how long an answer without `cacheDuration` is kept.
    pub default_cache_duration: Duration,
    /// The exec API version the plugin speaks.
    pub api: ExecApi,
    /// Command-line arguments.
    pub args: Vec<String>,
    /// `env`, appended after the process environment, in order.
    pub env: Vec<(String, String)>,
    /// Service-account-token mode, when set.
    pub token: Option<TokenAttributes>,
    /// The file it was read from (for errors and `explain`).
    pub file: PathBuf,
}

/// A config that can't be used. One line: the file, the field, the fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ConfigError {
    /// The path can't be read.
    #[error("--image-credential-provider-config {}: {problem}", path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// The OS error, or what is wrong with the path.
        problem: String,
    },
    /// `--image-credential-provider-bin-dir` is not a directory.
    #[error("--image-credential-provider-bin-dir {}: not a directory; pass the directory holding the plugins", path.display())]
    BinDir {
        /// The path.
        path: PathBuf,
    },
    /// A file does not decode or does not validate.
    #[error("credential provider config {}: {problem}", file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// What is wrong, naming the field (`providers[0].name`).
        problem: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    kind: Option<String>,
    api_version: Option<String>,
    #[serde(default)]
    providers: Vec<RawProvider>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawProvider {
    #[serde(default)]
    name: String,
    #[serde(default)]
    match_images: Vec<String>,
    default_cache_duration: Option<String>,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<RawEnv>,
    token_attributes: Option<RawTokenAttributes>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnv {
    name: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTokenAttributes {
    #[serde(default)]
    service_account_token_audience: String,
    #[serde(default)]
    cache_type: String,
    require_service_account: Option<bool>,
    #[serde(default)]
    required_service_account_annotation_keys: Vec<String>,
    #[serde(default)]
    optional_service_account_annotation_keys: Vec<String>,
}

/// Read `path` (a file or a directory) as the kubelet's `--image-credential-provider-config`.
pub(crate) fn load(path: &Path) -> Result<Vec<ProviderSpec>, ConfigError> {
    let read_err = |problem: String| ConfigError::Read {
        path: path.to_path_buf(),
        problem,
    };
    let meta = std::fs::metadata(path).map_err(|e| {
        read_err(format!(
            "{e}; pass the kubelet's CredentialProviderConfig file or a directory of them"
        ))
    })?;
    let files = if meta.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| read_err(e.to_string()))?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().map(|t| !t.is_dir()).unwrap_or(false))
            .map(|e| e.path())
            .filter(|p| {
                matches!(
                    p.extension().and_then(|x| x.to_str()),
                    Some("json" | "yaml" | "yml")
                )
            })
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(read_err(
                "no *.json, *.yaml or *.yml files in this directory; put the CredentialProviderConfig there".into(),
            ));
        }
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut out: Vec<ProviderSpec> = Vec::new();
    for file in files {
        for spec in load_file(&file)? {
            if out.iter().any(|p| p.name == spec.name) {
                return Err(ConfigError::Invalid {
                    file,
                    problem: format!(
                        "provider name {:?} is also defined in an earlier file; each provider name may appear once",
                        spec.name
                    ),
                });
            }
            out.push(spec);
        }
    }
    Ok(out)
}

fn load_file(file: &Path) -> Result<Vec<ProviderSpec>, ConfigError> {
    let invalid = |problem: String| ConfigError::Invalid {
        file: file.to_path_buf(),
        problem,
    };
    let text = crate::files::read_capped_text(file, MAX_CONFIG_BYTES).map_err(|e| match e {
        crate::files::FileError::TooLarge { .. } => invalid(format!(
            "larger than {MAX_CONFIG_BYTES} bytes; this is not a CredentialProviderConfig"
        )),
        e => invalid(format!("cannot read: {e}")),
    })?;
    parse(&text).map_err(invalid).map(|specs| {
        specs
            .into_iter()
            .map(|s| ProviderSpec {
                file: file.to_path_buf(),
                ..s
            })
            .collect()
    })
}

/// Decode and validate one file's text. `Err` is the problem, naming the field.
pub(crate) fn parse(text: &str) -> Result<Vec<ProviderSpec>, String> {
    // JSON is YAML, but a JSON decoder gives better positions for JSON files.
    let raw: RawConfig = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| format!("not a CredentialProviderConfig: {e}"))?
    } else {
        serde_saphyr::from_str(text).map_err(|e| {
            let rendered = e.to_string();
            if rendered.contains("multiple YAML documents") {
                return "holds more than one YAML document; put one CredentialProviderConfig in each file (a directory of files is read in name order)".to_string();
            }
            let first = rendered.lines().next().unwrap_or("invalid YAML");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            format!("not a CredentialProviderConfig: {first}")
        })?
    };
    match raw.api_version.as_deref() {
        Some(
            "kubelet.config.k8s.io/v1"
            | "kubelet.config.k8s.io/v1beta1"
            | "kubelet.config.k8s.io/v1alpha1",
        ) => {}
        Some(other) => {
            return Err(format!(
                "apiVersion {other:?} is not kubelet.config.k8s.io/v1, v1beta1 or v1alpha1"
            ));
        }
        None => return Err(
            "apiVersion is missing; the kubelet's file says apiVersion: kubelet.config.k8s.io/v1"
                .into(),
        ),
    }
    if raw.kind.as_deref() != Some("CredentialProviderConfig") {
        return Err(format!(
            "kind {:?} is not CredentialProviderConfig",
            raw.kind.unwrap_or_default()
        ));
    }
    if raw.providers.is_empty() {
        return Err("providers: at least 1 provider is required".into());
    }
    let mut seen = HashSet::new();
    raw.providers
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let spec = validate(p).map_err(|e| format!("providers[{i}].{e}"))?;
            if !seen.insert(spec.name.clone()) {
                return Err(format!(
                    "providers[{i}].name: {:?} is defined twice; each provider name may appear once",
                    spec.name
                ));
            }
            Ok(spec)
        })
        .collect()
}

fn validate(p: RawProvider) -> Result<ProviderSpec, String> {
    let name = p.name;
    if name.is_empty() {
        return Err("name: required (the plugin's file name in the bin dir)".into());
    }
    if name.contains('/') || name.contains(' ') || name == "." || name == ".." {
        return Err(format!(
            "name: {name:?} must be a plain file name (no '/', no spaces, not . or ..)"
        ));
    }
    let api = ExecApi::parse(&p.api_version).ok_or_else(|| {
        format!(
            "apiVersion: {:?} is not one of credentialprovider.kubelet.k8s.io/v1, v1beta1, v1alpha1",
            p.api_version
        )
    })?;
    if p.match_images.is_empty() {
        return Err("matchImages: at least 1 pattern is required".into());
    }
    if let Some(bad) = p
        .match_images
        .iter()
        .find(|m| !crate::credentials::keyring::is_valid_key(m))
    {
        return Err(format!(
            "matchImages: {bad:?} is not a valid image pattern (host[:port][/path] with * globs)"
        ));
    }
    let default_cache_duration = match p.default_cache_duration.as_deref() {
        None => return Err("defaultCacheDuration: required (e.g. \"12h\")".into()),
        Some(d) => match parse_go_duration(d) {
            Some(d) if d >= 0.0 => Duration::from_secs_f64(d),
            Some(_) => return Err(format!("defaultCacheDuration: {d:?} must not be negative")),
            None => {
                return Err(format!(
                    "defaultCacheDuration: {d:?} is not a duration such as \"12h\", \"90m\" or \"0s\""
                ));
            }
        },
    };
    let token = p
        .token_attributes
        .map(|t| validate_token(t, api))
        .transpose()
        .map_err(|e| format!("tokenAttributes{e}"))?;
    Ok(ProviderSpec {
        name,
        match_images: p.match_images,
        default_cache_duration,
        api,
        args: p.args,
        env: p.env.into_iter().map(|e| (e.name, e.value)).collect(),
        token,
        file: PathBuf::new(),
    })
}

fn validate_token(t: RawTokenAttributes, api: ExecApi) -> Result<TokenAttributes, String> {
    if api != ExecApi::V1 {
        return Err(": only allowed with apiVersion credentialprovider.kubelet.k8s.io/v1".into());
    }
    if t.service_account_token_audience.is_empty() {
        return Err(".serviceAccountTokenAudience: required".into());
    }
    let Some(require_service_account) = t.require_service_account else {
        return Err(".requireServiceAccount: required (true or false)".into());
    };
    let cache_type = match t.cache_type.as_str() {
        "Token" => TokenCacheType::Token,
        "ServiceAccount" => TokenCacheType::ServiceAccount,
        "" => return Err(".cacheType: required: ServiceAccount or Token".into()),
        other => {
            return Err(format!(
                ".cacheType: {other:?} is not ServiceAccount or Token"
            ));
        }
    };
    if !require_service_account && !t.required_service_account_annotation_keys.is_empty() {
        return Err(
            ".requiredServiceAccountAnnotationKeys: not allowed when requireServiceAccount is false"
                .into(),
        );
    }
    for (field, keys) in [
        (
            "requiredServiceAccountAnnotationKeys",
            &t.required_service_account_annotation_keys,
        ),
        (
            "optionalServiceAccountAnnotationKeys",
            &t.optional_service_account_annotation_keys,
        ),
    ] {
        let mut seen = HashSet::new();
        for k in keys {
            if !is_qualified_name(&k.to_ascii_lowercase()) {
                return Err(format!(".{field}: {k:?} is not a valid annotation key"));
            }
            if !seen.insert(k) {
                return Err(format!(".{field}: {k:?} is listed twice"));
            }
        }
    }
    if let Some(k) = t
        .required_service_account_annotation_keys
        .iter()
        .find(|k| t.optional_service_account_annotation_keys.contains(k))
    {
        return Err(format!(
            ": annotation key {k:?} cannot be both required and optional"
        ));
    }
    Ok(TokenAttributes {
        audience: t.service_account_token_audience,
        cache_type,
        require_service_account,
        required_annotation_keys: t.required_service_account_annotation_keys,
        optional_annotation_keys: t.optional_service_account_annotation_keys,
    })
}

/// apimachinery `validation.IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123
/// subdomain, the name 1–63 characters of `[A-Za-z0-9_.-]` starting and ending
/// alphanumeric.
fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    });
    name_ok && prefix_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of EKS's node file (`/etc/eks/image-credential-provider/config.json`), in
    /// the v1alpha1 version cloud docs still show.
    const EKS: &str = r#"{
      "apiVersion": "kubelet.config.k8s.io/v1alpha1",
      "kind": "CredentialProviderConfig",
      "providers": [{
        "name": "ecr-credential-provider",
        "matchImages": ["*.dkr.ecr.*.amazonaws.com", "*.dkr.ecr.*.amazonaws.com.cn"],
        "defaultCacheDuration": "12h",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1alpha1"
      }]
    }"#;

    #[test]
    fn reads_the_eks_file() {
        let specs = parse(EKS).unwrap();
        assert_eq!(specs.len(), 1);
        let p = &specs[0];
        assert_eq!(p.name, "ecr-credential-provider");
        assert_eq!(
            p.match_images,
            ["*.dkr.ecr.*.amazonaws.com", "*.dkr.ecr.*.amazonaws.com.cn"]
        );
        assert_eq!(p.default_cache_duration, Duration::from_secs(12 * 3600));
        assert_eq!(p.api, ExecApi::V1alpha1);
        assert_eq!(p.token, None);
    }

    const GKE_YAML: &str = "apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: auth-provider-gcp
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    matchImages:
      - \"gcr.io\"
      - \"*.gcr.io\"
      - \"*.pkg.dev\"
    defaultCacheDuration: 1m
    args:
      - get-credentials
      - --v=3
    env:
      - name: GOOGLE_APPLICATION_CREDENTIALS
        value: /var/run/gcp/key.json
    tokenAttributes:
      serviceAccountTokenAudience: pkg.dev
      cacheType: ServiceAccount
      requireServiceAccount: true
      requiredServiceAccountAnnotationKeys: [iam.gke.io/gcp-service-account]
";

    #[test]
    fn reads_yaml_with_args_env_and_token_attributes() {
        let p = &parse(GKE_YAML).unwrap()[0];
        assert_eq!(p.args, ["get-credentials", "--v=3"]);
        assert_eq!(
            p.env,
            [(
                "GOOGLE_APPLICATION_CREDENTIALS".to_string(),
                "/var/run/gcp/key.json".to_string()
            )]
        );
        assert_eq!(p.default_cache_duration, Duration::from_secs(60));
        assert_eq!(
            p.token,
            Some(TokenAttributes {
                audience: "pkg.dev".into(),
                cache_type: TokenCacheType::ServiceAccount,
                require_service_account: true,
                required_annotation_keys: vec!["iam.gke.io/gcp-service-account".into()],
                optional_annotation_keys: vec![],
            })
        );
    }

    fn provider(fields: &str) -> String {
        format!(
            r#"{{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[{{{fields}}}]}}"#
        )
    }

    const OK: &str = r#""name":"p","matchImages":["r.io"],"defaultCacheDuration":"0s","apiVersion":"credentialprovider.kubelet.k8s.io/v1""#;

    #[test]
    fn each_rule_has_its_own_message() {
        let cases: &[(String, &str)] = &[
            (provider(&OK.replace("\"p\"", "\"a/b\"")), "providers[0].name: \"a/b\" must be a plain file name (no '/', no spaces, not . or ..)"),
            (provider(&OK.replace("\"p\"", "\"..\"")), "providers[0].name: \"..\" must be a plain file name (no '/', no spaces, not . or ..)"),
            (provider(&OK.replace("[\"r.io\"]", "[]")), "providers[0].matchImages: at least 1 pattern is required"),
            (provider(&OK.replace("[\"r.io\"]", "[\"r.io:x\"]")), "providers[0].matchImages: \"r.io:x\" is not a valid image pattern (host[:port][/path] with * globs)"),
            (provider(&OK.replace("\"0s\"", "\"-1s\"")), "providers[0].defaultCacheDuration: \"-1s\" must not be negative"),
            (provider(&OK.replace("\"0s\"", "\"12 hours\"")), "providers[0].defaultCacheDuration: \"12 hours\" is not a duration such as \"12h\", \"90m\" or \"0s\""),
            (provider(&OK.replace(",\"defaultCacheDuration\":\"0s\"", "")), "providers[0].defaultCacheDuration: required (e.g. \"12h\")"),
            (provider(&OK.replace("/v1\"", "/v2\"")), "providers[0].apiVersion: \"credentialprovider.kubelet.k8s.io/v2\" is not one of credentialprovider.kubelet.k8s.io/v1, v1beta1, v1alpha1"),
            (provider(&format!("{OK},\"tokenAttributes\":{{\"serviceAccountTokenAudience\":\"a\",\"cacheType\":\"Token\"}}")), "providers[0].tokenAttributes.requireServiceAccount: required (true or false)"),
            (provider(&format!("{OK},\"tokenAttributes\":{{\"serviceAccountTokenAudience\":\"a\",\"cacheType\":\"Pod\",\"requireServiceAccount\":true}}")), "providers[0].tokenAttributes.cacheType: \"Pod\" is not ServiceAccount or Token"),
            (provider(&format!("{},\"tokenAttributes\":{{\"serviceAccountTokenAudience\":\"a\",\"cacheType\":\"Token\",\"requireServiceAccount\":true}}", OK.replace("/v1\"", "/v1beta1\""))), "providers[0].tokenAttributes: only allowed with apiVersion credentialprovider.kubelet.k8s.io/v1"),
            (provider(&format!("{OK},\"tokenAttributes\":{{\"serviceAccountTokenAudience\":\"a\",\"cacheType\":\"Token\",\"requireServiceAccount\":false,\"requiredServiceAccountAnnotationKeys\":[\"x\"]}}")), "providers[0].tokenAttributes.requiredServiceAccountAnnotationKeys: not allowed when requireServiceAccount is false"),
            (provider(&format!("{OK},\"tokenAttributes\":{{\"serviceAccountTokenAudience\":\"a\",\"cacheType\":\"Token\",\"requireServiceAccount\":true,\"requiredServiceAccountAnnotationKeys\":[\"x\"],\"optionalServiceAccountAnnotationKeys\":[\"x\"]}}")), "providers[0].tokenAttributes: annotation key \"x\" cannot be both required and optional"),
            (provider(&format!("{OK},\"tokenAttributes\":{{\"serviceAccountTokenAudience\":\"a\",\"cacheType\":\"Token\",\"requireServiceAccount\":true,\"optionalServiceAccountAnnotationKeys\":[\"-bad\"]}}")), "providers[0].tokenAttributes.optionalServiceAccountAnnotationKeys: \"-bad\" is not a valid annotation key"),
            (provider(&format!("{OK}}},{{{OK}")), "providers[1].name: \"p\" is defined twice; each provider name may appear once"),
            (r#"{"apiVersion":"kubelet.config.k8s.io/v1","kind":"KubeletConfiguration","providers":[]}"#.into(), "kind \"KubeletConfiguration\" is not CredentialProviderConfig"),
            (r#"{"apiVersion":"v1","kind":"CredentialProviderConfig"}"#.into(), "apiVersion \"v1\" is not kubelet.config.k8s.io/v1, v1beta1 or v1alpha1"),
            (r#"{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[]}"#.into(), "providers: at least 1 provider is required"),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).unwrap_err(), *want, "{text}");
        }
        let unknown = parse(&provider(&format!("{OK},\"matchImage\":[\"x\"]"))).unwrap_err();
        assert!(
            unknown.starts_with("not a CredentialProviderConfig: unknown field `matchImage`"),
            "{unknown}"
        );
    }

    #[test]
    fn a_directory_is_read_in_sorted_order_and_names_stay_unique() {
        let dir = tempfile::tempdir().unwrap();
        let one = provider(&OK.replace("\"p\"", "\"b-provider\""));
        let two = provider(&OK.replace("\"p\"", "\"a-provider\""));
        std::fs::write(dir.path().join("20-b.json"), &one).unwrap();
        std::fs::write(dir.path().join("10-a.yaml"), &two).unwrap();
        std::fs::write(dir.path().join("README.md"), "not read").unwrap();
        let names: Vec<String> = load(dir.path())
            .unwrap()
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(names, ["a-provider", "b-provider"]);

        std::fs::write(dir.path().join("30-c.yml"), &one).unwrap();
        assert_eq!(
            load(dir.path()).unwrap_err().to_string(),
            format!(
                "credential provider config {}: provider name \"b-provider\" is also defined in an earlier file; each provider name may appear once",
                dir.path().join("30-c.yml").display()
            )
        );

        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            load(empty.path()).unwrap_err().to_string(),
            format!(
                "--image-credential-provider-config {}: no *.json, *.yaml or *.yml files in this directory; put the CredentialProviderConfig there",
                empty.path().display()
            )
        );
    }

    #[test]
    fn two_yaml_documents_in_one_file_say_so() {
        let two = format!("{GKE_YAML}---\n{GKE_YAML}");
        assert_eq!(
            parse(&two).unwrap_err(),
            "holds more than one YAML document; put one CredentialProviderConfig in each file (a directory of files is read in name order)"
        );
    }

    #[test]
    fn qualified_names() {
        for ok in [
            "a",
            "iam.gke.io/gcp-service-account",
            "eks.amazonaws.com/role-arn",
            "a_b.c-d",
        ] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "x/", "/x", "A.io/x", &"a".repeat(64)] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
    }
}
