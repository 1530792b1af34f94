use super::*;
use crate::apiserver::CaBundle;

use std::os::unix::fs::PermissionsExt as _;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(&p, text).unwrap();
    p
}

fn env_var(files: &[&Path]) -> Environment {
    Environment {
        flag: None,
        kubeconfig_var: Some(std::env::join_paths(files).unwrap()),
        home: None,
    }
}

fn loaded(env: &Environment, context: Option<&str>) -> Loaded {
    select(env, context)
        .map_err(|e| e.to_string())
        .unwrap()
        .expect("a kubeconfig")
}

fn error(env: &Environment, context: Option<&str>) -> String {
    select(env, context).map(|_| ()).unwrap_err().to_string()
}

const CA_B64: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==";

/// One file with a context `ctx` → cluster `c` (server `server`) → user `u` (`user` YAML).
fn one(server: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: ctx\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {CA_B64}\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n    namespace: team-a\nusers:\n- name: u\n  user:\n{user}"
    )
}

#[test]
fn files_merge_first_wins_and_paths_resolve_against_their_own_file() {
    let dir = tempfile::tempdir().unwrap();
    // The first file: cluster c and the context; no current-context.
    let a = write(
        dir.path(),
        "a/config",
        "clusters:\n- name: c\n  cluster:\n    server: https://first:6443\n    certificate-authority: ca.pem\ncontexts:\n- name: ctx\n  context: {cluster: c, user: u, namespace: ns-a}\n",
    );
    write(dir.path(), "a/ca.pem", "PEM-A");
    // The second: the same cluster (ignored), the user, current-context.
    let b = write(
        dir.path(),
        "b/config",
        "current-context: ctx\nclusters:\n- name: c\n  cluster:\n    server: https://second:6443\nusers:\n- name: u\n  user:\n    tokenFile: tok\n",
    );
    write(dir.path(), "b/tok", "t0k\n");
    let l = loaded(&env_var(&[&a, &b]), None);
    assert_eq!(l.api.url, "https://first:6443");
    assert_eq!(l.namespace.as_deref(), Some("ns-a"));
    match &l.api.ca {
        Some(CaBundle::Pem { origin, pem }) => {
            assert_eq!(pem, b"PEM-A");
            assert_eq!(
                origin,
                &format!(
                    "kubeconfig {}, cluster c: certificate-authority {}",
                    a.display(),
                    dir.path().join("a/ca.pem").display()
                )
            );
        }
        other => panic!("{other:?}"),
    }
    match &l.api.credentials {
        Credentials::TokenFile(f) => assert_eq!(f, &dir.path().join("b/tok")),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        l.api.source,
        Source::Kubeconfig {
            by: "$KUBECONFIG",
            files: vec![a.clone(), b.clone()],
            context: "ctx".into()
        }
    );
    assert_eq!(
        l.api.source.to_string(),
        format!("$KUBECONFIG ({}:{}), context ctx", a.display(), b.display())
    );
}

