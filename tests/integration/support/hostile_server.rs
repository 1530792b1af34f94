//! A scripted, deliberately hostile HTTP/1.1 server (plain or TLS) on loopback (or on the
//! address and name a [`Bind`] gives, `Server::start_on`), for the
//! hostile-registry suite (`hostile.rs`); the well-behaved scripted server with canned
//! replies is `scripted_server.rs`. `ecr_api.rs` also speaks through this one, politely:
//! it needs each request's headers and a POST body read off a kept-alive connection.
//!
//! A real registry (distribution, Harbor, Zot, …) can't be made to misbehave on purpose:
//! it won't trickle its headers, stream a body that never ends, lie in
//! `Docker-Content-Digest`, loop redirects, point its token realm at the cloud metadata
//! address or stall a TLS handshake. So every such peer here is a small script: for each
//! request the handler decides, byte by byte if it wants, what goes back on the wire.
//!
//! Every request is recorded with its `Authorization` header (so the suite can assert that
//! no credential reached a host it wasn't meant for), and every byte written is counted (so
//! the suite can assert that an oversized body was never read in full).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::named::Bind;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `GET`, `HEAD`, …
    pub method: String,
    /// Request target: path and query.
    pub target: String,
    /// The `Authorization` header, verbatim, if any.
    pub authorization: Option<String>,
    /// Every header line as received (name, value trimmed), in order.
    pub headers: Vec<(String, String)>,
    /// The address the connection came from.
    pub peer: IpAddr,
}

impl Seen {
    /// The path without the query string.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A query parameter (percent-decoded), the first with this name.
    pub fn query(&self, name: &str) -> Option<String> {
        let q = self.target.split_once('?')?.1;
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }
}

/// How connections are spoken to.
pub enum Transport {
    /// Plain HTTP/1.1.
    Plain,
    /// HTTP/1.1 over TLS with this certificate chain and key (PEM).
    Tls { cert_pem: String, key_pem: String },
    /// Accept the TCP connection, read whatever comes, never answer: a TLS handshake (or
    /// anything else) that stalls forever.
    Stall,
}

/// What the connection does after a handler returns.
pub enum Flow {
    /// Read the next request on the same connection.
    KeepAlive,
    /// Close the connection.
    Close,
}

/// The write side of one connection, with byte accounting.
pub struct Out<'a> {
    w: &'a mut dyn Write,
    written: &'a AtomicU64,
    head: bool,
}

impl Out<'_> {
    /// Write raw bytes.
    pub fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.w.write_all(bytes)?;
        self.w.flush()?;
        self.written
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// A complete response with `Content-Length`; the body is left out for HEAD.
    pub fn reply(&mut self, status: u16, headers: &[(&str, &str)], body: &[u8]) -> io::Result<()> {
        let mut head = format!("HTTP/1.1 {status} Hostile\r\n");
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        self.raw(head.as_bytes())?;
        if !self.head && !body.is_empty() {
            self.raw(body)?;
        }
        Ok(())
    }

    /// Write `bytes` one at a time with `delay` between them.
    pub fn trickle(&mut self, bytes: &[u8], delay: Duration) -> io::Result<()> {
        for b in bytes {
            self.raw(std::slice::from_ref(b))?;
            thread::sleep(delay);
        }
        Ok(())
    }

    /// Write `chunk` again and again (as it is: the caller framed the response) until the
    /// peer goes away or `limit` bytes are out. Returns the bytes written.
    pub fn repeat(&mut self, chunk: &[u8], limit: u64) -> io::Result<u64> {
        let mut n = 0;
        while n < limit {
            self.raw(chunk)?;
            n += chunk.len() as u64;
        }
        Ok(n)
    }

    /// True when the request being answered is a HEAD.
    pub fn is_head(&self) -> bool {
        self.head
    }
}

type Handler = dyn Fn(&Seen, &mut Out) -> io::Result<Flow> + Send + Sync;

struct State {
    log: Mutex<Vec<Seen>>,
    written: AtomicU64,
    connections: AtomicU64,
    stopped: AtomicBool,
}

/// A running hostile server. Its threads stop accepting when it is dropped; connections
/// in flight end when the peer (the pullcheck child) goes away.
pub struct Server {
    /// `127.0.0.1:PORT` (`NAME:PORT` when started on a named [`Bind`]).
    pub host: String,
    /// `http://127.0.0.1:PORT` or `https://…`.
    pub base: String,
    /// The address it listens on.
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.state.stopped.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

impl Server {
    /// Start a server on a free loopback port; `handler` answers every request.
    pub fn start(
        transport: Transport,
        handler: impl Fn(&Seen, &mut Out) -> io::Result<Flow> + Send + Sync + 'static,
    ) -> Server {
        Server::start_on(&Bind::loopback(), transport, handler)
    }

