//! The credential-provider decoders: a `CredentialProviderConfig` (JSON or YAML, every
//! field validated, Go durations) and a plugin's `CredentialProviderResponse` for each exec
//! API version. Input: the config text, a NUL byte, the response bytes. No panic on any
//! input, and no error line may repeat a password from the response.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (config, response) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[..0]),
    };
    let config = String::from_utf8_lossy(config);
    let (_, answers) = pullcheck::credentials::provider::fuzz_decoders(&config, response);
    // A password the response carries must never reach an error message.
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(response) {
        let passwords: Vec<String> = v
            .get("auth")
            .and_then(|a| a.as_object())
            .into_iter()
            .flat_map(|a| a.values())
            .filter_map(|e| e.get("password").and_then(|p| p.as_str()))
            .filter(|p| p.len() >= 8)
            .map(str::to_string)
            .collect();
        for e in answers.iter().filter_map(|a| a.as_ref().err()) {
            for p in &passwords {
                assert!(!e.contains(p.as_str()), "an error line repeats a password");
            }
        }
    }
});
