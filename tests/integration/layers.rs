//! The architecture, checked: which top-level module of `src/` may name which.
//!
//! Edges are derived from the source as `crate::<module>` paths (including
//! `use crate::{a, b::c}` groups) outside `#[cfg(test)]` sections. A new edge fails this test
//! until it is added to [`ALLOWED`] (and README's "Source layout" says why); an edge in the
//! table that the code no longer has fails too, so the table stays the truth.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module → the modules it may name. Lower layers first: `files`, `pem`, `verdict`,
/// `reference`, `platform` name nothing of the crate or only each other; `cli` names
/// everything (it is the shell).
const ALLOWED: &[(&str, &[&str])] = &[
    ("files", &[]),
    ("pem", &["files"]),
    ("verdict", &[]),
    ("reference", &[]),
    ("platform", &[]),
    ("manifest", &["platform"]),
    ("credentials", &["files"]),
    ("registry", &["credentials", "files", "manifest", "pem"]),
    ("apiserver", &["credentials", "files", "pem", "registry"]),
    ("runtime", &["apiserver"]),
    ("serve", &[]),
    ("k8s", &["files", "reference", "verdict"]),
    (
        "engine",
        &[
            "credentials",
            "k8s",
            "manifest",
            "platform",
            "reference",
            "registry",
            "verdict",
        ],
    ),
    ("report", &["engine", "verdict"]),
    (
        "watch",
        &[
            "apiserver",
            "k8s",
            "reference",
            "registry",
            "report",
            "runtime",
            "serve",
            "verdict",
        ],
    ),
    (
        "webhook",
        &[
            "apiserver",
            "credentials",
            "engine",
            "files",
            "k8s",
            "manifest",
            "pem",
            "platform",
            "reference",
            "registry",
            "serve",
            "verdict",
        ],
    ),
    (
        "kueue",
        &[
            "apiserver",
            "k8s",
            "platform",
            "runtime",
            "verdict",
            "webhook",
        ],
    ),
    (
        "audit",
        &[
            "apiserver",
            "k8s",
            "platform",
            "registry",
            "report",
            "serve",
            "verdict",
            "webhook",
        ],
    ),
    (
        "cli",
        &[
            "apiserver",
            "audit",
            "credentials",
            "engine",
            "files",
            "k8s",
            "kueue",
            "platform",
            "reference",
            "registry",
            "report",
            "verdict",
            "watch",
            "webhook",
        ],
    ),
];

/// The top-level modules: `src/X.rs` and `src/X/` (not lib.rs, main.rs).
fn modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            if p.is_dir() {
                Some(name)
            } else {
                name.strip_suffix(".rs")
                    .filter(|n| !matches!(*n, "lib" | "main"))
                    .map(str::to_string)
            }
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `text` without its `#[cfg(test)]` items: each attribute and the one item after it (a
/// `mod x;` or `use …;` up to its `;`, a `mod tests { … }` or `fn` up to its matching `}`).
/// Cutting at the first attribute instead would hide every edge after a
/// `#[cfg(test)] mod recorded;` declared at the top of a file.
fn without_test_items(text: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(ATTR) {
        out.push_str(&rest[..i]);
        let item = &rest[i + ATTR.len()..];
        let semi = item.find(';');
        let brace = item.find('{');
        let end = match (semi, brace) {
            (Some(s), Some(b)) if s < b => s + 1,
            (Some(s), None) => s + 1,
            (_, Some(b)) => {
                let mut depth = 0usize;
                let mut end = item.len();
                for (k, c) in item[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, None) => item.len(),
        };
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The module names a source text refers to as `crate::name` or in `crate::{…}` groups.
fn named(text: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let code = without_test_items(text);
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        let preceded_by_ident = rest[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !preceded_by_ident {
            if let Some(group) = after.strip_prefix('{') {
                // Top-level items of the group: split at depth 0.
                let mut depth = 0;
                let mut item = String::new();
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            out.insert(item.trim().split("::").next().unwrap().to_string());
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    item.push(c);
                }
                out.insert(item.trim().split("::").next().unwrap().to_string());
            } else {
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.insert(name);
            }
        }
        rest = after;
    }
    out.retain(|n| known.contains(n));
    out
}

#[test]
fn module_edges_are_the_ones_the_architecture_allows() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let known = modules(&src);
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(m, to)| (*m, to.iter().copied().collect()))
        .collect();
    let listed: BTreeSet<String> = allowed.keys().map(|m| m.to_string()).collect();
    assert_eq!(
        known, listed,
        "every top-level module of src/ has exactly one row in ALLOWED"
    );

    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let module = first.strip_suffix(".rs").unwrap_or(first).to_string();
        if !known.contains(&module) {
            continue; // lib.rs, main.rs
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for to in named(&text, &known) {
            if to != module {
                found.entry(module.clone()).or_default().insert(to);
            }
        }
    }

    let mut unexpected = Vec::new();
    let mut stale = Vec::new();
    for (m, to) in &allowed {
        let have = found.get(*m).cloned().unwrap_or_default();
        for t in &have {
            if !to.contains(t.as_str()) {
                unexpected.push(format!("{m} -> {t}"));
            }
        }
        for t in to {
            if !have.contains(*t) {
                stale.push(format!("{m} -> {t}"));
            }
        }
    }
    assert!(
        unexpected.is_empty() && stale.is_empty(),
        "edges the table does not allow: {unexpected:?}; edges in the table the code no longer has: {stale:?}"
    );
}

#[test]
fn the_edge_reader_sees_groups_and_skips_tests() {
    let known: BTreeSet<String> = ["a", "b", "c", "d"].map(String::from).into();
    let text = "use crate::a::X;\nuse crate::{b::{Y, Z}, c};\nfn f() { let _ = mycrate::d::W; }\n#[cfg(test)]\nuse crate::d::T;\n";
    assert_eq!(
        named(text, &known),
        ["a", "b", "c"].map(String::from).into()
    );
    // A test-only declaration at the top hides nothing after it; a test module is skipped
    // to its closing brace, and what follows it counts again.
    let text = "#[cfg(test)]\nmod recorded;\nuse crate::a::X;\n#[cfg(test)]\nmod tests { fn t() { if x { crate::b::Y } } }\nfn g() { crate::c::Z }\n";
    assert_eq!(named(text, &known), ["a", "c"].map(String::from).into());
}

#[test]
fn readme_source_layout_names_every_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let layout = readme
        .split("## Source layout")
        .nth(1)
        .expect("README has a Source layout section");
    let missing: Vec<String> = modules(&root.join("src"))
        .into_iter()
        .filter(|m| {
            !layout.contains(&format!("`src/{m}/`")) && !layout.contains(&format!("`src/{m}.rs`"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "README's Source layout omits {missing:?}"
    );
}
