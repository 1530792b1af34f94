//! Command-line definitions (clap). Raw flags only: [`super::plan`] turns them into an
//! [`crate::engine::Plan`] once, and nothing below the CLI sees clap types.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::UsageError;

const EXAMPLES: &str = "\
Examples:
  pullcheck check busybox:1.36 ghcr.io/org/app@sha256:0123…
  pullcheck check --pull-secrets /var/run/secrets/pullcheck registry.example.com/team/app:v2
  pullcheck check --platform linux/arm64 --output json nginx:1.27
  pullcheck explain --pull-secrets ./regcred.json registry.example.com:5000/app:v1
  pullcheck scan -f job.yaml
  pullcheck inject --fail-fast -f job.yaml | kubectl apply -f -
  pullcheck lint --strict -f job.yaml
  pullcheck completion bash > /etc/bash_completion.d/pullcheck";

fn after_help() -> String {
    format!(
        "{EXAMPLES}\n\nExit codes:\n{}",
        crate::verdict::exit_code_table(false)
    )
}

/// Fail Kubernetes Jobs fast when an image can't be pulled.
#[derive(Debug, Parser)]
#[command(name = "pullcheck", version, about, long_about = "Decide, the way the kubelet would, \
whether container images can be pulled: kubelet/containerd reference normalization, kubelet \
keyring credential matching, containerd platform matching, HEAD-first resolution. Each failure \
has its own exit code, for Job podFailurePolicy rules.", after_long_help = after_help())]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// More log output on stderr (-v debug, -vv trace). Secrets are never logged.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = "Output",
        long_help = "More log output on stderr: -v for debug, -vv for trace. Requests are logged \
with redacted URLs; credentials and tokens never appear at any level. RUST_LOG overrides.")]
    pub verbose: u8,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check images: one verdict per image, exit code for podFailurePolicy.
    #[command(after_long_help = after_help())]
    Check(CheckArgs),
    /// Show how an image would be resolved: endpoints, credential keys, platform.
    #[command(after_long_help = after_help())]
    Explain(ExplainArgs),
    /// Check every image referenced by Kubernetes manifests (CI, before kubectl apply).
    #[command(after_long_help = after_help())]
    Scan(super::scan::ScanArgs),
    /// Add the pullcheck init container (and with --fail-fast a podFailurePolicy).
    Inject(super::inject::InjectArgs),
    /// Report what keeps a broken image from failing fast (exit 30 with --strict).
    Lint(super::lint::LintArgs),
    /// Serve the admission webhook (validate and mutate workloads).
    Webhook(Box<super::webhook::WebhookArgs>),
    /// Print a shell completion script.
    Completion {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum, long_help = "The shell to generate completions for.")]
        shell: clap_complete::Shell,
    },
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable text.
    Text,
    /// A JSON document on stdout (docs/json-schema.md).
    Json,
}

/// Registry and node configuration shared by every command that resolves images (the
/// CLI commands and the webhook).
#[derive(Debug, Args, Clone)]
pub struct RegistryArgs {
    /// containerd certs.d directory (hosts.toml: mirrors, CAs, skip_verify).
    #[arg(
        long = "hosts-dir",
        value_name = "DIR",
        help_heading = "Registry",
        long_help = "A containerd certs.d root, as on the node (/etc/containerd/certs.d): \
<host>/hosts.toml with server, [host.\"…\"] mirrors tried in file order (tags need the \
resolve capability), ca, skip_verify, override_path, header. Mirror requests carry ?ns=."
    )]
    pub hosts_dir: Option<PathBuf>,

    /// Use plain HTTP (or skip TLS verification) for HOST[:PORT] (repeatable).
    #[arg(
        long = "insecure-registry",
        value_name = "HOST[:PORT]",
        help_heading = "Registry",
        long_help = "Talk plain HTTP to this registry (repeatable). Only these registries, or \
hosts.toml entries, ever use plain HTTP; the scheme is never guessed from a host name."
    )]
    pub insecure_registry: Vec<String>,

    /// Extra CA certificates (PEM) to trust (repeatable).
    #[arg(
        long = "ca-file",
        value_name = "FILE",
        help_heading = "Registry",
        long_help = "PEM file of CA certificates trusted in addition to the Mozilla roots built \
into the binary (repeatable). SSL_CERT_FILE is honoured too."
    )]
    pub ca_file: Vec<PathBuf>,

    /// Registries whose verdict 14 passes (node credential providers).
    #[arg(
        long = "node-credentials",
        value_name = "PATTERN",
        help_heading = "Credentials",
        long_help = "Registry patterns (kubelet matchImages glob syntax) where the kubelet pulls \
with node credential providers pullcheck can't see (ECR, Artifact Registry, ACR): there verdict \
14 becomes a pass with a warning. Repeatable; default: *.dkr.ecr.*.amazonaws.com, \
*.dkr.ecr.*.amazonaws.com.cn, *-docker.pkg.dev, gcr.io, *.gcr.io, *.azurecr.io, *.azurecr.cn. \
'none' disables."
    )]
    pub node_credentials: Vec<String>,

    /// Registries that meter manifest GETs (repeatable; default docker.io).
    #[arg(
        long = "metered-registry",
        value_name = "HOST",
        help_heading = "Registry",
        long_help = "Registries where every manifest GET counts as a pull (repeatable). \
Default: docker.io. 'none' clears the list."
    )]
    pub metered_registry: Vec<String>,

    /// Check platforms on registries that meter manifest GETs (docker.io).
    #[arg(
        long = "verify-platform-on-metered",
        help_heading = "Registry",
        long_help = "Docker Hub counts every manifest GET as a pull (HEAD is free), and the \
kubelet's own pull follows seconds later, so on metered registries the platform check is off \
unless this is given; the output then says the platform was not verified."
    )]
    pub verify_platform_on_metered: bool,
}

