//! AdmissionReview handling, without the network: the webhook's own decode and triage
//! (`triage::decode`), then the pure decision steps of both endpoints (validate with the lint
//! notes, mutate = inject) on whatever is checked. No panic on any body; every answer
//! serialises to an AdmissionReview.
#![no_main]

use kube::core::admission::AdmissionResponse;
use libfuzzer_sys::fuzz_target;
use pullcheck::k8s::inject::InjectOptions;
use pullcheck::k8s::templates::{Table, pod_templates};
use pullcheck::platform::Platform;
use pullcheck::webhook::Mode;
use pullcheck::webhook::platforms::template_platforms;
use pullcheck::webhook::review::{self, Policy};
use pullcheck::webhook::triage::{self, Triage, Webhook};

fn encode(resp: AdmissionResponse) {
    serde_json::to_vec(&resp.into_review()).expect("an AdmissionReview always serialises");
}

fuzz_target!(|body: &[u8]| {
    let table = Table::builtin();
    let cluster = [
        Platform::parse("linux/amd64").unwrap(),
        Platform::parse("linux/arm64").unwrap(),
    ];
    for webhook in [Webhook::Validate, Webhook::Mutate] {
        let decoded = match triage::decode(body, &table, webhook) {
            Ok(d) => d,
            Err(e) => return encode(e.response()),
        };
        let (Triage::Check, Some(obj)) = (&decoded.triage, decoded.object.as_ref()) else {
            encode(AdmissionResponse::from(&decoded.req));
            continue;
        };
        let _ = decoded.namespace();
        for t in pod_templates(obj, &table) {
            if let Some(template) = obj.pointer(&t.pointer) {
                let _ = template_platforms(template, &cluster);
            }
        }
        match webhook {
            Webhook::Validate => {
                let notes = review::lint_notes(obj, &table);
                for mode in [Mode::Enforce, Mode::Warn] {
                    let policy = Policy {
                        mode,
                        fail_closed: true,
                    };
                    let resp = review::validate(&decoded.req, &[], &notes, policy);
                    assert!(resp.allowed || mode == Mode::Enforce);
                    encode(resp);
                }
            }
            Webhook::Mutate => {
                encode(review::mutate(
                    &decoded.req,
                    obj,
                    &[],
                    &InjectOptions::default(),
                    &table,
                ));
            }
        }
    }
});
