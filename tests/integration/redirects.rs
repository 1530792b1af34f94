//! Manifest requests redirected to another origin, authorized per host: the real token-mode
//! registry (distribution 2.8 with the harness's token server) sits behind a scripted
//! front (`support/hostile_server.rs`) on another origin that answers every manifest request
//! with a 307 to the registry, as registry.k8s.io does towards its backing stores.
//!
//! distribution's access log has no request headers, so the registry is reached through a
//! second scripted server, a recording relay: it terminates TLS, records each request's
//! `Authorization`, and forwards the request unchanged to the registry and the answer back.
//! The bearer tokens the registry accepted are then decoded and compared with what its own
//! realm issued (audience = the registry's service, access = the original repository).

use base64::Engine as _;

use crate::support::hostile_server::{Flow, Out, Seen, Server, Transport};
use crate::support::named::Bind;
use crate::support::process::{Run, check};
use crate::support::{
    ALICE, Mode, Registry, TokenRequest, fixture, http, pull_secret, relay, start_dedicated,
    temp_dir,
};

/// The recording relay in front of `reg`, answers unchanged.
fn relay(reg: &Registry) -> Server {
    relay::start(&reg.url(), |_| {})
}

/// What the front asks of its own clients.
#[derive(Clone, Copy)]
pub(crate) enum FrontAuth {
    /// Nothing, as registry.k8s.io.
    None,
    /// HTTP Basic with alice's password; anything else gets a 401 Basic challenge.
    AliceBasic,
}

/// The scripted front: `/v2/` answers 200 (or its challenge), every manifest request a 307
/// to the same path on `target`.
fn front(target: &str, auth: FrontAuth) -> Server {
    front_on(&Bind::loopback(), relay::loopback_tls(), target, auth)
}

/// [`front`] on `bind`, speaking `tls` (`netns.rs`: on a host name).
pub(crate) fn front_on(bind: &Bind, tls: Transport, target: &str, auth: FrontAuth) -> Server {
    let target = target.to_string();
    let alice = http::basic_auth(ALICE.0, ALICE.1);
    Server::start_on(bind, tls, move |seen: &Seen, out: &mut Out| {
        let allowed = match auth {
            FrontAuth::None => true,
            FrontAuth::AliceBasic => seen.authorization.as_deref() == Some(alice.as_str()),
        };
        if !allowed {
            out.reply(401, &[("WWW-Authenticate", "Basic realm=\"front\"")], b"{}")?;
        } else if seen.path().contains("/manifests/") {
            let location = format!("{target}{}", seen.target);
            out.reply(307, &[("Location", &location)], b"")?;
        } else {
            out.reply(200, &[("Content-Type", "application/json")], b"{}")?;
        }
        Ok(Flow::KeepAlive)
    })
}

/// The claims of a bearer JWT (`Bearer <header>.<claims>.<signature>`).
fn claims(authorization: &str) -> serde_json::Value {
    let jwt = authorization
        .strip_prefix("Bearer ")
        .unwrap_or_else(|| panic!("not a bearer authorization: {authorization}"));
    let part = jwt.split('.').nth(1).expect("a JWT");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .expect("base64url claims");
    serde_json::from_slice(&raw).expect("JSON claims")
}

/// Assert that `authorization` is a token the harness's realm issued for `reg` with `user`
/// (`""` anonymous) and pull on `repo`.
#[track_caller]
pub(crate) fn assert_issued_for(authorization: &str, reg: &Registry, user: &str, repo: &str) {
    let c = claims(authorization);
    assert_eq!(c["aud"], reg.service.as_deref().unwrap());
    assert_eq!(c["sub"], user);
    assert_eq!(
        c["access"],
        serde_json::json!([{"type": "repository", "name": repo, "actions": ["pull"]}])
    );
}

/// Token requests made for `reg`'s service.
fn token_log_for(reg: &Registry) -> Vec<TokenRequest> {
    let service = reg.service.clone();
    fixture()
        .token_log()
        .into_iter()
        .filter(|t| t.service == service)
        .collect()
}

