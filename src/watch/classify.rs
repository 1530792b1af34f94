//! A container's waiting reason and message, as the kubelet wrote them, → one of pullcheck's
//! verdicts, or unknown.
//!
//! The kubelet (kubernetes `pkg/kubelet/images/image_manager.go`) sets the reason and passes
//! the runtime's error text through: for `ErrImagePull` the message is the CRI error itself,
//! `rpc error: code = … desc = failed to pull and unpack image "…": …` from containerd's
//! `internal/cri/server/images/image_pull.go`; for `ImagePullBackOff` (since kubelet 1.32,
//! kubernetes#127918) it is `Back-off pulling image "…": <reason>: <that message>`. The gRPC
//! code alone says little (a missing tag and a missing platform are both `NotFound`), so the
//! text decides, by the phrases containerd's own sources write. [`RULES`] is that list, in the
//! order it is tried; docs/watch.md shows it as a table.

use crate::verdict::Verdict;

/// The waiting reasons the kubelet gives an image pull (kubernetes
/// `pkg/kubelet/images/types.go`, and `evalCRIPullErr` for the two the CRI reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    ErrImagePull,
    ImagePullBackOff,
    InvalidImageName,
    ErrImageNeverPull,
    RegistryUnavailable,
    SignatureValidationFailed,
    ImageInspectError,
}

impl Reason {
    /// Every reason, in the order above.
    pub(crate) const ALL: [Reason; 7] = [
        Reason::ErrImagePull,
        Reason::ImagePullBackOff,
        Reason::InvalidImageName,
        Reason::ErrImageNeverPull,
        Reason::RegistryUnavailable,
        Reason::SignatureValidationFailed,
        Reason::ImageInspectError,
    ];

    /// The kubelet's string for this reason.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::ErrImagePull => "ErrImagePull",
            Reason::ImagePullBackOff => "ImagePullBackOff",
            Reason::InvalidImageName => "InvalidImageName",
            Reason::ErrImageNeverPull => "ErrImageNeverPull",
            Reason::RegistryUnavailable => "RegistryUnavailable",
            Reason::SignatureValidationFailed => "SignatureValidationFailed",
            Reason::ImageInspectError => "ImageInspectError",
        }
    }

    /// `None` for reasons that are not about pulling (`ContainerCreating`, `CrashLoopBackOff`…).
    pub(crate) fn parse(s: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// What one waiting container's status says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Classification {
    /// `None`: the container is not waiting on an image pull.
    pub(crate) reason: Option<Reason>,
    /// `None`: unknown. The watch never acts on an unknown failure.
    pub(crate) verdict: Option<Verdict>,
    /// What decided, for the Event text ([`Matched::phrase`]).
    pub(crate) matched: Matched,
}

/// What decided a [`Classification`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Matched {
    /// Nothing: not a pull failure, or a message no rule knows.
    Nothing,
    /// A [`Rule::phrase`], or a reason's name for reasons that decide alone.
    Phrase(&'static str),
    /// An `ImagePullBackOff` whose message lacks the pull error (kubelets before 1.32):
    /// the watch reads the `ErrImagePull` status or the `Failed` Event instead.
    BackOffWithoutError,
}

impl Matched {
    /// The phrase for the Event text; `None` for [`Matched::Nothing`].
    pub(crate) fn phrase(self) -> Option<&'static str> {
        match self {
            Matched::Nothing => None,
            Matched::Phrase(p) => Some(p),
            Matched::BackOffWithoutError => Some(NO_UNDERLYING_MESSAGE),
        }
    }
}

/// How a rule recognises a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// The message contains this text.
    Contains(&'static str),
    /// A `remotes/errors.ErrUnexpectedStatus` ("unexpected status from GET request to URL:
    /// 401 Unauthorized") with a code in `lo..=hi`, and, if `after` is given, that text
    /// somewhere in the message (the token fetch that got the status).
    Status {
        lo: u16,
        hi: u16,
        after: Option<&'static str>,
    },
    /// The resolver's own 404: a "failed to resolve …" message that ends in ": not found"
    /// (`<ref>: not found`, after every host answered 404). Other errors that wrap
    /// `errdefs.ErrNotFound` end the same way but never pass through the resolve step.
    ResolveNotFound,
}

/// One row of the classification table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) shape: Shape,
    /// `None`: recognised, but no verdict fits, so the failure stays unknown.
    pub(crate) verdict: Option<Verdict>,
    /// A short name for the Event text and docs/watch.md.
    pub(crate) phrase: &'static str,
    /// Where the text comes from, upstream.
    pub(crate) source: &'static str,
}