    /// Start a server on `bind`'s address, named by its name in `host` and `base`.
    pub fn start_on(
        bind: &Bind,
        transport: Transport,
        handler: impl Fn(&Seen, &mut Out) -> io::Result<Flow> + Send + Sync + 'static,
    ) -> Server {
        let listener = bind.listen();
        let addr = listener.local_addr().unwrap();
        let host = bind.host(addr.port());
        let scheme = match transport {
            Transport::Plain => "http",
            _ => "https",
        };
        let tls = match &transport {
            Transport::Tls { cert_pem, key_pem } => Some(server_config(cert_pem, key_pem)),
            _ => None,
        };
        let stall = matches!(transport, Transport::Stall);
        let state = Arc::new(State {
            log: Mutex::new(Vec::new()),
            written: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        });
        let handler: Arc<Handler> = Arc::new(handler);
        let st = state.clone();
        thread::Builder::new()
            .name(format!("hostile-{host}"))
            .spawn(move || {
                for stream in listener.incoming() {
                    if st.stopped.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let Ok(peer) = stream.peer_addr() else {
                        continue;
                    };
                    st.connections.fetch_add(1, Ordering::Relaxed);
                    let (st, handler, tls) = (st.clone(), handler.clone(), tls.clone());
                    thread::spawn(move || {
                        let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
                        let _ = stream.set_write_timeout(Some(Duration::from_secs(60)));
                        if stall {
                            drain_until_closed(stream, Duration::from_secs(60));
                            return;
                        }
                        match tls {
                            Some(cfg) => {
                                if let Ok(conn) = rustls::ServerConnection::new(cfg) {
                                    serve(
                                        rustls::StreamOwned::new(conn, stream),
                                        peer.ip(),
                                        &st,
                                        &*handler,
                                    )
                                }
                            }
                            None => serve(stream, peer.ip(), &st, &*handler),
                        }
                    });
                }
            })
            .expect("spawn hostile server");
        Server {
            base: format!("{scheme}://{host}"),
            host,
            addr,
            state,
        }
    }

    /// Every request received so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.log.lock().unwrap().clone()
    }

    /// `METHOD /path` of every request (query left out).
    pub fn lines(&self) -> Vec<String> {
        self.seen()
            .iter()
            .map(|s| format!("{} {}", s.method, s.path()))
            .collect()
    }

    /// Every `Authorization` value received.
    pub fn authorizations(&self) -> Vec<String> {
        self.seen()
            .into_iter()
            .filter_map(|s| s.authorization)
            .collect()
    }

    /// Bytes written to all connections so far.
    pub fn bytes_written(&self) -> u64 {
        self.state.written.load(Ordering::Relaxed)
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::Relaxed)
    }
}

fn server_config(cert_pem: &str, key_pem: &str) -> Arc<rustls::ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .expect("certificate PEM");
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).expect("key PEM");
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("server certificate");
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// Read and discard until the peer closes (or `max` passes): a peer that never answers.
fn drain_until_closed(mut s: TcpStream, max: Duration) {
    let start = Instant::now();
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 4096];
    while start.elapsed() < max {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

fn serve<S: Read + Write>(stream: S, peer: IpAddr, st: &State, handler: &Handler) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut first = String::new();
        match reader.read_line(&mut first) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut authorization = None;
        let mut headers = Vec::new();
        let mut content_length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" || h == "\n" {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let v = v.trim().to_string();
                headers.push((k.trim().to_string(), v.clone()));
                if k.eq_ignore_ascii_case("authorization") {
                    authorization = Some(v);
                } else if k.eq_ignore_ascii_case("content-length") {
                    content_length = v.parse().unwrap_or(0);
                }
            }
        }
        if content_length > 0 {
            let mut sink = vec![0u8; content_length.min(1 << 20)];
            if reader.read_exact(&mut sink).is_err() {
                return;
            }
        }
        let mut parts = first.split_whitespace();
        let seen = Seen {
            method: parts.next().unwrap_or("").to_string(),
            target: parts.next().unwrap_or("").to_string(),
            authorization,
            headers,
            peer,
        };
        st.log.lock().unwrap().push(seen.clone());
        let mut out = Out {
            w: reader.get_mut(),
            written: &st.written,
            head: seen.method == "HEAD",
        };
        match handler(&seen, &mut out) {
            Ok(Flow::KeepAlive) => {}
            Ok(Flow::Close) | Err(_) => return,
        }
    }
}

/// Hold the connection open without answering until the peer goes away (or `max`).
/// For use inside a handler: "accept the request, then hang".
pub fn hang(max: Duration) -> io::Result<Flow> {
    thread::sleep(max);
    Ok(Flow::Close)
}
