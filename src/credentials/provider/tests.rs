//! Providers over scripted plugins (shell scripts named as such: they stand in for a
//! plugin's edge cases; the real `ecr-credential-provider` runs in tests/integration).

use super::*;
use std::ffi::OsString;
use std::sync::Mutex;

/// A scripted plugin: appends its stdin (one line) to `requests`, its args and `$MARK` to
/// `calls`, then prints `$ANSWER` (from the provider's env) and exits `$STATUS` (default 0).
const SCRIPT: &str = r#"#!/bin/sh
req=$(cat)
printf '%s\n' "$req" >> "$DIR/requests"
printf '%s|%s\n' "$*" "$MARK" >> "$DIR/calls"
printf '%s' "$ANSWER"
exit "${STATUS:-0}"
"#;

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        Fixture { dir }
    }

    fn plugin(&self, name: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn spec(
        &self,
        name: &str,
        matches: &[&str],
        answer: &str,
        env: &[(&str, &str)],
    ) -> ProviderSpec {
        let mut all = vec![
            ("DIR".to_string(), self.dir.path().display().to_string()),
            ("ANSWER".to_string(), answer.to_string()),
        ];
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        ProviderSpec {
            name: name.into(),
            match_images: matches.iter().map(|s| s.to_string()).collect(),
            default_cache_duration: Duration::from_secs(3600),
            api: ExecApi::V1,
            args: vec!["get-credentials".into()],
            env: all,
            token: None,
            file: PathBuf::from("/etc/kubernetes/credential-providers.yaml"),
        }
    }

    fn providers(&self, specs: Vec<ProviderSpec>, timeout: Duration) -> Providers {
        Providers::new(
            specs,
            PluginRunner {
                bin_dir: self.dir.path().to_path_buf(),
                base_env: Some(vec![
                    (OsString::from("PATH"), OsString::from("/usr/bin:/bin")),
                    (OsString::from("MARK"), OsString::from("inherited")),
                ]),
            },
            timeout,
        )
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.path().join("requests"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn answer(key_type: &str, duration: Option<&str>, auth: &[(&str, &str, &str)]) -> String {
    let auth: serde_json::Map<String, serde_json::Value> = auth
        .iter()
        .map(|(k, u, p)| {
            (
                k.to_string(),
                serde_json::json!({"username": u, "password": p}),
            )
        })
        .collect();
    let mut v = serde_json::json!({
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "kind": "CredentialProviderResponse",
        "cacheKeyType": key_type,
        "auth": auth,
    });
    if let Some(d) = duration {
        v["cacheDuration"] = d.into();
    }
    v.to_string()
}

const ECR: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";

fn users(l: &ProviderLookup) -> Vec<(String, String, String)> {
    l.credentials
        .iter()
        .map(|c| {
            (
                c.username.clone(),
                c.password.expose().to_string(),
                c.source.to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_plugin_gets_the_kubelet_request_and_its_answer_is_a_credential() {
    let f = Fixture::new();
    f.plugin("ecr-credential-provider", SCRIPT);
    let spec = f.spec(
        "ecr-credential-provider",
        &["*.dkr.ecr.*.amazonaws.com"],
        &answer("Registry", Some("6h"), &[(ECR, "AWS", "pw-1")]),
        &[("MARK", "configured")],
    );
    let p = f.providers(vec![spec], Duration::from_secs(10));
    let image = format!("{ECR}/team/app");
    let got = p.lookup(&image, None).await;
    assert_eq!(
        users(&got),
        [(
            "AWS".to_string(),
            "pw-1".to_string(),
            format!("credential provider ecr-credential-provider key {ECR}")
        )]
    );
    assert_eq!(
        got.uses,
        [ProviderUse {
            provider: "ecr-credential-provider".into(),
            matched: "*.dkr.ecr.*.amazonaws.com".into(),
            outcome: ProviderOutcome::Answered {
                key_type: CacheKeyType::Registry,
                key: ECR.into(),
                cached: false
            },
        }]
    );
    // Args as configured; the configured MARK overrides the inherited one.
    assert_eq!(f.calls(), ["get-credentials|configured"]);
    assert_eq!(
        f.requests(),
        [serde_json::json!({
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "kind": "CredentialProviderRequest",
            "image": image,
        })]
    );
    // An image that no pattern matches never runs it.
    assert!(p.lookup("ghcr.io/x/y", None).await.uses.is_empty());
    assert_eq!(p.calls(), [("ecr-credential-provider".to_string(), 1)]);
}

#[tokio::test]
async fn each_cache_key_type_covers_what_it_says() {
    let f = Fixture::new();
    f.plugin("p", SCRIPT);
    let other_account = "210987654321.dkr.ecr.us-east-1.amazonaws.com";
    for (key_type, want_calls) in [("Image", 3), ("Registry", 2), ("Global", 1)] {
        let spec = f.spec(
            "p",
            &["*.dkr.ecr.*.amazonaws.com"],
            &answer(
                key_type,
                None,
                &[("*.dkr.ecr.*.amazonaws.com", "AWS", "pw")],
            ),
            &[],
        );
        let p = f.providers(vec![spec], Duration::from_secs(10));
        // Same image twice, another repository on the registry, another registry.
        for image in [
            format!("{ECR}/a"),
            format!("{ECR}/a"),
            format!("{ECR}/b"),
            format!("{other_account}/c"),
        ] {
            let l = p.lookup(&image, None).await;
            assert_eq!(l.credentials.len(), 1, "{key_type} {image}");
        }
        // Image: a, b, other; Registry: ECR, other; Global: once.
        assert_eq!(p.calls()[0].1, want_calls, "{key_type}");
    }
}

#[tokio::test]
async fn cache_duration_zero_and_default_zero_do_not_cache() {
    let f = Fixture::new();
    f.plugin("p", SCRIPT);
    let image = format!("{ECR}/a");
    // cacheDuration "0s": never cached.
    let p = f.providers(
        vec![f.spec(
            "p",
            &[ECR],
            &answer("Global", Some("0s"), &[(ECR, "u", "p")]),
            &[],
        )],
        Duration::from_secs(10),
    );
    p.lookup(&image, None).await;
    p.lookup(&image, None).await;
    assert_eq!(p.calls()[0].1, 2);
    // Absent cacheDuration with defaultCacheDuration 0: not cached either.
    let mut spec = f.spec(
        "p",
        &[ECR],
        &answer("Global", None, &[(ECR, "u", "p")]),
        &[],
    );
    spec.default_cache_duration = Duration::ZERO;
    let p = f.providers(vec![spec], Duration::from_secs(10));
    p.lookup(&image, None).await;
    p.lookup(&image, None).await;
    assert_eq!(p.calls()[0].1, 2);
    // A short cacheDuration expires.
    let p = f.providers(
        vec![f.spec(
            "p",
            &[ECR],
            &answer("Global", Some("200ms"), &[(ECR, "u", "p")]),
            &[],
        )],
        Duration::from_secs(10),
    );
    p.lookup(&image, None).await;
    let second = p.lookup(&image, None).await;
    assert!(matches!(
        second.uses[0].outcome,
        ProviderOutcome::Answered { cached: true, .. }
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    p.lookup(&image, None).await;
    assert_eq!(p.calls()[0].1, 2);
}

#[tokio::test]
async fn overlapping_providers_join_one_keyring_earlier_provider_first() {
    let f = Fixture::new();
    f.plugin("first", SCRIPT);
    f.plugin("second", SCRIPT);
    let p = f.providers(
        vec![
            f.spec(
                "first",
                &["*.example.com"],
                &answer("Image", None, &[("*.example.com", "one", "1")]),
                &[],
            ),
            f.spec(
                "second",
                &["r.example.com"],
                &answer(
                    "Image",
                    None,
                    &[
                        ("*.example.com", "two", "2"),
                        ("r.example.com/team", "three", "3"),
                    ],
                ),
                &[],
            ),
        ],
        Duration::from_secs(10),
    );
    let got = users(&p.lookup("r.example.com/team/app", None).await);
    // The most specific pattern first; for one pattern, the earlier provider first.
    assert_eq!(
        got,
        [
            (
                "three".into(),
                "3".into(),
                "credential provider second key r.example.com/team".into()
            ),
            (
                "one".into(),
                "1".into(),
                "credential provider first key *.example.com".into()
            ),
            (
                "two".into(),
                "2".into(),
                "credential provider second key *.example.com".into()
            ),
        ]
    );
}

#[tokio::test]
async fn a_broken_plugin_gives_nothing_and_says_why_in_one_line() {
    let f = Fixture::new();
    f.plugin("hang", "#!/bin/sh\nexec sleep 30\n");
    f.plugin("fail", "#!/bin/sh\necho 'AccessDeniedException: not authorized to perform ecr:GetAuthorizationToken' >&2\nexit 1\n");
    f.plugin("flood", "#!/bin/sh\nexec head -c 104857600 /dev/zero\n");
    f.plugin("garbage", "#!/bin/sh\necho '{\"auth\": s3cr3t'\n");
    f.plugin("old", SCRIPT);
    let old_answer =
        answer("Image", None, &[("r.io", "u", "s3cr3t")]).replace("/v1\"", "/v1beta1\"");
    let p = f.providers(
        vec![
            f.spec("hang", &["r.io"], "", &[]),
            f.spec("fail", &["r.io"], "", &[]),
            f.spec("flood", &["r.io"], "", &[]),
            f.spec("garbage", &["r.io"], "", &[]),
            f.spec("old", &["r.io"], &old_answer, &[]),
            f.spec("missing", &["r.io"], "", &[]),
        ],
        Duration::from_millis(1500),
    );
    let started = Instant::now();
    let got = p.lookup("r.io/x", None).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(got.credentials.is_empty());
    let lines: Vec<String> = got.uses.iter().map(|u| u.describe()).collect();
    let bin = f.dir.path().display();
    assert_eq!(
        lines,
        [
            "credential provider hang: no answer within 1.5 s; the plugin was stopped".to_string(),
            "credential provider fail: failed (exit status: 1): AccessDeniedException: not authorized to perform ecr:GetAuthorizationToken".into(),
            format!("credential provider flood: printed more than {} bytes; the answer was not used", exec::STDOUT_LIMIT),
            "credential provider garbage: the answer is not a CredentialProviderResponse (invalid JSON at line 1 column 10); the answer was not used".into(),
            "credential provider old: answered apiVersion \"credentialprovider.kubelet.k8s.io/v1beta1\", but its config says credentialprovider.kubelet.k8s.io/v1; the answer was not used".into(),
            format!("credential provider missing: cannot run {bin}/missing: No such file or directory (os error 2); put the plugin in --image-credential-provider-bin-dir"),
        ]
    );
    assert!(lines.iter().all(|l| !l.contains("s3cr3t")));
    assert!(got.uses.iter().all(|u| u.gave_nothing_unlike_the_kubelet()));
}

/// A token source that records what it was asked.
#[derive(Default)]
struct Tokens {
    annotations: BTreeMap<String, String>,
    asked: Mutex<Vec<String>>,
    refuse: bool,
}

impl ServiceAccountTokens for Tokens {
    fn service_account<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<ServiceAccountInfo, TokenSourceError>> {
        Box::pin(async move {
            self.asked
                .lock()
                .unwrap()
                .push(format!("sa {namespace}/{name}"));
            Ok(ServiceAccountInfo {
                uid: "uid-1".into(),
                annotations: self.annotations.clone(),
            })
        })
    }

    fn token<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        audience: &'a str,
    ) -> BoxFuture<'a, Result<Secret, TokenSourceError>> {
        Box::pin(async move {
            self.asked
                .lock()
                .unwrap()
                .push(format!("token {namespace}/{name} {audience}"));
            if self.refuse {
                Err(TokenSourceError::Forbidden {
                    namespace: namespace.into(),
                    name: name.into(),
                })
            } else {
                Ok(Secret::new(format!("token-for-{name}")))
            }
        })
    }
}

fn token_spec(f: &Fixture, cache_type: TokenCacheType) -> ProviderSpec {
    ProviderSpec {
        token: Some(TokenAttributes {
            audience: "sts.amazonaws.com".into(),
            cache_type,
            require_service_account: true,
            required_annotation_keys: vec!["eks.amazonaws.com/role-arn".into()],
            optional_annotation_keys: vec!["example.com/optional".into()],
        }),
        ..f.spec(
            "p",
            &[ECR],
            &answer("Registry", None, &[(ECR, "AWS", "pw")]),
            &[],
        )
    }
}

#[tokio::test]
async fn token_mode_passes_the_workload_token_and_annotations() {
    let f = Fixture::new();
    f.plugin("p", SCRIPT);
    let p = f.providers(
        vec![token_spec(&f, TokenCacheType::ServiceAccount)],
        Duration::from_secs(10),
    );
    let image = format!("{ECR}/a");

    // No workload: not run, and not the kubelet's nothing.
    let none = p.lookup(&image, None).await;
    assert_eq!(
        none.uses[0].outcome,
        ProviderOutcome::NoToken("token-mode provider (audience sts.amazonaws.com): pullcheck has no workload ServiceAccount token here; not run".into())
    );
    assert!(none.uses[0].gave_nothing_unlike_the_kubelet());

    let mut ann = BTreeMap::new();
    ann.insert(
        "eks.amazonaws.com/role-arn".to_string(),
        "arn:aws:iam::123456789012:role/app".to_string(),
    );
    ann.insert("unrelated".to_string(), "x".to_string());
    let tokens = Arc::new(Tokens {
        annotations: ann,
        ..Tokens::default()
    });
    let w = |sa: &str| Workload {
        namespace: "team".into(),
        service_account: Some(sa.into()),
        tokens: tokens.clone(),
    };
    let got = p.lookup(&image, Some(&w("trainer"))).await;
    assert_eq!(got.credentials.len(), 1);
    assert_eq!(
        f.requests(),
        [serde_json::json!({
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "kind": "CredentialProviderRequest",
            "image": image,
            "serviceAccountToken": "token-for-trainer",
            "serviceAccountAnnotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/app"},
        })]
    );
    assert_eq!(
        *tokens.asked.lock().unwrap(),
        ["sa team/trainer", "token team/trainer sts.amazonaws.com"]
    );
    // ServiceAccount cache type: the same ServiceAccount is served from the cache, another
    // one runs the plugin again.
    p.lookup(&image, Some(&w("trainer"))).await;
    assert_eq!(p.calls()[0].1, 1);
    p.lookup(&image, Some(&w("other"))).await;
    assert_eq!(p.calls()[0].1, 2);
}

#[tokio::test]
async fn token_mode_not_run_where_the_kubelet_would_not_run_it() {
    let f = Fixture::new();
    f.plugin("p", SCRIPT);
    let p = f.providers(
        vec![token_spec(&f, TokenCacheType::Token)],
        Duration::from_secs(10),
    );
    let image = format!("{ECR}/a");
    let bare = Arc::new(Tokens::default());
    let no_annotation = p
        .lookup(
            &image,
            Some(&Workload {
                namespace: "team".into(),
                service_account: Some("default".into()),
                tokens: bare.clone(),
            }),
        )
        .await;
    assert_eq!(
        no_annotation.uses[0].outcome,
        ProviderOutcome::NotRun("ServiceAccount team/default lacks required annotation eks.amazonaws.com/role-arn; the kubelet would not run it either".into())
    );
    assert!(!no_annotation.uses[0].gave_nothing_unlike_the_kubelet());
    let no_sa = p
        .lookup(
            &image,
            Some(&Workload {
                namespace: "team".into(),
                service_account: None,
                tokens: bare,
            }),
        )
        .await;
    assert!(matches!(no_sa.uses[0].outcome, ProviderOutcome::NotRun(_)));

    let mut ann = BTreeMap::new();
    ann.insert("eks.amazonaws.com/role-arn".to_string(), "arn".to_string());
    let refusing = Arc::new(Tokens {
        annotations: ann,
        refuse: true,
        ..Tokens::default()
    });
    let refused = p
        .lookup(
            &image,
            Some(&Workload {
                namespace: "team".into(),
                service_account: Some("app".into()),
                tokens: refusing,
            }),
        )
        .await;
    assert_eq!(
        refused.uses[0].outcome,
        ProviderOutcome::NoToken("POST serviceaccounts/app/token in namespace team: 403 Forbidden; grant the webhook create on serviceaccounts/token in team (chart value credentialProviders.tokenRequests.namespaces)".into())
    );
    assert_eq!(p.calls()[0].1, 0);
}