const fn rule(
    shape: Shape,
    verdict: Option<Verdict>,
    phrase: &'static str,
    source: &'static str,
) -> Rule {
    Rule {
        shape,
        verdict,
        phrase,
        source,
    }
}

const fn contains(text: &'static str, verdict: Option<Verdict>, source: &'static str) -> Rule {
    rule(Shape::Contains(text), verdict, text, source)
}

const fn status(
    lo: u16,
    hi: u16,
    after: Option<&'static str>,
    verdict: Option<Verdict>,
    phrase: &'static str,
) -> Rule {
    rule(
        Shape::Status { lo, hi, after },
        verdict,
        phrase,
        "core/remotes/errors/errors.go (ErrUnexpectedStatus); core/remotes/docker/resolver.go, auth/fetch.go",
    )
}

const GO_NET: &str = "Go net, net/http, crypto/tls, crypto/x509 (through core/remotes/docker/resolver.go `failed to do request`)";
const TRANSIENT: Option<Verdict> = Some(Verdict::Transient);

/// The message rules for `ErrImagePull` (and the message `ImagePullBackOff` wraps), first
/// match wins. Sources are containerd 2.2 paths; 1.7 has the same strings under
/// `remotes/docker/`, `images/` and `pull.go`.
///
/// The order matters: the platform message also ends in ": not found"; a transport failure
/// inside a token fetch ("failed to fetch anonymous token: Get …: connection refused") is
/// transient, not an auth answer; the basic-auth message also says "pull access denied";
/// a missing blob or an empty host list also ends in ": not found".
pub(crate) const RULES: &[Rule] = &[
    contains(
        "no match for platform in manifest",
        Some(Verdict::PlatformMissing),
        "core/images/handlers.go (LimitManifests), core/images/image.go",
    ),
    contains(
        "invalid reference format",
        Some(Verdict::InvalidReference),
        "github.com/distribution/reference reference.go (via internal/cri/server/images/image_pull.go `failed to parse image reference`)",
    ),
    contains("x509: ", TRANSIENT, GO_NET),
    contains("tls: ", TRANSIENT, GO_NET),
    contains(
        "server gave HTTP response to HTTPS client",
        TRANSIENT,
        GO_NET,
    ),
    contains("connection refused", TRANSIENT, GO_NET),
    contains("connection reset by peer", TRANSIENT, GO_NET),
    contains("no route to host", TRANSIENT, GO_NET),
    contains("network is unreachable", TRANSIENT, GO_NET),
    contains("no such host", TRANSIENT, GO_NET),
    contains("server misbehaving", TRANSIENT, GO_NET),
    contains("i/o timeout", TRANSIENT, GO_NET),
    contains("TLS handshake timeout", TRANSIENT, GO_NET),
    contains("Client.Timeout exceeded", TRANSIENT, GO_NET),
    contains("context deadline exceeded", TRANSIENT, GO_NET),
    contains(
        "context canceled",
        TRANSIENT,
        "internal/cri/server/images/image_pull.go (image_pull_progress_timeout cancels the pull)",
    ),
    contains("unexpected EOF", TRANSIENT, GO_NET),
    status(
        401,
        403,
        Some("failed to fetch anonymous token"),
        Some(Verdict::Unauthenticated),
        "anonymous token refused (401/403)",
    ),
    status(
        401,
        403,
        Some("failed to fetch oauth token"),
        Some(Verdict::Denied),
        "credentials refused by the token endpoint (401/403)",
    ),
    status(
        401,
        401,
        None,
        Some(Verdict::Denied),
        "unexpected status 401",
    ),
    status(
        403,
        403,
        None,
        Some(Verdict::Denied),
        "unexpected status 403",
    ),
    status(408, 408, None, TRANSIENT, "unexpected status 408"),
    status(429, 429, None, TRANSIENT, "unexpected status 429"),
    status(500, 599, None, TRANSIENT, "unexpected status 5xx"),
    status(
        405,
        405,
        None,
        Some(Verdict::METHOD_NOT_ALLOWED),
        "unexpected status 405",
    ),
    status(
        400,
        499,
        None,
        Some(Verdict::OTHER_CLIENT_ERROR),
        "unexpected status 4xx",
    ),
    contains(
        "no basic auth credentials",
        Some(Verdict::Unauthenticated),
        "core/remotes/docker/authorizer.go (AddResponses)",
    ),
    contains(
        "pull access denied",
        Some(Verdict::Unauthenticated),
        "core/remotes/docker/resolver.go (Resolve), authorizer.go (`server message: insufficient_scope`)",
    ),
    contains(
        "could not fetch content",
        None,
        "core/remotes/docker/fetcher.go (a blob missing)",
    ),
    contains(
        "content at ",
        None,
        "core/remotes/docker/resolver.go withErrorCheck (a blob missing)",
    ),
    contains(
        "no resolve hosts",
        None,
        "core/remotes/docker/resolver.go (no host configured)",
    ),
    rule(
        Shape::ResolveNotFound,
        Some(Verdict::NotFound),
        "failed to resolve …: not found",
        "core/remotes/docker/resolver.go (Resolve: `<ref>: not found`), core/transfer/local/pull.go `failed to resolve image`, client/pull.go `failed to resolve reference`",
    ),
    contains(
        "code = NotFound",
        None,
        "google.golang.org/grpc status via github.com/containerd/errdefs/pkg/errgrpc (any errdefs.ErrNotFound)",
    ),
];