#[test]
fn the_source_is_flag_then_kubeconfig_var_then_home_and_missing_entries_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let home_cfg = write(
        &home,
        ".kube/config",
        &one("https://home:6443", "    token: h\n"),
    );
    let var = write(
        dir.path(),
        "var",
        &one("https://var:6443", "    token: v\n"),
    );
    let flag = write(
        dir.path(),
        "flag",
        &one("https://flag:6443", "    token: f\n"),
    );
    let missing = dir.path().join("missing");
    let mut env = Environment {
        flag: Some(flag.clone()),
        kubeconfig_var: Some(std::env::join_paths([&missing, &var]).unwrap()),
        home: Some(home.clone()),
    };
    assert_eq!(loaded(&env, None).api.url, "https://flag:6443");
    env.flag = None;
    let l = loaded(&env, None);
    assert_eq!(l.api.url, "https://var:6443");
    assert_eq!(
        l.api.source.to_string(),
        format!("$KUBECONFIG ({}), context ctx", var.display())
    );
    // What the watch prints on stderr and the webhook logs.
    assert_eq!(
        l.api.source.announce(),
        Some(format!(
            "using kubeconfig $KUBECONFIG ({}), context ctx",
            var.display()
        ))
    );
    // $KUBECONFIG naming only missing files: no kubeconfig, and ~/.kube/config is not read.
    env.kubeconfig_var = Some(missing.clone().into_os_string());
    assert!(select(&env, None).unwrap().is_none());
    assert_eq!(
        why_none(&env),
        format!(
            "$KUBECONFIG ({}) names no file that exists",
            missing.display()
        )
    );
    env.kubeconfig_var = None;
    let l = loaded(&env, None);
    assert_eq!(l.api.url, "https://home:6443");
    assert_eq!(
        l.api.source.to_string(),
        format!("~/.kube/config ({}), context ctx", home_cfg.display())
    );
    env.home = Some(dir.path().join("nohome"));
    assert!(select(&env, None).unwrap().is_none());
    assert_eq!(
        error(&env, Some("x")),
        "--context x: no kubeconfig found (pass --kubeconfig FILE or set KUBECONFIG)"
    );
    // --kubeconfig must exist.
    env.flag = Some(missing.clone());
    assert_eq!(
        error(&env, None),
        format!(
            "--kubeconfig {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
}

#[test]
fn a_broken_file_is_an_error_not_a_fall_back() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad", "clusters: [unclosed\n");
    let good = write(
        dir.path(),
        "good",
        &one("https://good:6443", "    token: g\n"),
    );
    let e = error(&env_var(&[&bad, &good]), None);
    assert!(
        e.starts_with(&format!("kubeconfig {}: not a kubeconfig: ", bad.display())),
        "{e}"
    );
    let typed = write(dir.path(), "typed", "clusters: 7\n");
    let e = error(&env_var(&[&typed]), None);
    assert!(
        e.starts_with(&format!(
            "kubeconfig {}: not a kubeconfig: ",
            typed.display()
        )),
        "{e}"
    );
    let d = dir.path().join("adir");
    std::fs::create_dir(&d).unwrap();
    assert_eq!(
        error(&env_var(&[&d]), None),
        format!(
            "$KUBECONFIG {}: a directory, not a regular file",
            d.display()
        )
    );
}

#[test]
fn contexts_clusters_and_users_that_are_missing_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "k", &one("https://k:6443", "    token: t\n"));
    let env = env_var(&[&f]);
    let fd = f.display();
    assert_eq!(
        error(&env, Some("prod")),
        format!("kubeconfig {fd}: context \"prod\" not found (--context)")
    );
    let none = write(
        dir.path(),
        "none",
        "contexts:\n- name: x\n  context: {cluster: c, user: u}\n",
    );
    assert_eq!(
        error(&env_var(&[&none]), None),
        format!(
            "kubeconfig {}: no current-context; pass --context NAME (kubectl config get-contexts lists them)",
            none.display()
        )
    );
    assert_eq!(
        error(&env_var(&[&none]), Some("x")),
        format!("kubeconfig {}: cluster \"c\" not found", none.display())
    );
    // --context picks another context than current-context.
    let two = write(
        dir.path(),
        "two",
        &format!(
            "{}- name: other\n  user:\n    token: o\n",
            one("https://k:6443", "    token: t\n")
        )
        .replace(
            "contexts:\n",
            "contexts:\n- name: second\n  context: {cluster: c, user: other}\n",
        ),
    );
    let l = loaded(&env_var(&[&two]), Some("second"));
    assert_eq!(l.namespace, None);
    match l.api.credentials {
        Credentials::Token(t) => assert_eq!(t.expose(), "o"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_refused_entry_has_its_own_message() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        (
            "cluster",
            "    insecure-skip-tls-verify: true\n",
            "cluster c: insecure-skip-tls-verify is not supported: a token sent to an unverified server can be stolen; set certificate-authority(-data) to the API server's CA",
        ),
        (
            "cluster",
            "    tls-server-name: api.internal\n",
            "cluster c: tls-server-name is not supported; use a server URL whose host the API server's certificate names",
        ),
        (
            "cluster",
            "    proxy-url: http://proxy:3128\n",
            "cluster c: proxy-url is not supported; reach the API server directly",
        ),
        (
            "user",
            "    auth-provider:\n      name: gcp\n",
            "user u: auth-provider gcp was removed from kubectl; use gke-gcloud-auth-plugin (exec): `gcloud components install gke-gcloud-auth-plugin`, then `gcloud container clusters get-credentials`",
        ),
        (
            "user",
            "    auth-provider:\n      name: azure\n",
            "user u: auth-provider azure was removed from kubectl; use kubelogin (exec): `kubelogin convert-kubeconfig`",
        ),
        (
            "user",
            "    auth-provider:\n      name: oidc\n",
            "user u: auth-provider oidc is not supported; use kubelogin or an oidc exec plugin (exec)",
        ),
        (
            "user",
            "    username: admin\n    password: pw\n",
            "user u: username/password (basic auth) is not supported: the API server removed it (v1.19); use a token, a client certificate or an exec plugin",
        ),
        (
            "user",
            "    as: someone\n",
            "user u: as (impersonation) is not supported; use a context whose user is the identity to act as",
        ),
        (
            "user",
            "    client-certificate-data: Q0VSVA==\n",
            "user u: client-certificate without client-key; set both",
        ),
        (
            "user",
            "    client-key-data: S0VZ\n",
            "user u: client-key without client-certificate; set both",
        ),
        (
            "user",
            "    client-key-data: '%%'\n    client-certificate-data: Q0VSVA==\n",
            "user u: client-key-data: not base64 (Invalid symbol 37, offset 0.)",
        ),
        (
            "user",
            "    exec:\n      command: p\n      apiVersion: client.authentication.k8s.io/v1alpha1\n",
            "user u: exec: apiVersion \"client.authentication.k8s.io/v1alpha1\" is not client.authentication.k8s.io/v1 or v1beta1",
        ),
        (
            "user",
            "    exec:\n      command: p\n      apiVersion: client.authentication.k8s.io/v1\n",
            "user u: exec: interactiveMode is required with client.authentication.k8s.io/v1 (Never, IfAvailable or Always)",
        ),
        (
            "user",
            "    exec:\n      command: p\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Sometimes\n",
            "user u: exec: interactiveMode \"Sometimes\" is not Never, IfAvailable or Always",
        ),
        (
            "user",
            "    tokenFile: nothere\n",
            "user u: tokenFile DIR/nothere: No such file or directory (os error 2)",
        ),
        (
            "user",
            "    token: \"abc\\u0007def\"\n",
            "user u: token: the token holds a line break or another control character, which an HTTP header can't carry; write the token on one line",
        ),
        (
            "user",
            "    tokenFile: two-lines\n",
            "user u: tokenFile DIR/two-lines: the token holds a line break or another control character, which an HTTP header can't carry; write the token on one line",
        ),
    ];
    write(dir.path(), "two-lines", "first\nsecond\n");
    for (i, (kind, extra, want)) in cases.iter().enumerate() {
        let text = match *kind {
            "cluster" => one("https://k:6443", "    token: t\n").replace(
                "    server: https://k:6443\n",
                &format!("    server: https://k:6443\n{extra}"),
            ),
            _ => one("https://k:6443", extra),
        };
        let f = write(dir.path(), &format!("k{i}"), &text);
        let want = format!(
            "kubeconfig {}, {}",
            f.display(),
            want.replace("DIR", &dir.path().display().to_string())
        );
        assert_eq!(error(&env_var(&[&f]), None), want);
    }
}