impl RegistryArgs {
    /// `--hosts-dir`, checked to be a directory.
    pub(super) fn hosts_dir(&self) -> Result<Option<PathBuf>, UsageError> {
        match &self.hosts_dir {
            Some(d) if !d.is_dir() => Err(UsageError(format!(
                "--hosts-dir {}: not a directory; pass a containerd certs.d root such as /etc/containerd/certs.d",
                d.display()
            ))),
            d => Ok(d.clone()),
        }
    }
}

/// `--concurrency`, checked to be between 1 and 1024.
pub(super) fn concurrency(n: usize) -> Result<usize, UsageError> {
    if n == 0 || n > 1024 {
        return Err(UsageError(format!(
            "--concurrency {n}: must be between 1 and 1024"
        )));
    }
    Ok(n)
}

/// Options shared by every command that resolves images.
#[derive(Debug, Args, Clone)]
pub struct ResolveArgs {
    #[command(flatten)]
    pub registry: RegistryArgs,

    /// Pull secret file or directory of mounted secrets (repeatable).
    #[arg(
        long = "pull-secrets",
        value_name = "PATH",
        help_heading = "Credentials",
        env = "PULLCHECK_PULL_SECRETS",
        value_delimiter = ',',
        long_help = "A pull secret: a .dockerconfigjson ({\"auths\":{…}}) or legacy .dockercfg \
file, or a directory holding mounted Kubernetes secrets (files named .dockerconfigjson or \
.dockercfg, directly or one directory down). Repeatable; matched with the kubelet's keyring \
rules (host globs, ports, path prefixes, most specific first). A credential helper is never \
run because a pull secret names one. Env: PULLCHECK_PULL_SECRETS (comma-separated)."
    )]
    pub pull_secrets: Vec<PathBuf>,

    /// Docker config directory (config.json with auths, credHelpers, credsStore).
    #[arg(
        long = "docker-config",
        value_name = "DIR",
        help_heading = "Credentials",
        long_help = "Directory holding the user's Docker config.json; default $DOCKER_CONFIG, \
then ~/.docker. Its auths, credHelpers and credsStore are used after the pull secrets, like \
the kubelet's node keyring; helpers run with a 5 s deadline."
    )]
    pub docker_config: Option<PathBuf>,

    /// Don't read any Docker config (the init container's mode).
    #[arg(
        long = "no-docker-config",
        help_heading = "Credentials",
        long_help = "Ignore $DOCKER_CONFIG and ~/.docker/config.json; only pull secrets are used."
    )]
    pub no_docker_config: bool,

    /// Target platform os/arch[/variant], or 'any' to skip the check.
    #[arg(
        long,
        value_name = "OS/ARCH[/VARIANT]",
        help_heading = "Registry",
        long_help = "The node's platform; default: the platform this binary runs on (in an init \
container, the node's). When a tag resolves to an index, it must have an entry for this \
platform (containerd's matcher; exact or fallback is reported). 'any' skips the check."
    )]
    pub platform: Option<String>,

    /// Overall deadline in seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 60.0,
        allow_negative_numbers = true,
        help_heading = "Registry",
        long_help = "Deadline for the whole run, in seconds (default 60). Retries of transient \
failures and Retry-After waits stay within it; images still unresolved at the deadline are \
transient (20)."
    )]
    pub timeout: f64,

    /// Deadline of one HTTP request in seconds.
    #[arg(
        long = "request-timeout",
        value_name = "SECONDS",
        default_value_t = 10.0,
        allow_negative_numbers = true,
        help_heading = "Registry",
        long_help = "Deadline of one HTTP request (headers and body), in seconds; default 10."
    )]
    pub request_timeout: f64,

    /// Images checked at once.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 16,
        help_heading = "Registry",
        long_help = "How many images are checked concurrently (default 16). Requests to one \
registry share connections (HTTP/2 where the registry speaks it)."
    )]
    pub concurrency: usize,
}

/// `pullcheck check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Image references, as written in a pod spec.
    #[arg(
        value_name = "IMAGE",
        required = true,
        help_heading = "Input",
        long_help = "Image references exactly as in a pod spec (busybox, ghcr.io/org/app:v1, \
repo@sha256:…). They are normalized like the kubelet does (docker.io, library/, latest)."
    )]
    pub images: Vec<String>,

    #[command(flatten)]
    pub resolve: ResolveArgs,

    /// Output format: text (stderr) or json (stdout).
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text, help_heading = "Output",
        long_help = "text: one line per image on stderr. json: a document on stdout \
(docs/json-schema.md); the text lines still go to stderr unless --quiet.")]
    pub output: Output,

    /// Termination-message file (default /dev/termination-log when it exists).
    #[arg(
        long = "termination-log",
        value_name = "FILE",
        help_heading = "Output",
        env = "PULLCHECK_TERMINATION_LOG",
        long_help = "Where to write a summary of at most 4 KiB for `kubectl describe pod`. \
Default: /dev/termination-log if it exists (inside Kubernetes), else nothing."
    )]
    pub termination_log: Option<PathBuf>,

    /// No text lines on stderr.
    #[arg(
        long,
        short,
        help_heading = "Output",
        long_help = "Print no per-image lines on stderr."
    )]
    pub quiet: bool,
}

/// `pullcheck explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// One image reference.
    #[arg(
        value_name = "IMAGE",
        help_heading = "Input",
        long_help = "The image reference to explain, as written in a pod spec."
    )]
    pub image: String,

    #[command(flatten)]
    pub resolve: ResolveArgs,

    /// Output format: text or json (stdout).
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text, help_heading = "Output",
        long_help = "text: a readable report on stdout. json: the same as a JSON object.")]
    pub output: Output,
}