pub(crate) fn token_request(reg: &Registry, user: Option<&str>, repo: &str) -> TokenRequest {
    TokenRequest {
        method: "GET".into(),
        service: reg.service.clone(),
        scopes: vec![format!("repository:{repo}:pull")],
        user: user.map(str::to_string),
        status: 200,
        granted: vec![format!("repository:{repo}:pull")],
        form: vec![],
    }
}

fn lines(s: &Server) -> Vec<String> {
    s.lines()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A dedicated token registry, its relay and a front redirecting to the relay.
struct Setup {
    reg: Registry,
    /// The registry's log length before the test.
    mark: usize,
    relay: Server,
    front: Server,
}

fn setup(auth: FrontAuth) -> Setup {
    let reg = start_dedicated(Mode::Token);
    let relay = relay(&reg);
    let front = front(&relay.base, auth);
    let mark = reg.mark();
    Setup {
        reg,
        mark,
        relay,
        front,
    }
}

fn run(args: &[&str]) -> Run {
    let mut all = vec!["--platform", "any"];
    all.extend_from_slice(args);
    check(&all)
}

#[test]
fn redirect_to_a_token_registry_without_a_credential_gets_the_targets_anonymous_token() {
    let s = setup(FrontAuth::None);
    let img = &fixture().images.oci_manifest;
    let image = format!("{}/oci/app:v1", s.front.host);
    let missing = format!("{}/oci/app:no-such-tag", s.front.host);

    let r = run(&[&image]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["verdict"], "pullable");
    assert_eq!(o["digest"], img.digest.as_str());
    assert_eq!(o["credential"], serde_json::Value::Null);

    // Another run (a fresh process, no cache): the missing tag is not found, not
    // unauthenticated — the target's own realm answered the target's challenge.
    let r = run(&[&missing]);
    r.assert_code(11);
    assert_eq!(r.image(0)["verdict"], "not_found");

    // The front never saw an Authorization header.
    assert_eq!(
        lines(&s.front),
        strings(&[
            "HEAD /v2/oci/app/manifests/v1",
            "HEAD /v2/oci/app/manifests/no-such-tag",
        ])
    );
    assert!(s.front.authorizations().is_empty(), "{:?}", s.front.seen());

    // The registry: first without anything (its challenge), then with its own realm's token.
    assert_eq!(
        lines(&s.relay),
        strings(&[
            "HEAD /v2/oci/app/manifests/v1",
            "HEAD /v2/oci/app/manifests/v1",
            "HEAD /v2/oci/app/manifests/no-such-tag",
            "HEAD /v2/oci/app/manifests/no-such-tag",
        ])
    );
    let seen = s.relay.seen();
    assert_eq!(seen[0].authorization, None);
    assert_issued_for(
        seen[1].authorization.as_deref().unwrap(),
        &s.reg,
        "",
        "oci/app",
    );
    assert_eq!(seen[2].authorization, None);
    assert_issued_for(
        seen[3].authorization.as_deref().unwrap(),
        &s.reg,
        "",
        "oci/app",
    );
    let statuses: Vec<u16> = s
        .reg
        .requests_since(s.mark)
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, vec![401, 200, 401, 404]);

    // One anonymous token request per run, for the original repository.
    assert_eq!(
        token_log_for(&s.reg),
        vec![
            token_request(&s.reg, None, "oci/app"),
            token_request(&s.reg, None, "oci/app"),
        ]
    );
}

