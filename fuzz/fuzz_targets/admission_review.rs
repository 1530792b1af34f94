//! AdmissionReview handling, without the network: decode the body the API server sends,
//! triage it, and run the pure decision steps of both endpoints (validate with the lint
//! notes, mutate = inject) on whatever is checked. No panic on any body; every answer
//! serialises to an AdmissionReview.
#![no_main]

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use libfuzzer_sys::fuzz_target;
use pullcheck::k8s::inject::InjectOptions;
use pullcheck::k8s::lint::lint_object;
use pullcheck::k8s::templates::{Table, pod_templates};
use pullcheck::platform::Platform;
use pullcheck::webhook::Mode;
use pullcheck::webhook::handler::template_platforms;
use pullcheck::webhook::review::{self, Policy, Triage, Webhook};

fn encode(resp: AdmissionResponse) {
    serde_json::to_vec(&resp.into_review()).expect("an AdmissionReview always serialises");
}

fuzz_target!(|body: &[u8]| {
    let Ok(review) = serde_json::from_slice::<AdmissionReview<DynamicObject>>(body) else {
        return;
    };
    let req: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(e) => return encode(AdmissionResponse::invalid(e)),
    };
    let table = Table::builtin();
    let object = req
        .object
        .as_ref()
        .map(|o| review::object_json(o, &req.kind));
    let old = req
        .old_object
        .as_ref()
        .map(|o| review::object_json(o, &req.kind));
    let cluster = [
        Platform::parse("linux/amd64").unwrap(),
        Platform::parse("linux/arm64").unwrap(),
    ];
    for webhook in [Webhook::Validate, Webhook::Mutate] {
        let triage = review::triage(
            &req.operation,
            object.as_ref(),
            old.as_ref(),
            &table,
            webhook,
        );
        let (Triage::Check, Some(obj)) = (triage, object.as_ref()) else {
            encode(AdmissionResponse::from(&req));
            continue;
        };
        for t in pod_templates(obj, &table) {
            if let Some(template) = obj.pointer(&t.pointer) {
                let _ = template_platforms(template, &cluster);
            }
        }
        match webhook {
            Webhook::Validate => {
                let notes: Vec<String> = lint_object(obj, &table)
                    .into_iter()
                    .map(|f| f.message)
                    .collect();
                for mode in [Mode::Enforce, Mode::Warn] {
                    let policy = Policy {
                        mode,
                        fail_closed: true,
                    };
                    let resp = review::validate(&req, &[], &notes, policy);
                    assert!(resp.allowed || mode == Mode::Enforce);
                    encode(resp);
                }
            }
            Webhook::Mutate => {
                encode(review::mutate(
                    &req,
                    obj,
                    &[],
                    &InjectOptions::default(),
                    &table,
                ));
            }
        }
    }
});
