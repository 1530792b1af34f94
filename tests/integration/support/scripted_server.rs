//! A scripted HTTP/1.1 server on loopback (plain HTTP, keep-alive): a route function picks
//! the canned reply to each request. Used ONLY where no real server can be made to show the
//! behaviour: a registry answering 429 with `Retry-After` (`check_transient.rs`), a proxy
//! refusing every CONNECT (`check_options.rs`), a mirror that wants credentials it must never
//! get (`mirrors_explain.rs`) and the Secrets and ServiceAccounts of the Kubernetes API
//! (`webhook.rs`). Every request it gets is recorded so tests can assert the exact number.
//!
//! Peers that misbehave on the wire (trickled bytes, endless bodies, stalled handshakes) are
//! the other scripted server, `hostile_server.rs`.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

/// A canned response: status, extra header lines, body.
pub type Reply = (u16, Vec<(String, String)>, String);

/// A running scripted server.
pub struct Scripted {
    /// `127.0.0.1:PORT`.
    pub host: String,
    /// `METHOD PATH` of every request received, in order.
    pub requests: Arc<Mutex<Vec<String>>>,
    /// The `Authorization` header of every request (None when absent), in order.
    pub authorizations: Arc<Mutex<Vec<Option<String>>>>,
}

impl Scripted {
    /// Start a server whose answer to each request is `route(method, path)`.
    pub fn start(route: impl Fn(&str, &str) -> Reply + Send + Sync + 'static) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let (log, auth_log) = (requests.clone(), authorizations.clone());
        let route = Arc::new(route);
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (log, auth_log) = (log.clone(), auth_log.clone());
                let route = route.clone();
                thread::spawn(move || serve(stream, &log, &auth_log, &*route));
            }
        });
        Scripted {
            host,
            requests,
            authorizations,
        }
    }

    /// Requests received so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    stream: TcpStream,
    log: &Mutex<Vec<String>>,
    auth_log: &Mutex<Vec<Option<String>>>,
    route: &dyn Fn(&str, &str) -> Reply,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut first = String::new();
        if reader.read_line(&mut first).unwrap_or(0) == 0 {
            return;
        }
        let mut authorization = None;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("authorization")
            {
                authorization = Some(v.trim().to_string());
            }
        }
        auth_log.lock().unwrap().push(authorization);
        let mut parts = first.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        log.lock().unwrap().push(format!("{method} {path}"));
        let (status, headers, body) = route(&method, &path);
        let mut resp = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n", body.len());
        for (k, v) in headers {
            resp.push_str(&format!("{k}: {v}\r\n"));
        }
        resp.push_str("\r\n");
        if method != "HEAD" {
            resp.push_str(&body);
        }
        if writer.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}
