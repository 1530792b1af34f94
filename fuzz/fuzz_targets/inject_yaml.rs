//! `pullcheck inject` on arbitrary YAML streams: no panic; what it writes is YAML it can
//! read again, and injecting twice changes nothing more.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pullcheck::k8s::inject::{InjectOptions, inject_stream};
use pullcheck::k8s::templates::Table;
use pullcheck::k8s::yaml::parse_documents;

fuzz_target!(|text: &str| {
    let table = Table::builtin();
    let opts = InjectOptions::default();
    let Ok((out, _)) = inject_stream(text, &opts, &table) else {
        return;
    };
    parse_documents(&out).unwrap_or_else(|e| panic!("output does not parse: {e}\n{out}"));
    let (twice, _) = inject_stream(&out, &opts, &table)
        .unwrap_or_else(|e| panic!("re-injecting own output failed: {e}\n{out}"));
    assert_eq!(twice, out, "inject is not idempotent");
});
