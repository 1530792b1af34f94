//! Redirects between host *names*, neither of them loopback: `redirects.rs` again, with the
//! front, the registry and its realm each on a name of its own that resolves (through the
//! namespace's `/etc/hosts`) to a 10.203.0.x address, so nothing here is the loopback
//! registry that the address guard lets refer to loopback.
//!
//! Run by `scripts/netns-test.sh`, which creates the network namespace and the names
//! (`support/named.rs`). Every test is `#[ignore]`d for a plain `cargo test`; the script
//! runs them with `--ignored`, and without `PULLCHECK_NETNS=1` they fail loudly.
//!
//! The hosts (the script's table):
//! - `registry.pullcheck.test` (10.203.0.1): the scripted front, answering every manifest
//!   request with a 307 to the same path on the target;
//! - `blobs.pullcheck.test` (10.203.0.2): the target, the real registry itself, or the
//!   recording relay in front of it where a test asserts the `Authorization` the target got
//!   (distribution's access log has no request headers);
//! - `store.pullcheck.test` (10.203.0.4): the real registry behind that relay;
//! - `auth.pullcheck.test` (10.203.0.3): the registry's token realm;
//! - `loopback.pullcheck.test`: a name on 127.0.0.1, for the guard.

use std::net::IpAddr;

use crate::redirects::{FrontAuth, assert_issued_for, front_on, token_request};
use crate::support::hostile_server::{Flow, Out, Seen, Server};
use crate::support::named::{self, Bind};
use crate::support::process::{Run, check};
use crate::support::{ALICE, Mode, Registry, fixture, http, pull_secret, relay, temp_dir};

const FRONT: &str = "registry.pullcheck.test";
const TARGET: &str = "blobs.pullcheck.test";
const STORE: &str = "store.pullcheck.test";
const REALM: &str = "auth.pullcheck.test";

/// The scripted front of `redirects.rs` on `registry.pullcheck.test`, with a certificate for
/// that name.
fn front(target: &str, auth: FrontAuth) -> Server {
    let bind = Bind::named(FRONT);
    front_on(&bind, bind.tls(), target, auth)
}

/// A token-mode registry (its own copy of the seeded images) on `name`, its realm on
/// `auth.pullcheck.test`.
fn registry_on(name: &str) -> Registry {
    named::start_registry(Mode::Token, Bind::named(name), Some(Bind::named(REALM)))
}

fn ip(name: &str) -> IpAddr {
    named::address_of(name)
}

fn run(args: &[&str]) -> Run {
    let mut all = vec!["--platform", "any"];
    all.extend_from_slice(args);
    check(&all)
}

/// `METHOD /path` and the `Authorization` that came along, per request.
fn requests(s: &Server) -> Vec<(String, Option<String>)> {
    s.seen()
        .into_iter()
        .map(|x| (format!("{} {}", x.method, x.path()), x.authorization))
        .collect()
}

#[test]
#[ignore = "needs a network namespace with test host names: run scripts/netns-test.sh"]
fn a_redirect_between_names_reaches_the_named_registry_with_its_own_realms_token() {
    named::require_netns();
    // On 443, so the redirect names it as registry.k8s.io's do: `https://NAME/…`, no port.
    let reg = named::start_registry(
        Mode::Token,
        Bind::named(TARGET).port(443),
        Some(Bind::named(REALM)),
    );
    assert_eq!(reg.host, format!("{TARGET}:443"));
    let front = front(&format!("https://{TARGET}"), FrontAuth::None);
    let mark = reg.mark();
    let img = &fixture().images.oci_manifest;
    assert_eq!(front.host, format!("{FRONT}:{}", front.addr.port()));
    assert_eq!(front.addr.ip(), ip(FRONT));
    let image = format!("{}/oci/app:v1", front.host);

    let r = run(&[&image]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["verdict"], "pullable");
    assert_eq!(o["digest"], img.digest.as_str());
    assert_eq!(o["credential"], serde_json::Value::Null);

    // The front: one request, no Authorization, from a 10.203.0.x address: pullcheck
    // resolved the name through /etc/hosts and connected there.
    assert_eq!(
        requests(&front),
        vec![("HEAD /v2/oci/app/manifests/v1".to_string(), None)]
    );
    let front_peers: Vec<IpAddr> = front.seen().iter().map(|s| s.peer).collect();
    assert_eq!(front_peers, vec![ip(FRONT)]);

    // The registry: its challenge, then the manifest with its realm's token; both from the
    // target's name's address, never from loopback.
    let logged: Vec<(String, u16, String)> = reg
        .requests_since(mark)
        .into_iter()
        .map(|r| (format!("{} {}", r.method, r.uri), r.status, r.remote))
        .collect();
    let target_ip = ip(TARGET).to_string();
    assert_eq!(
        logged,
        vec![
            (
                "HEAD /v2/oci/app/manifests/v1".to_string(),
                401,
                target_ip.clone()
            ),
            ("HEAD /v2/oci/app/manifests/v1".to_string(), 200, target_ip),
        ]
    );
    assert_eq!(reg.token_log(), vec![token_request(&reg, None, "oci/app")]);
}