#[test]
fn redirect_forwards_the_pull_secret_to_the_targets_realm_only() {
    // The front needs no auth; the pull secret matches the front (the image's registry).
    // Only alice may pull private/*: a pullable verdict shows her credential reached the
    // target's realm, and the relay shows it never reached the target itself.
    let s = setup(FrontAuth::None);
    let dir = temp_dir();
    let secret = pull_secret(
        dir.path(),
        "regcred.json",
        &[(&s.front.host, ALICE.0, ALICE.1)],
    );
    let img = &fixture().images.private;
    let image = format!("{}/private/app:v1", s.front.host);
    let missing = format!("{}/private/app:gone", s.front.host);

    let r = run(&[
        "--concurrency",
        "1",
        "--pull-secrets",
        &secret,
        &image,
        &missing,
    ]);
    r.assert_code(11);
    let (present, absent) = (r.image(0), r.image(1));
    assert_eq!(present["verdict"], "pullable");
    assert_eq!(present["digest"], img.digest.as_str());
    assert_eq!(
        present["credential"],
        format!("pull secret {secret} key {}", s.front.host)
    );
    assert_eq!(absent["verdict"], "not_found");
    assert_eq!(absent["exit_code"], 11);

    assert!(s.front.authorizations().is_empty(), "{:?}", s.front.seen());
    assert_eq!(s.front.lines().len(), 2, "{:?}", s.front.lines());
    // The first image: unauthenticated (the target's challenge), then the target's token;
    // the second image's hop carries that token up front.
    let seen = s.relay.seen();
    let relayed: Vec<(String, bool)> = seen
        .iter()
        .map(|x| {
            (
                format!("{} {}", x.method, x.path()),
                x.authorization.is_some(),
            )
        })
        .collect();
    assert_eq!(
        relayed,
        vec![
            ("HEAD /v2/private/app/manifests/v1".to_string(), false),
            ("HEAD /v2/private/app/manifests/v1".to_string(), true),
            ("HEAD /v2/private/app/manifests/gone".to_string(), true),
        ]
    );
    for x in &seen[1..] {
        assert_issued_for(
            x.authorization.as_deref().unwrap(),
            &s.reg,
            ALICE.0,
            "private/app",
        );
    }
    assert_eq!(seen[1].authorization, seen[2].authorization);
    let statuses: Vec<u16> = s
        .reg
        .requests_since(s.mark)
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, vec![401, 200, 404]);
    // Same target host, same scope, same credential: one token for both images.
    assert_eq!(
        token_log_for(&s.reg),
        vec![token_request(&s.reg, Some(ALICE.0), "private/app")]
    );
}

#[test]
fn a_front_with_its_own_basic_auth_keeps_it_and_the_target_gets_only_its_token() {
    let s = setup(FrontAuth::AliceBasic);
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

    let alice = http::basic_auth(ALICE.0, ALICE.1);
    let front: Vec<(String, Option<String>)> = s
        .front
        .seen()
        .into_iter()
        .map(|x| (format!("{} {}", x.method, x.path()), x.authorization))
        .collect();
    assert_eq!(
        front,
        vec![
            ("HEAD /v2/oci/app/manifests/v1".to_string(), None),
            (
                "HEAD /v2/oci/app/manifests/v1".to_string(),
                Some(alice.clone())
            ),
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
    assert_eq!(
        token_log_for(&s.reg),
        vec![token_request(&s.reg, Some(ALICE.0), "oci/app")]
    );
}

#[test]
fn images_redirected_to_the_same_target_share_its_token() {
    let s = setup(FrontAuth::None);
    let f = fixture();
    let a = format!("{}/oci/app:v1", s.front.host);
    let b = format!("{}/oci/app@{}", s.front.host, f.images.oci_manifest.digest);
    let c = format!("{}/oci/app:absent", s.front.host);
    let r = run(&["--concurrency", "1", &a, &b, &c]);
    r.assert_code(11);
    let verdicts: Vec<String> = r.json()["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["verdict"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(verdicts, strings(&["pullable", "pullable", "not_found"]));

    // One token for the three images; after the first, every hop to the target carries it
    // up front.
    assert_eq!(
        token_log_for(&s.reg),
        vec![token_request(&s.reg, None, "oci/app")]
    );
    let seen = s.relay.seen();
    let auths: Vec<bool> = seen.iter().map(|x| x.authorization.is_some()).collect();
    assert_eq!(auths, vec![false, true, true, true], "{seen:?}");
    let token = seen[1].authorization.clone().unwrap();
    assert!(
        seen[2..]
            .iter()
            .all(|x| x.authorization.as_deref() == Some(token.as_str()))
    );
    assert!(s.front.authorizations().is_empty());
    let statuses: Vec<u16> = s
        .reg
        .requests_since(s.mark)
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, vec![401, 200, 200, 404]);
}