/// The phrase for an `ImagePullBackOff` that carries no underlying message (kubelets
/// before 1.32): classify from the `ErrImagePull` status or the `Failed` Event instead.
pub(crate) const NO_UNDERLYING_MESSAGE: &str = "back-off without the pull error (kubelet < 1.32)";

/// Classifies one waiting container. `reason` is the kubelet's string; `message` its message.
///
/// Also usable on a `Failed` Event (`Failed to pull image "…": <error>`): pass it with
/// reason `ErrImagePull`. That is how a kubelet older than 1.32 is read, whose
/// `ImagePullBackOff` message does not carry the error.
pub(crate) fn classify(reason: &str, message: &str) -> Classification {
    let Some(reason) = Reason::parse(reason) else {
        return Classification {
            reason: None,
            verdict: None,
            matched: Matched::Nothing,
        };
    };
    let (verdict, matched) = match reason {
        Reason::ErrImagePull => from_message(message),
        Reason::ImagePullBackOff => from_back_off(message),
        Reason::InvalidImageName => (
            Some(Verdict::InvalidReference),
            Matched::Phrase(reason.as_str()),
        ),
        // CRI-O reports it; containerd 2.2 never does. An unreachable registry either way.
        Reason::RegistryUnavailable => (Some(Verdict::Transient), Matched::Phrase(reason.as_str())),
        // Not a registry answer: the node lacks the image under `imagePullPolicy: Never`,
        // a signature policy refused it, or the runtime could not inspect its own store.
        // None of pullcheck's verdicts says that.
        Reason::ErrImageNeverPull
        | Reason::SignatureValidationFailed
        | Reason::ImageInspectError => (None, Matched::Phrase(reason.as_str())),
    };
    Classification {
        reason: Some(reason),
        verdict,
        matched,
    }
}

/// `Back-off pulling image "<image>": <reason>: <message>`: the kubelet stores the last
/// pull's reason and message (`prevPullErrMsg`) and appends them; classify those.
fn from_back_off(message: &str) -> (Option<Verdict>, Matched) {
    let underlying = message
        .strip_prefix("Back-off pulling image \"")
        .and_then(|rest| rest.split_once('"'))
        .map(|(_image, rest)| rest.strip_prefix(": ").unwrap_or(rest))
        .unwrap_or(message);
    if underlying.is_empty() {
        return (None, Matched::BackOffWithoutError);
    }
    match underlying.split_once(": ") {
        Some((inner, rest))
            if Reason::parse(inner).is_some_and(|r| r != Reason::ImagePullBackOff) =>
        {
            let c = classify(inner, rest);
            (c.verdict, c.matched)
        }
        _ => from_message(underlying),
    }
}

fn from_message(message: &str) -> (Option<Verdict>, Matched) {
    RULES
        .iter()
        .find(|r| matches(r.shape, message))
        .map_or((None, Matched::Nothing), |r| {
            (r.verdict, Matched::Phrase(r.phrase))
        })
}

fn matches(shape: Shape, message: &str) -> bool {
    match shape {
        Shape::Contains(text) => message.contains(text),
        Shape::Status { lo, hi, after } => unexpected_status(message).is_some_and(|code| {
            (lo..=hi).contains(&code) && after.is_none_or(|a| message.contains(a))
        }),
        Shape::ResolveNotFound => {
            message.contains("failed to resolve") && message.trim_end().ends_with(": not found")
        }
    }
}

/// The status code of the first "unexpected status from METHOD request to URL: CODE TEXT".
/// A URL holds no ": ", so the first one after the prefix ends it.
fn unexpected_status(message: &str) -> Option<u16> {
    let (_, rest) = message.split_once("unexpected status from ")?;
    let (_, status) = rest.split_once(": ")?;
    let digits = status.get(..3)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests;
