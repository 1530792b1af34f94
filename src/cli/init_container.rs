//! The init container's flags that `inject` and the webhook (`--inject-…`) share: the
//! `--transient` action and the check of every value before it goes into a pod spec.

use clap::ValueEnum;

use super::UsageError;
use crate::k8s::inject::{InjectOptions, TransientAction};

/// What the podFailurePolicy does with the transient code (20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Transient {
    /// restart where the cluster is known to have container restart rules (1.35+), else
    /// count; a warning only where a 1.35 server drops them (webhook --probe-namespace).
    Auto,
    /// Count toward backoffLimit.
    Count,
    /// Don't count (set activeDeadlineSeconds to bound the retries).
    Ignore,
    /// Retry in the same pod (Kubernetes 1.35 container restart rules); count as a fallback.
    Restart,
}

impl Transient {
    /// The action for a cluster of `version` (`None`: not known), and the warning when
    /// `restart` was asked for and can't be carried out. `auto` is `restart` only where the
    /// version is known to have container restart rules.
    pub(crate) fn resolve(
        self,
        version: Option<crate::k8s::KubernetesVersion>,
    ) -> (TransientAction, Option<String>) {
        use crate::k8s::{RestartAsk, restart_rules_allowed};
        match self {
            Transient::Auto => match restart_rules_allowed(RestartAsk::Auto, version) {
                Ok(()) => (TransientAction::Restart, None),
                Err(_) => (TransientAction::Count, None),
            },
            Transient::Count => (TransientAction::Count, None),
            Transient::Ignore => (TransientAction::Ignore, None),
            Transient::Restart => match restart_rules_allowed(RestartAsk::ByName, version) {
                Ok(()) => (TransientAction::Restart, None),
                Err(why) => (
                    TransientAction::Count,
                    Some(format!("{why}: --transient restart falls back to count")),
                ),
            },
        }
    }
}

/// Check the init container's settings before writing them into anybody's pod spec:
/// quantities must be positive Kubernetes quantities, the image a valid reference, and the
/// extra check arguments flags that `pullcheck check` accepts. `flag` prefixes the flag
/// names (`""` for inject, `"inject-"` for the webhook).
pub(crate) fn validate_options(o: &InjectOptions, flag: &str) -> Result<(), UsageError> {
    for (name, value) in [("cpu", &o.cpu), ("memory", &o.memory)] {
        if !is_positive_quantity(value) {
            return Err(UsageError(format!(
                "--{flag}{name} {value}: not a positive Kubernetes quantity; write e.g. 100m, 0.5, 64Mi or 1Gi"
            )));
        }
    }
    crate::reference::Reference::parse(&o.image)
        .map_err(|e| UsageError(format!("--{flag}image: {e}")))?;
    let mut argv = vec!["pullcheck".to_string(), "check".to_string()];
    argv.extend(o.check_args.iter().cloned());
    argv.push("example.com/image:tag".to_string());
    let parsed = <super::Cli as clap::Parser>::try_parse_from(&argv);
    // Values clap takes as strings get the rules `check` applies to them, here rather than
    // as a usage error (exit 2) in every pod.
    if let Ok(super::Cli {
        command: super::Command::Check(a),
        ..
    }) = &parsed
    {
        super::plan::platform_policy(a.resolve.platform.as_deref())
            .map_err(|e| UsageError(format!("--{flag}check-arg: {e}")))?;
    }
    if let Err(e) = parsed {
        let first = e
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ")
            .to_string();
        return Err(UsageError(format!(
            "--{flag}check-arg {}: `pullcheck check` would refuse it: {first}",
            o.check_args.join(" ")
        )));
    }
    Ok(())
}

/// The warning for a checker image without a digest (`None` when it has one), naming the
/// commands that give the digest. The init container is the one image that can itself
/// strand a pod in Init:ImagePullBackOff, and a tag can move under every Job that uses it.
/// `flag` is `--image` (inject) or `--inject-image` (the webhook).
pub(crate) fn unpinned_image_warning(flag: &str, image: &str) -> Option<String> {
    if !crate::k8s::templates::is_unpinned(image) {
        return None;
    }
    if image == crate::k8s::container::default_image() {
        return Some(format!(
            "{flag} {image} is the default, a placeholder nobody publishes: build and push your \
own with scripts/publish-image.sh REGISTRY/REPO:TAG and pass the {flag} IMAGE@sha256:… it prints"
        ));
    }
    Some(format!(
        "{flag} {image} is not pinned by digest (lint flags it); get the digest with \
`crane digest {image}` or `skopeo inspect --format '{{{{.Digest}}}}' docker://{image}` \
(scripts/publish-image.sh prints it when it pushes the image) and pass {flag} IMAGE@sha256:…"
    ))
}

