//! Scenario 7: `pullcheck webhook` as a ValidatingWebhookConfiguration by url.

use std::time::{Duration, Instant};

use crate::node::NodeError;
use crate::run::{expect, free_port, job_yaml, make_tls, register_webhook, row, spawn, wait_ready};
use crate::scenarios::Ctx;
use crate::series::md_escape;

/// Scenario 7.
pub fn s7(ctx: &mut Ctx) -> Result<(), NodeError> {
    let node = ctx.node.clone();
    let ns = "ff-s7";
    node.new_ns(ns, Some("pullcheck-scenario=admission"))?;
    let tls = node.work.join("webhook-tls");
    make_tls(&node, &tls)?;
    let port = free_port()?;
    let token = node.work.join("apiserver.token");
    std::fs::write(&token, node.var("PULLCHECK_CP_TOKEN"))
        .map_err(|e| NodeError::Setup(e.to_string()))?;
    let cp_ca = format!("{}/cp/pki/ca.crt", node.var("PULLCHECK_CLUSTER_DIR"));
    let listen = format!("127.0.0.1:{port}");
    let (crt, key, ca) = (
        tls.join("server.crt"),
        tls.join("server.key"),
        tls.join("ca.crt"),
    );
    let hook = spawn(
        &node.pc,
        &[
            "webhook",
            "--listen",
            &listen,
            "--tls-cert",
            &crt.display().to_string(),
            "--tls-key",
            &key.display().to_string(),
            "--allow-loopback-registries",
            "--insecure-registry",
            node.wreg(),
            // Required; only /validate is registered here, so nothing pulls it.
            "--inject-image",
            concat!("ghcr.io/pullcheck/pullcheck:", env!("CARGO_PKG_VERSION")),
            "--apiserver",
            node.var("PULLCHECK_CP_SERVER"),
            "--apiserver-token-file",
            &token.display().to_string(),
            "--apiserver-ca-file",
            &cp_ca,
        ],
        &[],
        &node.work.join("webhook.log"),
    )?;
    wait_ready(&format!("https://{listen}/readyz"), Some(&ca), 50);
    register_webhook(
        &node,
        "Validating",
        "pullcheck-scenario",
        "validate",
        &listen,
        &ca,
        "admission",
        "\"CREATE\", \"UPDATE\"",
    )?;
    std::thread::sleep(Duration::from_secs(2)); // the apiserver's webhook configuration informer
    let f = job_yaml(ns, "missing", &node.missing(), "Never", 0, "1", "2Gi", "");
    let start = Instant::now();
    let created = node.kubectl(&["create", "-f", "-"], Some(&f))?;
    let tdeny = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(10));
    let count = |what: &str| -> Result<usize, NodeError> {
        Ok(node.kubectl_json(&["-n", ns, "get", what])?["items"]
            .as_array()
            .map(Vec::len)
            .unwrap_or(0))
    };
    let (npods, njobs) = (count("pods")?, count("jobs")?);
    let tafter = start.elapsed().as_secs_f64();
    let present = job_yaml(ns, "present", &node.present(), "Never", 0, "1", "2Gi", "");
    let t1 = Instant::now();
    let admitted = node.kubectl(&["create", "-f", "-"], Some(&present))?;
    let tadm = t1.elapsed().as_secs_f64();
    node.kubectl_ok(
        &[
            "delete",
            "validatingwebhookconfiguration",
            "pullcheck-scenario",
        ],
        None,
    )?;
    drop(hook);
    let rc = created.code.unwrap_or(-1);
    let out = format!("{}{}", created.stdout, created.stderr)
        .trim_end()
        .to_string();
    expect(
        "7",
        rc != 0 && npods == 0 && njobs == 0 && admitted.ok(),
        || {
            format!(
                "want rejected, 0 Jobs and pods, the present tag admitted; got exit {rc}, {njobs} Jobs, {npods} pods, present admitted {}",
                admitted.ok()
            )
        },
    )?;
    let outcome = format!(
        "**rejected** at admission (kubectl exit {rc}); {njobs} Jobs, **{npods} pods** in the namespace 10 s later"
    );
    let (tdeny_s, tadm_s, tafter_s) = (
        format!("{tdeny:.1}"),
        format!("{tadm:.1}"),
        format!("{tafter:.1}"),
    );
    row(
        &mut ctx.out,
        "7",
        [
            "`pullcheck webhook` (enforce, fail-open) as a ValidatingWebhookConfiguration by `url`; plain Job, tag does not exist",
            &outcome,
            &format!(
                "**{tdeny_s} s** (kubectl create round trip); a present tag was admitted in {tadm_s} s"
            ),
            "—",
            &md_escape(&out),
            "0m / 0Mi (never scheduled)",
            "0m / 0Mi",
        ],
    );
    ctx.out.timelines.insert("7".into(), format!(
        "7,0.0,0,0,kubectl create\n7,{tdeny_s},0,0,rejected at admission\n7,{tafter_s},0,0,checked: {njobs} Jobs; {npods} pods\n"));
    ctx.out.summaries.insert("7".into(), format!(
        "- **Admission webhook** (7): the Job is rejected in {tdeny_s} s (the `kubectl create` round trip), {njobs} Jobs and {npods} pods exist afterwards: no reservation at all."));
    let adm = format!("{}{}", admitted.stdout, admitted.stderr).replace('\n', " ");
    ctx.out.details.insert("7".into(), format!(
        "### Scenario 7: admission webhook\n\n`kubectl create -f` of the missing-image Job (exit {rc}, {tdeny_s} s):\n\n```\n{out}\n```\n\nThe same Job with the present tag: `{adm}` ({tadm_s} s).\n\n"));
    Ok(())
}
