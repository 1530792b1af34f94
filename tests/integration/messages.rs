//! Messages that send a newcomer the right way, through the binary as a user runs it: a
//! pasted `docker://` prefix or an empty tag, and `-o json` runs that end in a usage error.

use crate::support::process::run;

#[test]
fn a_pasted_prefix_and_an_empty_tag_name_the_fix() {
    let r = run(
        &[
            "check",
            "--no-docker-config",
            "docker://busybox:1.36",
            "trainer:",
        ],
        &[],
    );
    r.assert_code(10);
    // Each line without its elapsed milliseconds.
    let lines: Vec<(String, String)> = r
        .stdout
        .lines()
        .map(|l| {
            let (head, detail) = l.split_once("ms: ").unwrap();
            let head = head.rsplit_once(' ').unwrap().0;
            (head.to_string(), detail.to_string())
        })
        .collect();
    assert_eq!(
        lines,
        [
            (
                "invalid_reference docker://busybox:1.36".to_string(),
                "invalid reference \"docker://busybox:1.36\": docker:// is a transport prefix \
(skopeo's), not part of an image reference; drop the docker:// prefix: busybox:1.36"
                    .to_string()
            ),
            (
                "invalid_reference trainer:".to_string(),
                "invalid reference \"trainer:\": the tag after ':' is empty; name one \
(trainer:TAG) or drop the ':' to pull trainer:latest"
                    .to_string()
            ),
        ]
    );
}

/// `-o json` always leaves one document on stdout naming the exit code, whether the command
/// refused a value, clap refused a flag, or explain refused the reference.
#[test]
fn json_output_ends_a_usage_error_with_a_document() {
    let doc = |code: u8, error: &str| serde_json::json!({"schema_version": 1, "exit_code": code, "error": error});
    for (args, code, error) in [
        (
            vec!["check", "-o", "json", "--timeout", "0", "busybox"],
            2,
            "--timeout 0: must be more than 0 and at most 86400 seconds",
        ),
        (
            vec!["check", "--output=json", "--no-such-flag", "busybox"],
            2,
            "unexpected argument '--no-such-flag' found",
        ),
        (
            vec!["scan", "-ojson", "-f", "/nonexistent/job.yaml"],
            2,
            "/nonexistent/job.yaml: cannot read: No such file or directory (os error 2)",
        ),
        (
            vec!["explain", "--output", "json", "trainer:"],
            10,
            "invalid reference \"trainer:\": the tag after ':' is empty; name one (trainer:TAG) \
or drop the ':' to pull trainer:latest",
        ),
    ] {
        let r = run(&args, &[]);
        r.assert_code(i32::from(code));
        assert_eq!(r.json(), doc(code, error), "{args:?}");
        // The one line on stderr is still there for a person.
        assert!(r.stderr.contains(error), "{args:?}: {}", r.stderr);
    }
    // watch --once with an API server that doesn't answer: transient, still a document.
    let port = crate::support::ports::free_port().unwrap();
    let api = format!("https://127.0.0.1:{port}");
    let r = run(&["watch", "--once", "-o", "json", "--apiserver", &api], &[]);
    r.assert_code(20);
    let j = r.json();
    assert_eq!(
        (j["schema_version"].clone(), j["exit_code"].clone()),
        (serde_json::json!(1), serde_json::json!(20))
    );
    let error = j["error"].as_str().unwrap();
    // The API client classifies transport failures as the registry client does.
    assert_eq!(
        error,
        format!("LIST {api}/api/v1/pods: cannot connect: connection refused")
    );
    assert_eq!(r.stderr, format!("pullcheck: {error}\n"));
    // No API server found: why, in one line (the kubeconfig files that don't exist).
    let r = run(
        &["watch", "--once"],
        &[("KUBECONFIG", "/nonexistent/a:/nonexistent/b")],
    );
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        "pullcheck: no Kubernetes API: $KUBECONFIG (/nonexistent/a:/nonexistent/b) names no file that exists, and not in a cluster (no KUBERNETES_SERVICE_HOST and ServiceAccount token); pass --kubeconfig FILE or --apiserver URL, or set KUBECONFIG\n"
    );
    for (args, line) in [
        (
            vec!["watch", "--once", "--context", ""],
            "pullcheck: --context \"\": empty; name a context of the kubeconfig (kubectl config get-contexts), or leave --context out for its current-context\n",
        ),
        (
            vec![
                "watch",
                "--once",
                "-n",
                "",
                "--apiserver",
                "https://127.0.0.1:1",
            ],
            "pullcheck: --namespace \"\": not a namespace name (lowercase letters, digits and '-', at most 63); use -A to watch every namespace\n",
        ),
    ] {
        let r = run(&args, &[]);
        r.assert_code(2);
        assert_eq!(r.stderr, line, "{args:?}");
    }
    // A kubeconfig whose CA does not sign the API server's certificate (a TLS registry
    // stands in for the server: the handshake fails before any request): usage, naming the
    // kubeconfig file and cluster entry.
    let reg = crate::support::start_dedicated(crate::support::Mode::Basic);
    let dir = crate::support::temp_dir();
    let (other_ca, _) = crate::support::tls::self_signed(dir.path(), "other", "other CA", true);
    let kubeconfig = dir.path().join("config");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters:\n- name: prod\n  cluster:\n    server: https://{}\n    certificate-authority: other.crt\ncontexts:\n- name: x\n  context: {{cluster: prod, user: u}}\nusers:\n- name: u\n  user: {{token: t}}\n",
            reg.host
        ),
    )
    .unwrap();
    let r = run(
        &[
            "watch",
            "--once",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
        &[],
    );
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: using kubeconfig --kubeconfig ({k}), context x\npullcheck: LIST https://{h}/api/v1/namespaces/default/pods: TLS: certificate not trusted (unknown issuer); kubeconfig {k}, cluster prod: certificate-authority {ca} does not sign it; set it to the API server's CA\n",
            h = reg.host,
            k = kubeconfig.display(),
            ca = other_ca.display()
        )
    );
    let r = run(&["watch", "--once"], &[("HOME", "/nonexistent-home")]);
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        "pullcheck: no Kubernetes API: no kubeconfig (/nonexistent-home/.kube/config does not exist), and not in a cluster (no KUBERNETES_SERVICE_HOST and ServiceAccount token); pass --kubeconfig FILE or --apiserver URL, or set KUBECONFIG\n"
    );
    // Text output keeps stdout empty.
    let r = run(&["check", "--timeout", "0", "busybox"], &[]);
    r.assert_code(2);
    assert_eq!(r.stdout, "");
}