/// The front, the recording relay on `blobs.pullcheck.test` and the registry behind it on
/// `store.pullcheck.test`.
struct Relayed {
    reg: Registry,
    mark: usize,
    relay: Server,
    front: Server,
}

fn relayed(auth: FrontAuth) -> Relayed {
    let reg = registry_on(STORE);
    let relay = relay::start_on(&Bind::named(TARGET), &reg.url(), |_| {});
    let front = front(&relay.base, auth);
    let mark = reg.mark();
    Relayed {
        reg,
        mark,
        relay,
        front,
    }
}

#[test]
#[ignore = "needs a network namespace with test host names: run scripts/netns-test.sh"]
fn a_front_with_its_own_basic_auth_keeps_it_and_the_named_target_gets_only_its_token() {
    named::require_netns();
    let s = relayed(FrontAuth::AliceBasic);
    let dir = temp_dir();
    let secret = pull_secret(
        dir.path(),
        "regcred.json",
        &[(&s.front.host, ALICE.0, ALICE.1)],
    );
    let img = &fixture().images.oci_manifest;
    let image = format!("{}/oci/app:v1", s.front.host);

    let r = run(&["--pull-secrets", &secret, &image]);
    r.assert_code(0);
    assert_eq!(r.image(0)["digest"], img.digest.as_str());
    assert_eq!(
        r.image(0)["credential"],
        format!("pull secret {secret} key {}", s.front.host)
    );

    let alice = http::basic_auth(ALICE.0, ALICE.1);
    assert_eq!(
        requests(&s.front),
        vec![
            ("HEAD /v2/oci/app/manifests/v1".to_string(), None),
            ("HEAD /v2/oci/app/manifests/v1".to_string(), Some(alice)),
        ]
    );
    let seen = s.relay.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        seen[0].authorization, None,
        "the front's Basic stays with the front"
    );
    assert_issued_for(
        seen[1].authorization.as_deref().unwrap(),
        &s.reg,
        ALICE.0,
        "oci/app",
    );
    assert!(seen.iter().all(|x| x.peer == ip(TARGET)), "{seen:?}");
    let statuses: Vec<u16> = s
        .reg
        .requests_since(s.mark)
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, vec![401, 200]);
    assert_eq!(
        s.reg.token_log(),
        vec![token_request(&s.reg, Some(ALICE.0), "oci/app")]
    );
}

#[test]
#[ignore = "needs a network namespace with test host names: run scripts/netns-test.sh"]
fn a_pull_secret_for_the_front_reaches_the_named_targets_realm_only() {
    // The front needs no auth; the pull secret matches the front (the image's registry).
    // Only alice may pull private/*: a pullable verdict shows her credential reached the
    // target's realm on auth.pullcheck.test, and the relay shows it never reached the
    // target itself.
    named::require_netns();
    let s = relayed(FrontAuth::None);
    let dir = temp_dir();
    let secret = pull_secret(
        dir.path(),
        "regcred.json",
        &[(&s.front.host, ALICE.0, ALICE.1)],
    );
    let img = &fixture().images.private;
    let image = format!("{}/private/app:v1", s.front.host);

    let r = run(&["--pull-secrets", &secret, &image]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["verdict"], "pullable");
    assert_eq!(o["digest"], img.digest.as_str());
    assert_eq!(
        o["credential"],
        format!("pull secret {secret} key {}", s.front.host)
    );

    assert_eq!(
        requests(&s.front),
        vec![("HEAD /v2/private/app/manifests/v1".to_string(), None)]
    );
    let seen = s.relay.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].authorization, None);
    assert_issued_for(
        seen[1].authorization.as_deref().unwrap(),
        &s.reg,
        ALICE.0,
        "private/app",
    );
    assert!(
        seen.iter().all(|x| !x
            .authorization
            .as_deref()
            .unwrap_or("")
            .starts_with("Basic ")),
        "{seen:?}"
    );
    assert_eq!(
        s.reg.token_log(),
        vec![token_request(&s.reg, Some(ALICE.0), "private/app")]
    );
}

