//! The registry configuration the webhook hands to the init container it injects
//! (`pullcheck.io/registry-config`, src/engine/handover.rs), through a real kube-apiserver:
//! a second webhook with `--insecure-registry` (the plain-HTTP fixture registry) beside the
//! chart's `--ca-file` (the private CA of the TLS registries) mutates Jobs; the stored Job's
//! annotation, volume, mount, variable and args are exact, a server-side dry run of the
//! stored Job is a fixed point, the stored init container run as the kubelet would passes,
//! and a missing tag on either registry is refused.

use serde_json::{Value, json};

use super::{
    created, denied, dry_run_create, ensure_namespace, env, get_json, job, second_webhook_extra,
    service_account,
};
use crate::registry_handover::run_init_container;
use crate::support::fixture;

const LABEL: &str = "pullcheck.io/handover-e2e";

fn loopback_warning(host: &str) -> String {
    format!(
        "Warning: registry {host} is a loopback address: the init container can't reach it from the pod network"
    )
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn the_webhooks_registry_settings_reach_the_stored_jobs_init_container() {
    let env = env().expect("setup");
    let f = fixture();
    let ca_flag = env
        .args
        .iter()
        .find(|a| a.starts_with("--ca-file="))
        .expect("the chart passes registry.caCerts as --ca-file")
        .clone();
    let _wh = second_webhook_extra(
        env,
        "pullcheck-handover",
        LABEL,
        "--ca-file=",
        &ca_flag,
        &[format!("--insecure-registry={}", f.anon.host)],
    );
    let ns = "e2e-handover";
    ensure_namespace(ns, &[(LABEL, "true")]);
    service_account(ns, "default", &[]);
    let pem = std::fs::read_to_string(&f.ca_file).unwrap();

    let plain = f.images.oci_manifest.reference(&f.anon);
    let tls = f.images.oci_manifest.reference(&f.token);
    let cases = [
        (
            "plain-http",
            plain.clone(),
            false,
            json!({"caBundles": [pem], "registries": {f.anon.host.clone(): [{"url": format!("http://{}/v2", f.anon.host)}]}}),
            Some(f.anon.host.clone()),
        ),
        (
            "private-ca",
            tls.clone(),
            false,
            json!({"caBundles": [pem]}),
            Some(f.token.host.clone()),
        ),
        (
            "host-network",
            plain.clone(),
            true,
            json!({"caBundles": [pem], "registries": {f.anon.host.clone(): [{"url": format!("http://{}/v2", f.anon.host)}]}}),
            None,
        ),
    ];
    for (name, image, host_network, want, warned) in cases {
        let mut j = job(name, &image);
        if host_network {
            j["spec"]["template"]["spec"]["hostNetwork"] = json!(true);
        }
        let stderr = created(ns, &j, env);
        // The hand-over's own warnings (the lint notes of the validating review come too).
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("Warning: registry "))
            .collect();
        let want_warnings: Vec<String> = warned.iter().map(|h| loopback_warning(h)).collect();
        assert_eq!(warnings, want_warnings, "{name}: {stderr}");

        let stored = get_json(&["-n", ns, "job", name]);
        let t = &stored["spec"]["template"];
        assert_eq!(
            t["metadata"]["annotations"]["pullcheck.io/registry-config"],
            want.to_string().as_str(),
            "{name}"
        );
        let vol: Vec<&Value> = t["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["name"] == "pullcheck-registry-config")
            .collect();
        assert_eq!(
            vol,
            [
                &json!({"name": "pullcheck-registry-config", "downwardAPI": {"items": [{"path": "config.json",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations['pullcheck.io/registry-config']"}}],
                "defaultMode": 420}})
            ],
            "{name}"
        );
        let c = &t["spec"]["initContainers"][0];
        assert_eq!(c["name"], "pullcheck");
        assert_eq!(
            c["args"],
            json!(["check", "--no-docker-config", image]),
            "{name}"
        );
        assert_eq!(
            c["env"],
            json!([{"name": "PULLCHECK_REGISTRY_CONFIG", "value": "/var/run/pullcheck/registry-config/config.json"}]),
            "{name}"
        );
        assert_eq!(
            c["volumeMounts"],
            json!([{"name": "pullcheck-registry-config", "mountPath": "/var/run/pullcheck/registry-config", "readOnly": true}]),
            "{name}"
        );

        // Mutating the stored Job again changes nothing (a server-side dry run goes
        // through both webhooks and the apiserver's defaulting).
        let mut again = stored.clone();
        again["metadata"] = json!({"name": format!("{name}-again")});
        again.as_object_mut().unwrap().remove("status");
        again["spec"].as_object_mut().unwrap().remove("selector");
        if let Some(labels) = again["spec"]["template"]["metadata"]["labels"].as_object_mut() {
            labels.retain(|k, _| {
                !k.contains("controller-uid") && k != "job-name" && !k.ends_with("/job-name")
            });
        }
        let dry = dry_run_create(ns, &again);
        let mut want_t = t.clone();
        let mut got_t = dry["spec"]["template"].clone();
        for x in [&mut want_t, &mut got_t] {
            x["metadata"].as_object_mut().unwrap().remove("labels");
        }
        assert_eq!(got_t, want_t, "{name}: not a fixed point");

        // The stored init container, run as the kubelet would (files from the stored
        // annotations), reaches the registry with no flags of its own.
        run_init_container(t, &[]).assert_code(0);
    }

    // A missing tag on each registry is refused by the validating review.
    for (name, image) in [
        (
            "missing-plain",
            format!("{}/oci/app:no-such-tag", f.anon.host),
        ),
        (
            "missing-tls",
            format!("{}/oci/app:no-such-tag", f.token.host),
        ),
    ] {
        let err = denied(ns, &job(name, &image));
        assert!(
            err.contains(&format!("main: {image}: not_found (manifest unknown")),
            "{err}"
        );
    }
}