#[test]
fn a_client_certificate_and_an_exec_plugin_are_read_with_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "kc/crt.pem", "CERT");
    write(dir.path(), "kc/key.pem", "KEY");
    let f = write(
        dir.path(),
        "kc/config",
        &one(
            "https://k:6443",
            "    client-certificate: crt.pem\n    client-key: key.pem\n    exec:\n      command: ./bin/plugin\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n      provideClusterInfo: true\n",
        )
        .replace(
            "    certificate-authority-data",
            "    extensions:\n    - name: client.authentication.k8s.io/exec\n      extension: {audience: x}\n    certificate-authority-data",
        ),
    );
    let l = loaded(&env_var(&[&f]), None);
    let id = l.api.identity.expect("a client certificate");
    assert_eq!(id.certificate_pem, b"CERT");
    assert_eq!(id.key_pem.expose(), "KEY");
    assert_eq!(id.origin, format!("kubeconfig {}, user u", f.display()));
    let Credentials::Exec(p) = &l.api.credentials else {
        panic!("{:?}", l.api.credentials)
    };
    assert_eq!(
        p.command(),
        dir.path().join("kc/bin/plugin").display().to_string()
    );
    assert_eq!(
        p.exec_info(false),
        format!(
            r#"{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{{"interactive":false,"cluster":{{"server":"https://k:6443","certificate-authority-data":"{CA_B64}","config":{{"audience":"x"}}}}}}}}"#
        )
    );
    // A bare command is looked up in PATH, not next to the file.
    let g = write(
        dir.path(),
        "kc/bare",
        &one(
            "https://k:6443",
            "    exec:\n      command: aws\n      apiVersion: client.authentication.k8s.io/v1beta1\n",
        ),
    );
    let Credentials::Exec(p) = loaded(&env_var(&[&g]), None).api.credentials else {
        panic!()
    };
    assert_eq!(p.command(), "aws");
    // v1beta1 defaults to IfAvailable; without provideClusterInfo no spec.cluster.
    assert_eq!(
        p.exec_info(false),
        r#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":false}}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_one_plugin_run_and_a_refusal_runs_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("runs");
    let script = write(
        dir.path(),
        "plugin.sh",
        &format!(
            "#!/bin/sh\necho x >> {}\nsleep 0.2\necho \"$KUBERNETES_EXEC_INFO\" > {}/info\nprintf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"tok-%s\"}}}}' \"$(wc -l < {})\"\n",
            count.display(),
            dir.path().display(),
            count.display()
        ),
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let f = write(
        dir.path(),
        "config",
        &one(
            "https://k:6443",
            "    exec:\n      command: ./plugin.sh\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n",
        ),
    );
    let creds = loaded(&env_var(&[&f]), None).api.credentials;
    let tokens = futures_util::future::join_all((0..5).map(|_| creds.bearer())).await;
    for t in tokens {
        assert_eq!(t.unwrap().unwrap().expose().trim(), "tok-1");
    }
    assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 1);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("info"))
            .unwrap()
            .trim(),
        r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":false}}"#
    );
    assert!(creds.refused());
    assert_eq!(
        creds.bearer().await.unwrap().unwrap().expose().trim(),
        "tok-2"
    );
    assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 2);
}

