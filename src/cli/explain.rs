//! `pullcheck explain IMAGE`: the plan `check` would execute for the image (the engine's
//! [`crate::engine::Resolution`]), printed without contacting any registry. The only thing
//! run is a credential-provider plugin whose `matchImages` match: its answer is the
//! credential (and the cache key) `check` would use.
//! What a person runs when a pull secret "doesn't work".

use clap::Args;

use super::args::{Output, ResolveArgs};
use super::{CliError, UsageError};
use crate::engine::{PlatformCheck, SkipReason};
use crate::reference::{Reference, kubelet_image_sent_to_cri};

/// Arguments of `pullcheck explain`.
#[derive(Debug, Args)]
pub(crate) struct ExplainArgs {
    /// One image reference.
    #[arg(
        value_name = "IMAGE",
        help_heading = "Input",
        long_help = "The image reference to explain, as written in a pod spec."
    )]
    pub image: String,

    #[command(flatten)]
    pub resolve: ResolveArgs,

    /// Output format, on stdout.
    #[arg(long, short = 'o', value_enum, value_name = "FORMAT", default_value_t = Output::Text, help_heading = "Output",
        long_help = "text: a readable report on stdout. json: the same as a JSON object.")]
    pub output: Output,
}

#[derive(serde::Serialize)]
struct Explanation {
    /// The same version as check's, scan's and lint's documents (docs/json-schema.md).
    schema_version: u32,
    image: String,
    reference: String,
    registry: String,
    repository: String,
    manifest_reference: String,
    kubelet_repo_to_pull: String,
    kubelet_image_sent_to_cri: String,
    endpoints: Vec<EndpointView>,
    credentials: Vec<String>,
    /// Each pull-secret key not used for this image, and why (the kubelet keyring's rules).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unmatched_keys: Vec<UnmatchedKey>,
    /// Each credential provider whose matchImages match, and what it answered.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    credential_providers: Vec<String>,
    platform: String,
    /// What the node's runtime (`--node-runtime`) does with an OCI artifact, should the tag
    /// resolve to one (`engine::artifact`).
    artifacts: &'static str,
    /// The `--node-credentials` pattern the registry matches (a 14 there passes, assumed).
    #[serde(skip_serializing_if = "Option::is_none")]
    node_credentials: Option<String>,
    /// Why no endpoint can serve this reference, when none can.
    #[serde(skip_serializing_if = "Option::is_none")]
    no_route: Option<String>,
}

/// A pull-secret key the kubelet's keyring does not use for the image.
#[derive(serde::Serialize)]
struct UnmatchedKey {
    /// Where it was read and the key as written (never the secret).
    credential: String,
    /// Each part that fails: `port: …`, `host: …`, `path: …`, `scheme: …`.
    why: Vec<String>,
}

#[derive(serde::Serialize)]
struct EndpointView {
    url: String,
    mirror: bool,
    capabilities: Vec<&'static str>,
    used_for_this_reference: bool,
    credentials_sent: bool,
    skip_verify: bool,
    ca_files: Vec<String>,
    /// An `--insecure-registry` value that names this host with another port or none, so it
    /// does not apply here.
    #[serde(skip_serializing_if = "Option::is_none")]
    insecure_registry_not_applied: Option<String>,
}

