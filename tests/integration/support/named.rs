//! Harness servers on host *names* that are not loopback, inside the network namespace
//! `scripts/netns-test.sh` creates.
//!
//! Everything else in `support/` listens on 127.0.0.1 and is named by it. A [`Bind`] says
//! where a server listens instead and the name clients use for it: `Bind::loopback()` is
//! the default everywhere; `Bind::named("blobs.pullcheck.test")` listens on the address the
//! script mapped that name to (in its `/etc/hosts`, bind-mounted over the real one inside a
//! private mount namespace) and is named `blobs.pullcheck.test:PORT`, with a certificate
//! from the test CA issued for that name. `Server::start_on` (`hostile_server.rs`),
//! `relay::start_on`, `TokenServer::start_on` and the registry's `Setup::bind` take one.
//!
//! A real registry on a name, the one helper most tests need:
//!
//! ```ignore
//! support::named::require_netns();
//! // distribution 2.8 with htpasswd (alice only), a certificate for the name, on port 443:
//! let ecr = named::start_registry(
//!     Mode::Basic,
//!     Bind::named("123456789012.dkr.ecr.us-east-1.amazonaws.com").port(443),
//!     None,
//! );
//! // token mode: the realm is a token server of its own on another name, since the guard
//! // refuses a realm on loopback announced by a registry that is not on loopback:
//! let reg = named::start_registry(
//!     Mode::Token,
//!     Bind::named("blobs.pullcheck.test"),
//!     Some(Bind::named("auth.pullcheck.test")),
//! );
//! reg.host;        // "blobs.pullcheck.test:PORT"
//! reg.token_log(); // what its realm answered
//! ```
//!
//! Each serves its own copy of the fixture's seeded storage (same images, same digests).
//! A name is usable only if the script maps it: add it to the `hosts` table in
//! `scripts/netns-test.sh`, which passes the map on in `PULLCHECK_NETNS_HOSTS`
//! (`name=address,…`). Tests that need the namespace call [`require_netns`] first, so that
//! outside the script they fail instead of reaching for real names.

use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::time::{Duration, SystemTime};

use super::hostile_server::Transport;
use super::registry::{Mode, Registry};
use super::token::TokenServer;

/// Where a harness server listens and what clients call it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// The address the listener binds.
    pub addr: IpAddr,
    /// The host name clients use, `None` for the address itself.
    pub name: Option<String>,
    /// The port, 0 for any free one.
    pub port: u16,
}

impl Bind {
    /// 127.0.0.1, any free port, named by the address: what every server uses by default.
    pub fn loopback() -> Bind {
        Bind {
            addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            name: None,
            port: 0,
        }
    }

    /// `name` on the address `scripts/netns-test.sh` mapped it to. Panics (saying why)
    /// outside the script or for a name it does not map.
    pub fn named(name: &str) -> Bind {
        Bind {
            addr: address_of(name),
            name: Some(name.to_string()),
            port: 0,
        }
    }

    /// The same, on a fixed port.
    pub fn port(self, port: u16) -> Bind {
        Bind { port, ..self }
    }

    /// `NAME:PORT`, or `ADDR:PORT` (`[ADDR]:PORT` for IPv6) without a name.
    pub fn host(&self, port: u16) -> String {
        match (&self.name, self.addr) {
            (Some(n), _) => format!("{n}:{port}"),
            (None, IpAddr::V6(a)) => format!("[{a}]:{port}"),
            (None, IpAddr::V4(a)) => format!("{a}:{port}"),
        }
    }

    /// A listener on the address and port.
    pub fn listen(&self) -> TcpListener {
        TcpListener::bind((self.addr, self.port))
            .unwrap_or_else(|e| panic!("bind {}:{}: {e}", self.addr, self.port))
    }

    /// A certificate and key (PEM) from the test CA for what clients call this server (the
    /// name, or the address), valid for a day.
    pub fn cert(&self) -> (String, String) {
        let addr = self.addr.to_string();
        let subject = self.name.as_deref().unwrap_or(&addr);
        super::make_cert(&[subject], SystemTime::now() + Duration::from_secs(86_400))
    }

    /// [`Bind::cert`] as a scripted server's TLS transport.
    pub fn tls(&self) -> Transport {
        let (cert_pem, key_pem) = self.cert();
        Transport::Tls { cert_pem, key_pem }
    }
}

/// True inside `scripts/netns-test.sh` (`PULLCHECK_NETNS=1`).
pub fn in_netns() -> bool {
    std::env::var_os("PULLCHECK_NETNS").is_some_and(|v| v == "1")
}

/// Fail (not skip) a test that was asked to run outside the namespace: there the names
/// would go to the real resolver.
#[track_caller]
pub fn require_netns() {
    assert!(
        in_netns(),
        "needs a network namespace with test host names: run scripts/netns-test.sh"
    );
}

/// The address `name` has in `PULLCHECK_NETNS_HOSTS` (`name=address,…`).
pub fn address_of(name: &str) -> IpAddr {
    require_netns();
    let map = std::env::var("PULLCHECK_NETNS_HOSTS").unwrap_or_default();
    map.split(',')
        .filter_map(|pair| pair.split_once('='))
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, a)| {
            a.parse()
                .unwrap_or_else(|e| panic!("PULLCHECK_NETNS_HOSTS: {name}={a}: {e}"))
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} is not in PULLCHECK_NETNS_HOSTS ({map}): add it to scripts/netns-test.sh"
            )
        })
}

/// A real registry (distribution 2.8, its own copy of the seeded storage) on `bind` with a
/// certificate for its name. `Mode::Basic`: the fixture's htpasswd (alice). `Mode::Token`:
/// its realm is a token server of its own on `realm` (the fixture's signing key and
/// policy, its own log: [`Registry::token_log`]). `Mode::Anon`: plain HTTP.
pub fn start_registry(mode: Mode, bind: Bind, realm: Option<Bind>) -> Registry {
    let fx = super::fixture();
    assert_eq!(
        mode == Mode::Token,
        realm.is_some(),
        "a realm goes with token mode, and only with it"
    );
    let token_server = realm.map(|realm| {
        let (cert, key) = realm.cert();
        TokenServer::start_on(
            &realm,
            &cert,
            &key,
            &std::fs::read_to_string(&fx.signing_cert).unwrap(),
            &std::fs::read_to_string(&fx.signing_key).unwrap(),
        )
    });
    let tls = (mode != Mode::Anon).then(|| {
        let (cert, key) = bind.cert();
        super::cert_files(&cert, &key)
    });
    let token_server = token_server.unwrap_or_else(|| fx.token_server.clone());
    super::start_dedicated_on(mode, tls, bind, token_server)
}
