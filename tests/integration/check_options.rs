//! Options that change how a check runs: proxies from the environment, metered registries
//! (Docker Hub's GET-counts-as-pull rule), deduplication and concurrency.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::support::process::{check, run};
use crate::support::scripted_server::Scripted;
use crate::support::{Mode, fixture, make_cert, start_dedicated, start_dedicated_with_cert};

#[test]
fn https_proxy_from_the_environment_is_used() {
    // The scripted server plays a proxy that refuses every CONNECT: the request must arrive
    // there, as a CONNECT to the registry.
    let proxy = Scripted::start(|_, _| (502, vec![], String::new()));
    let r = run(
        &[
            "check",
            "--output",
            "json",
            "--timeout",
            "5",
            "127.0.0.1:9/app:v1",
        ],
        &[("HTTPS_PROXY", &format!("http://{}", proxy.host))],
    );
    r.assert_code(20);
    let seen = proxy.requests();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|l| l == "CONNECT 127.0.0.1:9"), "{seen:?}");
}

#[test]
fn metered_registries_never_get_skips_the_platform_check_and_uses_head_only() {
    let reg = start_dedicated(Mode::Anon);
    let img = &fixture().images.arm_only;
    let mark = reg.mark();
    // arm-only index on a registry declared metered, GETs refused: HEAD only, platform not
    // verified.
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "--metered-registry",
        &reg.host,
        "--metered-get",
        "never",
        "--platform",
        "linux/amd64",
        &img.reference(&reg),
    ]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["platform"]["result"], "not_checked");
    assert_eq!(
        o["platform"]["note"],
        format!(
            "platform not verified: {} counts every manifest GET as a pull; pass --verify-platform-on-metered to check",
            reg.host
        )
    );
    reg.wait_quiet();
    let methods: Vec<String> = reg
        .requests_since(mark)
        .into_iter()
        .map(|r| format!("{} {}", r.method, r.uri))
        .collect();
    assert_eq!(
        methods,
        vec!["HEAD /v2/armonly/app/manifests/v1".to_string()]
    );
    // Asked for explicitly, the check runs and finds the platform missing.
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "--metered-registry",
        &reg.host,
        "--verify-platform-on-metered",
        "--platform",
        "linux/amd64",
        &img.reference(&reg),
    ]);
    r.assert_code(12);
}

#[test]
fn metered_registries_without_quota_headers_get_the_index_after_a_free_head() {
    // A registry that states no limit (Debian's docker-registry sends no ratelimit-*
    // headers) is not limited: after the HEAD, the index is fetched by digest and the
    // platform verified.
    let reg = start_dedicated(Mode::Anon);
    let img = &fixture().images.arm_only;
    let mark = reg.mark();
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "--metered-registry",
        &reg.host,
        "--platform",
        "linux/amd64",
        &img.reference(&reg),
    ]);
    r.assert_code(12);
    let o = r.image(0);
    assert_eq!(o["platform"]["result"], "missing");
    assert!(o.get("quota").is_none(), "{o}");
    let digest = o["digest"].as_str().unwrap().to_string();
    reg.wait_quiet();
    let methods: Vec<String> = reg
        .requests_since(mark)
        .into_iter()
        .map(|r| format!("{} {}", r.method, r.uri))
        .collect();
    assert_eq!(
        methods,
        vec![
            "HEAD /v2/armonly/app/manifests/v1".to_string(),
            format!("GET /v2/armonly/app/manifests/{digest}"),
        ]
    );
}

#[test]
fn duplicate_images_are_checked_once_and_reported_per_argument() {
    let reg = start_dedicated(Mode::Anon);
    let img = fixture().images.oci_manifest.reference(&reg);
    let mark = reg.mark();
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "--platform",
        "any",
        &img,
        &img,
        &img,
    ]);
    r.assert_code(0);
    assert_eq!(r.json()["images"].as_array().unwrap().len(), 3);
    reg.wait_quiet();
    assert_eq!(reg.requests_since_matching(mark, "/manifests/").len(), 1);
}