#[tokio::test]
async fn a_failing_plugin_gives_its_last_stderr_line_and_a_missing_one_its_install_hint() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "fail.sh",
        "#!/bin/sh\necho starting >&2\necho 'error: not logged in; run aws sso login' >&2\nexit 3\n",
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exec = |cmd: &str, hint: &str| {
        one(
            "https://k:6443",
            &format!(
                "    exec:\n      command: {cmd}\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n      installHint: {hint}\n"
            ),
        )
    };
    let f = write(dir.path(), "config", &exec("./fail.sh", "x"));
    let creds = loaded(&env_var(&[&f]), None).api.credentials;
    let e = creds.bearer().await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "exec plugin {} (kubeconfig {}, user u): failed (exit status: 3): error: not logged in; run aws sso login",
            dir.path().join("fail.sh").display(),
            f.display()
        )
    );
    assert!(!e.is_retryable());
    let g = write(
        dir.path(),
        "config2",
        &exec(
            "pullcheck-no-such-plugin",
            "'install it with: brew install x'",
        ),
    );
    let creds = loaded(&env_var(&[&g]), None).api.credentials;
    assert_eq!(
        creds.bearer().await.unwrap_err().to_string(),
        format!(
            "exec plugin pullcheck-no-such-plugin (kubeconfig {}, user u): cannot run it: No such file or directory (os error 2): not found on PATH; install it with: brew install x",
            g.display()
        )
    );
}