/// `pullcheck audit` before it reaches a cluster: a namespace that can't be one, no API
/// server found, and one that doesn't answer (transient, still a JSON document).
#[test]
fn audit_says_what_keeps_it_from_the_cluster_in_one_line() {
    let r = run(&["audit", "-n", "Team_A"], &[]);
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        "pullcheck: --namespace \"Team_A\": not a namespace name (lowercase letters, digits and '-', at most 63); use -A to audit every namespace\n"
    );
    let r = run(
        &["audit", "-A"],
        &[("KUBECONFIG", "/nonexistent/a:/nonexistent/b")],
    );
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        "pullcheck: no Kubernetes API: $KUBECONFIG (/nonexistent/a:/nonexistent/b) names no file that exists, and not in a cluster (no KUBERNETES_SERVICE_HOST and ServiceAccount token); pass --kubeconfig FILE or --apiserver URL, or set KUBECONFIG\n"
    );
    let port = crate::support::ports::free_port().unwrap();
    let api = format!("https://127.0.0.1:{port}");
    let r = run(&["audit", "-A", "-o", "json", "--apiserver", &api], &[]);
    r.assert_code(20);
    let error =
        format!("listing nodes: LIST {api}/api/v1/nodes: cannot connect: connection refused");
    assert_eq!(
        r.json(),
        serde_json::json!({"schema_version": 1, "exit_code": 20, "error": error})
    );
    assert_eq!(r.stderr, format!("pullcheck: {error}\n"));
}