#[test]
fn many_images_with_concurrency_one_still_finish() {
    let f = fixture();
    let host = f.anon.host.clone();
    let imgs: Vec<String> = (0..20)
        .map(|i| format!("{host}/oci/app:missing-{i}"))
        .collect();
    let mut args = vec![
        "--insecure-registry",
        host.as_str(),
        "--concurrency",
        "1",
        "--platform",
        "any",
    ];
    args.extend(imgs.iter().map(String::as_str));
    let r = check(&args);
    r.assert_code(11);
    assert_eq!(r.json()["images"].as_array().unwrap().len(), 20);
}

/// A CONNECT proxy on loopback (std threads): it answers `CONNECT name:port` for the names
/// in its table only, dials the address it maps the name to and copies bytes both ways.
/// The names exist nowhere else, so a client that resolved them itself would fail.
pub(crate) struct ConnectProxy {
    /// `127.0.0.1:PORT`.
    pub host: String,
    /// `CONNECT target` of every request, in arrival order.
    connects: Arc<Mutex<Vec<String>>>,
}

impl ConnectProxy {
    pub fn start(table: Vec<(String, String)>) -> ConnectProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let connects = Arc::new(Mutex::new(Vec::new()));
        let (log, table) = (connects.clone(), Arc::new(table));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (log, table) = (log.clone(), table.clone());
                std::thread::spawn(move || {
                    let _ = tunnel(client, &log, &table);
                });
            }
        });
        ConnectProxy { host, connects }
    }

    pub fn connects(&self) -> Vec<String> {
        self.connects.lock().unwrap().clone()
    }
}