/// A plugin that answered but left a child holding its stdout (a background refresher that
/// kept the descriptor) gives its token at once, not "no answer" after 30 s.
#[tokio::test]
async fn a_plugin_whose_leftover_child_holds_stdout_still_answers() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "p.sh",
        "#!/bin/sh\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t-1\"}}'\nsleep 60 &\n",
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exec = "    exec:\n      command: ./p.sh\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n";
    let f = write(dir.path(), "config", &one("https://k:6443", exec));
    let creds = loaded(&env_var(&[&f]), None).api.credentials;
    let t = std::time::Instant::now();
    assert_eq!(creds.bearer().await.unwrap().unwrap().expose(), "t-1");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
}

/// A client key that is not the certificate's reads as that, not as rustls'
/// `InconsistentKeys(KeyMismatch)`.
#[test]
fn a_client_key_of_another_certificate_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(d)
            .output()
            .expect("openssl (install the openssl package)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    for stem in ["a", "b"] {
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "10",
            "-subj",
            "/CN=user",
            "-keyout",
            &format!("{stem}.key"),
            "-out",
            &format!("{stem}.crt"),
        ]);
    }
    let f = write(
        d,
        "config",
        &one(
            "https://k:6443",
            "    client-certificate: a.crt\n    client-key: b.key\n",
        )
        .replace(
            &format!("certificate-authority-data: {CA_B64}"),
            "certificate-authority: a.crt",
        ),
    );
    let l = loaded(&env_var(&[&f]), None);
    assert_eq!(
        l.api.tls_config().unwrap_err().to_string(),
        format!(
            "kubeconfig {}, user u: client-key does not belong to client-certificate (their public keys differ); set the key the certificate was issued for",
            f.display()
        )
    );
}

#[test]
fn a_name_used_twice_in_one_file_is_refused_as_kubectl_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let base = one("https://k:6443", "    token: t\n");
    // A second cluster "c" (another server), a second user "u", a second context "ctx".
    let cases = [
        (
            "cluster",
            "c",
            base.replace(
                "clusters:\n",
                "clusters:\n- name: c\n  cluster:\n    server: https://other:6443\n",
            ),
        ),
        (
            "user",
            "u",
            format!("{base}- name: u\n  user:\n    token: other\n"),
        ),
        (
            "context",
            "ctx",
            base.replace(
                "contexts:\n",
                "contexts:\n- name: ctx\n  context: {cluster: c, user: u, namespace: prod}\n",
            ),
        ),
    ];
    for (what, name, text) in cases {
        let f = write(dir.path(), &format!("dup-{what}"), &text);
        assert_eq!(
            error(&env_var(&[&f]), None),
            format!(
                "kubeconfig {}: two {what} entries named {name:?}; rename or remove one",
                f.display()
            )
        );
    }
    // The same name in two files is the merge, not a duplicate: the first file wins.
    let first = write(dir.path(), "first", &base);
    let second = write(
        dir.path(),
        "second",
        &one("https://second:6443", "    token: s\n"),
    );
    let l = loaded(&env_var(&[&first, &second]), None);
    assert_eq!(l.api.url, "https://k:6443");
}

#[test]
fn context_names_are_every_files_merged_and_sorted_and_none_when_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "a",
        "contexts:\n- name: prod\n  context: {cluster: c}\n- name: dev\n  context: {cluster: c}\n",
    );
    // The second file repeats `dev` (merged, not listed twice) and adds `staging`; its user
    // refers to nothing: names are listed without resolving any entry.
    let b = write(
        dir.path(),
        "b",
        "contexts:\n- name: staging\n  context: {cluster: x, user: nobody}\n- name: dev\n  context: {cluster: y}\n",
    );
    assert_eq!(
        context_names(&env_var(&[&a, &b])),
        ["dev", "prod", "staging"]
    );
    // --kubeconfig alone, as select reads it.
    let flag = Environment {
        flag: Some(b.clone()),
        ..Environment::default()
    };
    assert_eq!(context_names(&flag), ["dev", "staging"]);
    let broken = write(dir.path(), "broken", "contexts: [unclosed\n");
    assert!(context_names(&env_var(&[&broken])).is_empty());
    assert!(context_names(&Environment::default()).is_empty());
}