/// Print the explanation; exit 0, or 10 for an invalid reference.
pub(crate) async fn run(a: ExplainArgs) -> Result<u8, CliError> {
    let reference = match Reference::parse(&a.image) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pullcheck: {e}");
            let code = crate::verdict::Verdict::InvalidReference.exit_code();
            if a.output == Output::Json {
                return super::print_result(&super::json_error(code, &e.to_string()), code);
            }
            return Ok(code);
        }
    };
    let plan = super::plan::plan(&a.resolve)?;
    let resolution = plan
        .resolution(&reference, &plan.platform)
        .map_err(|e| UsageError(e.to_string()))?;
    let mut credentials: Vec<String> = plan
        .keychain
        .lookup_keys(&reference.name())
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut credential_providers = Vec::new();
    if let Some(p) = plan.keychain.providers() {
        let found = p.lookup(&reference.name(), None).await;
        credentials.extend(found.credentials.iter().map(|c| c.source.to_string()));
        credential_providers = found.uses.iter().map(|u| u.describe()).collect();
        if found.uses.is_empty() {
            credential_providers.push(format!(
                "none of the {} configured credential providers matches {}",
                p.specs().count(),
                reference.name()
            ));
        }
    }
    let platform = match &resolution.platform {
        PlatformCheck::Skip(SkipReason::AnyPlatform) => "any (not checked)".to_string(),
        PlatformCheck::Skip(reason) => format!("not checked: {reason}"),
        PlatformCheck::Verify(p) => platform_list(p),
        PlatformCheck::IfAffordable { targets, margin } => format!(
            "{} if affordable: {} counts every manifest GET as a pull; after the free HEAD the index is fetched only when the registry states no limit or more than {margin} pulls left",
            platform_list(targets),
            reference.domain()
        ),
    };
    let ex = Explanation {
        schema_version: crate::report::json::SCHEMA_VERSION,
        image: a.image.clone(),
        reference: reference.full(),
        registry: reference.domain().to_string(),
        repository: reference.path().to_string(),
        manifest_reference: reference.manifest_reference(),
        kubelet_repo_to_pull: reference.name(),
        kubelet_image_sent_to_cri: kubelet_image_sent_to_cri(&a.image).unwrap_or_default(),
        endpoints: resolution
            .routes
            .iter()
            .map(|r| EndpointView {
                url: r.endpoint.base_url(),
                mirror: r.endpoint.is_mirror,
                capabilities: r.endpoint.capabilities.names(),
                used_for_this_reference: r.used,
                credentials_sent: r.used && r.credentials_allowed && !credentials.is_empty(),
                skip_verify: r.endpoint.skip_verify,
                ca_files: r
                    .endpoint
                    .ca_files
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect(),
                insecure_registry_not_applied: r.endpoint.insecure_port_mismatch.clone(),
            })
            .collect(),
        unmatched_keys: plan
            .keychain
            .pull_secret_misses(&reference.name())
            .into_iter()
            .map(|m| UnmatchedKey {
                credential: m.source.to_string(),
                why: m.reasons.iter().map(|r| r.to_string()).collect(),
            })
            .collect(),
        credentials,
        credential_providers,
        platform,
        artifacts: crate::engine::artifact_plan_line(plan.node_runtime),
        node_credentials: resolution.node_credentials.clone(),
        no_route: resolution.require_route().err().map(|e| e.to_string()),
    };
    let text = match a.output {
        Output::Json => crate::report::json::render(&ex)?,
        Output::Text => render(&ex),
    };
    super::print_result(&text, 0)
}

fn platform_list(p: &[crate::platform::Platform]) -> String {
    p.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn render(ex: &Explanation) -> String {
    let mut s = String::new();
    s.push_str(&format!("image:        {}\n", ex.image));
    s.push_str(&format!("reference:    {}\n", ex.reference));
    s.push_str(&format!("registry:     {}\n", ex.registry));
    s.push_str(&format!("repository:   {}\n", ex.repository));
    s.push_str(&format!(
        "manifest:     /v2/{}/manifests/{}\n",
        ex.repository, ex.manifest_reference
    ));
    s.push_str(&format!(
        "kubelet:      keyring lookup {}; CRI receives {}\n",
        ex.kubelet_repo_to_pull, ex.kubelet_image_sent_to_cri
    ));
    s.push_str("endpoints (in order):\n");
    for (i, e) in ex.endpoints.iter().enumerate() {
        s.push_str(&format!(
            "  {}. {}{} [{}]{}{}\n",
            i + 1,
            e.url,
            if e.mirror {
                " (mirror, ?ns=, no credentials)"
            } else {
                ""
            },
            e.capabilities.join(","),
            if e.used_for_this_reference {
                ""
            } else {
                " — skipped: tags need resolve"
            },
            if e.skip_verify { " skip_verify" } else { "" }
        ));
        if let Some(v) = &e.insecure_registry_not_applied {
            s.push_str(&format!(
                "     --insecure-registry {v} does not apply: the port is part of the registry's name\n"
            ));
        }
    }
    if ex.credentials.is_empty() {
        s.push_str("credentials:  none match: one anonymous attempt\n");
    } else {
        s.push_str("credentials (tried in order until one pulls):\n");
        for (i, c) in ex.credentials.iter().enumerate() {
            s.push_str(&format!("  {}. {c}\n", i + 1));
        }
    }
    if !ex.unmatched_keys.is_empty() {
        s.push_str(&format!(
            "pull-secret keys not used for {} (kubelet keyring rules):\n",
            ex.kubelet_repo_to_pull
        ));
        for k in &ex.unmatched_keys {
            s.push_str(&format!("  - {}: {}\n", k.credential, k.why.join("; ")));
        }
    }
    for p in &ex.credential_providers {
        s.push_str(&format!("provider:     {p}\n"));
    }
    s.push_str(&format!("platform:     {}\n", ex.platform));
    s.push_str(&format!("artifacts:    {}\n", ex.artifacts));
    if let Some(p) = &ex.node_credentials {
        s.push_str(&format!(
            "node creds:   {} matches --node-credentials {p}: if no credential is accepted, check reports assumed pullable\n",
            ex.registry
        ));
    }
    if let Some(n) = &ex.no_route {
        s.push_str(&format!("no route:     {n}: check reports transient\n"));
    }
    s
}