fn tunnel(
    client: TcpStream,
    log: &Mutex<Vec<String>>,
    table: &[(String, String)],
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut first = String::new();
    reader.read_line(&mut first)?;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
    }
    let mut words = first.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    log.lock().unwrap().push(format!("{method} {target}"));
    let mut client_w = client;
    let upstream = table
        .iter()
        .find(|(name, _)| method == "CONNECT" && name == target)
        .and_then(|(_, addr)| TcpStream::connect(addr).ok());
    let Some(upstream) = upstream else {
        client_w.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")?;
        return Ok(());
    };
    client_w.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    // The client waits for the 200 before its TLS hello, so nothing is buffered yet; pass
    // on whatever is, to be safe.
    let mut up_w = upstream.try_clone()?;
    up_w.write_all(reader.buffer())?;
    let mut up_r = upstream;
    let back = std::thread::spawn(move || {
        let _ = std::io::copy(&mut up_r, &mut client_w);
        let _ = client_w.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(reader.get_mut(), &mut up_w);
    let _ = up_w.shutdown(std::net::Shutdown::Write);
    let _ = back.join();
    Ok(())
}

/// The port of a `127.0.0.1:PORT` host.
fn port_of(host: &str) -> &str {
    host.rsplit_once(':').unwrap().1
}

#[test]
fn behind_a_proxy_the_registry_name_is_resolved_by_the_proxy_only() {
    let f = fixture();
    let name = "registry.proxied.test";
    let (cert, key) = make_cert(&[name], SystemTime::now() + Duration::from_secs(86_400));
    let reg = start_dedicated_with_cert(Mode::Token, &cert, &key);
    let registry = format!("{name}:{}", port_of(&reg.host));
    let realm = format!("127.0.0.1:{}", f.token_server.port);
    let proxy = ConnectProxy::start(vec![
        (registry.clone(), reg.host.clone()),
        (realm.clone(), realm.clone()),
    ]);
    let ca = f.ca_file.to_string_lossy().into_owned();
    let image = format!("{registry}/oci/app:v1");
    let missing = format!("{registry}/oci/app:not-here");
    // Without the proxy the name resolves nowhere.
    let r = run(
        &[
            "check",
            "--output",
            "json",
            "--ca-file",
            &ca,
            "--timeout",
            "5",
            &image,
        ],
        &[],
    );
    r.assert_code(20);
    assert_eq!(r.image(0)["verdict"], "transient");
    let mark = reg.mark();
    for proxy_url in [
        format!("http://{}", proxy.host),
        format!("http://localhost:{}", port_of(&proxy.host)),
    ] {
        let before = proxy.connects().len();
        let r = run(
            &[
                "check",
                "--output",
                "json",
                "--ca-file",
                &ca,
                "--platform",
                "any",
                "--concurrency",
                "1",
                &image,
                &missing,
            ],
            &[("HTTPS_PROXY", &proxy_url)],
        );
        r.assert_code(11);
        assert_eq!(r.image(0)["verdict"], "pullable", "{proxy_url}");
        assert_eq!(r.image(0)["digest"], f.images.oci_manifest.digest.as_str());
        assert_eq!(r.image(1)["verdict"], "not_found", "{proxy_url}");
        // One tunnel to the registry (kept alive for both images) and one to its realm.
        let mut seen = proxy.connects()[before..].to_vec();
        seen.sort();
        let mut want = vec![format!("CONNECT {registry}"), format!("CONNECT {realm}")];
        want.sort();
        assert_eq!(seen, want, "{proxy_url}");
    }
    let lines: Vec<String> = reg
        .requests_since(mark)
        .into_iter()
        .map(|r| format!("{} {} {}", r.method, r.uri, r.status))
        .collect();
    let once = [
        "HEAD /v2/oci/app/manifests/v1 401",
        "HEAD /v2/oci/app/manifests/v1 200",
        "HEAD /v2/oci/app/manifests/not-here 404",
    ];
    assert_eq!(lines, [once, once].concat());
}

/// 40 references from `-f`, one at a time (`--concurrency 1`), against a registry that
/// accepts connections but never answers: the first image's request is sent and stays
/// unanswered until the 1 s deadline; the 39 whose turn only comes after it are not sent at
/// all, and say so instead of reporting a registry timeout.
#[test]
fn images_whose_turn_comes_after_the_deadline_are_not_checked_and_say_why() {
    let reg = start_dedicated(Mode::Anon);
    let dir = crate::support::temp_dir();
    let list = dir.path().join("refs.txt");
    let refs: String = (0..40)
        .map(|i| format!("{}/oci/app:v{i}\n", reg.host))
        .collect();
    std::fs::write(&list, refs).unwrap();
    let mark = reg.mark();
    reg.pause();
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "--concurrency",
        "1",
        "--timeout",
        "1",
        "--request-timeout",
        "30",
        "-f",
        list.to_str().unwrap(),
    ]);
    reg.resume();
    reg.wait_quiet();
    r.assert_code(20);
    let images = r.json()["images"].as_array().unwrap().clone();
    assert_eq!(images.len(), 40);
    let not_checked: Vec<&serde_json::Value> = images
        .iter()
        .filter(|i| i["not_checked"] == "deadline")
        .collect();
    assert_eq!(not_checked.len(), 39);
    assert_eq!(images[0]["not_checked"], serde_json::Value::Null);
    assert_eq!(images[0]["verdict"], "transient");
    assert_eq!(
        images[0]["detail"],
        format!("GET http://{}/v2/oci/app/manifests/v0: timed out", reg.host)
    );
    for i in &not_checked {
        assert_eq!(i["verdict"], "transient");
        assert_eq!(i["exit_code"], 20);
        assert_eq!(
            i["detail"],
            "not checked: the 1 s deadline (--timeout) passed before its turn; raise --timeout or --concurrency"
        );
        assert_eq!(i["endpoint"], serde_json::Value::Null);
    }
    assert_eq!(images[39]["image"], format!("{}/oci/app:v39", reg.host));
    // One request reached the registry: the first image's.
    let sent: Vec<String> = reg
        .requests_since(mark)
        .iter()
        .map(|q| format!("{} {}", q.method, q.uri))
        .collect();
    assert_eq!(sent, vec!["GET /v2/oci/app/manifests/v0".to_string()]);
}
