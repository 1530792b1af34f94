//! `WWW-Authenticate` parsing: no panic, one challenge per line, and every parsed challenge
//! survives its own `Display` form (what the error messages print).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pullcheck::registry::challenge::{parse_header, parse_headers, preferred};
use pullcheck::registry::token::scopes;

fuzz_target!(|input: &str| {
    let lines: Vec<&str> = input.split('\n').collect();
    let all = parse_headers(&lines);
    assert!(all.len() <= lines.len());
    if let Some(ch) = preferred(&all) {
        let _ = (ch.realm(), ch.service(), ch.error());
        let s = scopes("repository:fuzz/app:pull", ch);
        assert!(s.split(' ').any(|x| x == "repository:fuzz/app:pull"));
    }
    if let Some(c) = parse_header(input) {
        let shown = c.to_string();
        let back =
            parse_header(&shown).unwrap_or_else(|| panic!("{input:?} → {shown:?} does not parse"));
        assert_eq!(back, c, "{input:?} → {shown:?}");
    }
});