/// `[+]?(digits[.digits]|.digits)(suffix)?`, greater than zero; suffixes as in
/// k8s.io/apimachinery `resource.Quantity` (binary Ki…Ei, decimal m k M G T P E, e-notation).
fn is_positive_quantity(q: &str) -> bool {
    let q = q.strip_prefix('+').unwrap_or(q);
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let valid_suffix = matches!(
        suffix,
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "m" | "k" | "M" | "G" | "T" | "P" | "E"
    ) || (suffix.len() > 1
        && (suffix.starts_with('e') || suffix.starts_with('E'))
        && suffix[1..]
            .trim_start_matches(['+', '-'])
            .chars()
            .all(|c| c.is_ascii_digit())
        && !suffix[1..].trim_start_matches(['+', '-']).is_empty());
    let valid_number =
        number.matches('.').count() <= 1 && number.chars().any(|c| c.is_ascii_digit());
    valid_suffix && valid_number && number.parse::<f64>().is_ok_and(|n| n > 0.0)
}

/// The source of what is handed to the injected check (`engine::handover`), from the flags
/// of that name (`--hosts-dir`, `--insecure-registry`, `--ca-file`) and the metered
/// settings. Each CA file is read now: an unreadable one is a usage error naming it.
pub(crate) fn registry_settings(
    hosts_dir: Option<std::path::PathBuf>,
    insecure: &[String],
    ca_files: &[std::path::PathBuf],
    metered: Option<crate::engine::handover::Metered>,
) -> Result<crate::k8s::registry_config::HandOverSource, UsageError> {
    let ca_bundles = ca_files
        .iter()
        .map(|f| {
            crate::registry::tls::ca_text(f)
                .map_err(|e| UsageError(format!("--ca-file {}: {e}", f.display())))
        })
        .collect::<Result<_, _>>()?;
    let settings = crate::engine::handover::RegistrySettings {
        hosts_dir,
        insecure: insecure.to_vec(),
        ca_bundles,
        metered,
    };
    Ok(crate::k8s::registry_config::HandOverSource(Some(
        std::sync::Arc::new(settings),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_restarts_only_where_the_version_is_known_to_allow_it() {
        use crate::k8s::KubernetesVersion as V;
        let r = TransientAction::Restart;
        let c = TransientAction::Count;
        assert_eq!(Transient::Auto.resolve(V::parse("1.35")), (r, None));
        assert_eq!(Transient::Auto.resolve(V::parse("v1.36.1")), (r, None));
        assert_eq!(Transient::Auto.resolve(V::parse("1.34")), (c, None));
        assert_eq!(Transient::Auto.resolve(None), (c, None));
        // An explicit restart assumes a recent cluster, and warns where it knows better.
        assert_eq!(Transient::Restart.resolve(None), (r, None));
        let (action, warning) = Transient::Restart.resolve(V::parse("1.33"));
        assert_eq!(action, c);
        assert!(warning.unwrap().contains("falls back to count"));
        assert_eq!(
            Transient::Ignore.resolve(V::parse("1.35")),
            (TransientAction::Ignore, None)
        );
    }

    #[test]
    fn quantities() {
        for ok in ["100m", "0.5", "64Mi", "1Gi", "2", "1e3", "+1", ".5"] {
            assert!(is_positive_quantity(ok), "{ok}");
        }
        for bad in ["lots", "-5", "0", "0m", "1.2.3", "Mi", "", "5x", "1e"] {
            assert!(!is_positive_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn options_are_checked() {
        let mut o = InjectOptions::default();
        assert!(validate_options(&o, "").is_ok());
        o.check_args = vec!["--bogus".into()];
        let e = validate_options(&o, "").unwrap_err().0;
        assert!(
            e.starts_with("--check-arg --bogus: `pullcheck check` would refuse it: "),
            "{e}"
        );
        o.check_args = vec!["--insecure-registry=127.0.0.1:5000".into()];
        assert!(validate_options(&o, "").is_ok());
        o.image = "Not/Valid".into();
        assert!(
            validate_options(&o, "inject-")
                .unwrap_err()
                .0
                .starts_with("--inject-image: ")
        );
        o.image = InjectOptions::default().image;
        o.cpu = "lots".into();
        assert_eq!(
            validate_options(&o, "").unwrap_err().0,
            "--cpu lots: not a positive Kubernetes quantity; write e.g. 100m, 0.5, 64Mi or 1Gi"
        );
    }
}