#[test]
#[ignore = "needs a network namespace with test host names: run scripts/netns-test.sh"]
fn a_redirect_to_a_name_that_does_not_resolve_is_transient() {
    named::require_netns();
    let front = front("https://nowhere.pullcheck.test:5000", FrontAuth::None);
    let image = format!("{}/oci/app:v1", front.host);

    let r = run(&[&image]);
    r.assert_code(20);
    let o = r.image(0);
    assert_eq!(o["verdict"], "transient");
    // The resolver's own words: the namespace's resolv.conf names only 127.0.0.1, where
    // nothing listens.
    assert_eq!(
        o["detail"],
        "HEAD https://nowhere.pullcheck.test:5000/v2/oci/app/manifests/v1: cannot resolve host: \
         nowhere.pullcheck.test (failed to lookup address information: Temporary failure in \
         name resolution)"
    );
    // Transient, so retried: the whole chain again, MAX_ATTEMPTS (4, src/registry/limits.rs)
    // times in all.
    assert_eq!(
        requests(&front),
        vec![("HEAD /v2/oci/app/manifests/v1".to_string(), None); 4]
    );
}

/// A loopback server that answers 200 to anything: it must see nothing.
fn loopback_bait() -> Server {
    Server::start(relay::loopback_tls(), |_: &Seen, out: &mut Out| {
        out.reply(200, &[("Content-Type", "application/json")], b"{}")?;
        Ok(Flow::KeepAlive)
    })
}

#[test]
#[ignore = "needs a network namespace with test host names: run scripts/netns-test.sh"]
fn a_named_front_may_not_redirect_to_a_loopback_address() {
    // guard.rs: a referral may be on an ordinary address, or on the referrer's class when
    // registries may be there. The front is on 10.203.0.1, an ordinary address (the guard
    // has no class for private ranges: the redirect to 10.203.0.2 above is let through), so
    // 127.0.0.1 is refused before anything is sent.
    named::require_netns();
    let bait = loopback_bait();
    let front = front(&bait.base, FrontAuth::None);
    let image = format!("{}/oci/app:v1", front.host);

    let r = run(&[&image]);
    r.assert_code(13);
    let o = r.image(0);
    assert_eq!(o["verdict"], "denied");
    assert_eq!(
        o["detail"],
        "blocked by pullcheck's address guard: 127.0.0.1 is 127.0.0.1, a loopback address"
    );
    assert_eq!(
        requests(&front),
        vec![("HEAD /v2/oci/app/manifests/v1".to_string(), None)],
        "refused, not retried"
    );
    assert!(bait.seen().is_empty(), "{:?}", bait.seen());
}

#[test]
#[ignore = "needs a network namespace with test host names: run scripts/netns-test.sh"]
fn a_named_front_may_not_redirect_to_a_name_on_loopback() {
    named::require_netns();
    let bait = loopback_bait();
    let front = front(
        &format!("https://loopback.pullcheck.test:{}", bait.addr.port()),
        FrontAuth::None,
    );
    let image = format!("{}/oci/app:v1", front.host);

    // The name is checked on the address it resolves to, in the resolver pullcheck connects
    // with (the DNS-rebinding case): the same refusal as for the literal.
    let r = run(&[&image]);
    r.assert_code(13);
    let o = r.image(0);
    assert_eq!(o["verdict"], "denied");
    assert_eq!(
        o["detail"],
        "blocked by pullcheck's address guard: loopback.pullcheck.test is 127.0.0.1, a \
         loopback address"
    );
    assert_eq!(
        requests(&front),
        vec![("HEAD /v2/oci/app/manifests/v1".to_string(), None)],
        "refused, not retried"
    );
    assert!(bait.seen().is_empty(), "{:?}", bait.seen());
}
