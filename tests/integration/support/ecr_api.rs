//! A scripted stand-in for the Amazon ECR API: the cloud endpoint that the real
//! `ecr-credential-provider` calls (`GetAuthorizationToken`, AWS JSON 1.1 over HTTP POST).
//! No real ECR can be reached from a test, so this answers with a token (or an AWS error)
//! chosen by the test, and records what the provider sent: the `X-Amz-Target` and the
//! SigV4 credential scope (access key, region, service) of every call.
//!
//! Plain HTTP on 127.0.0.1: the provider's AWS SDK takes an `http://` endpoint from
//! `AWS_ENDPOINT_URL_ECR` (or `AWS_ENDPOINT_URL`) as it is, so no TLS is needed. The wire
//! side is `hostile_server.rs` used politely (it already records every header and reads
//! request bodies, which a POST needs on a kept-alive connection). Each answer goes out in
//! ONE write: with the head and the body written separately (`Out::reply`), about one run
//! in five of the parallel suite saw the provider's Go client drop the connection right
//! after the head and retry the call 1.5 s later (`Amz-Sdk-Request: attempt=2`), which
//! made the call counts flaky (cause not found; docs/credential-providers.md).
//!
//! ```ignore
//! let api = EcrApi::start(Answer::token("AWS", "pw", Expiry::In(Duration::from_secs(3600))));
//! // run the provider with AWS_ENDPOINT_URL_ECR=api.endpoint() ...
//! assert_eq!(api.calls()[0].region.as_deref(), Some("us-east-1"));
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;

use super::hostile_server::{Flow, Out, Seen, Server, Transport};

/// The `X-Amz-Target` of `GetAuthorizationToken` (service `AmazonEC2ContainerRegistry_V20150921`).
pub const GET_AUTHORIZATION_TOKEN: &str =
    "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken";

/// The account the answers' `proxyEndpoint` names (the provider never reads it back).
pub const ACCOUNT: &str = "123456789012";

/// When the answered token expires (`authorizationData[0].expiresAt`).
#[derive(Clone, Debug)]
pub enum Expiry {
    /// This long after the answer is written.
    In(Duration),
    /// This long before the answer is written: an already expired token.
    Ago(Duration),
    /// No `expiresAt` in the answer.
    Absent,
}

/// What the next calls are answered with.
#[derive(Clone, Debug)]
pub enum Answer {
    /// 200 with one `authorizationData` whose token is base64(`username:password`).
    Token {
        username: String,
        password: String,
        expiry: Expiry,
    },
    /// An AWS JSON error: `status` with `{"__type": kind, "message": message}`.
    Error {
        status: u16,
        kind: String,
        message: String,
    },
}

impl Answer {
    pub fn token(username: &str, password: &str, expiry: Expiry) -> Answer {
        Answer::Token {
            username: username.to_string(),
            password: password.to_string(),
            expiry,
        }
    }

    /// 400 `AccessDeniedException` with this message.
    pub fn access_denied(message: &str) -> Answer {
        Answer::Error {
            status: 400,
            kind: "AccessDeniedException".to_string(),
            message: message.to_string(),
        }
    }
}

/// One call as the stand-in saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// `POST /` for every SDK call.
    pub line: String,
    pub target: Option<String>,
    /// The SDK's `Amz-Sdk-Request` (`attempt=1; max=3`): a retry shows as `attempt=2`.
    pub attempt: Option<String>,
    /// From the `Authorization` header's `Credential=KEY/DATE/REGION/SERVICE/aws4_request`.
    pub access_key: Option<String>,
    pub region: Option<String>,
    pub service: Option<String>,
}

/// A running stand-in; stops accepting when dropped.
pub struct EcrApi {
    server: Server,
    answer: Arc<Mutex<Answer>>,
}

impl EcrApi {
    pub fn start(answer: Answer) -> EcrApi {
        let answer = Arc::new(Mutex::new(answer));
        let current = answer.clone();
        let served = AtomicU64::new(0);
        let server = Server::start(Transport::Plain, move |seen, out| {
            let n = served.fetch_add(1, Ordering::SeqCst) + 1;
            let answer = current.lock().unwrap().clone();
            respond(seen, out, &answer, n)
        });
        EcrApi { server, answer }
    }

    /// `http://127.0.0.1:PORT`, for `AWS_ENDPOINT_URL_ECR`.
    pub fn endpoint(&self) -> &str {
        &self.server.base
    }

    /// Answer every later call with `answer`.
    pub fn set_answer(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    /// Every request as received (all headers), for failure messages.
    pub fn requests(&self) -> Vec<Seen> {
        self.server.seen()
    }

    /// Every call received so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.server.seen().iter().map(call).collect()
    }
}

/// The request id of the `n`th answer (1-based), sent as `x-amzn-RequestId`: the SDK puts
/// it into its error text, so a test can expect that text exactly.
pub fn request_id(n: u64) -> String {
    format!("ecr-api-{n}")
}

fn respond(seen: &Seen, out: &mut Out, answer: &Answer, n: u64) -> std::io::Result<Flow> {
    let id = request_id(n);
    let json = |status: u16, body: serde_json::Value, out: &mut Out| {
        let body = body.to_string();
        // One write for head and body together: see the module doc.
        out.raw(
            format!(
                "HTTP/1.1 {status} Scripted\r\nContent-Type: application/x-amz-json-1.1\r\n\
                 x-amzn-RequestId: {id}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
    };
    if seen.header("X-Amz-Target") != Some(GET_AUTHORIZATION_TOKEN) {
        json(
            400,
            serde_json::json!({"__type": "UnknownOperationException", "message": "not scripted"}),
            out,
        )?;
        return Ok(Flow::KeepAlive);
    }
    match answer {
        Answer::Token {
            username,
            password,
            expiry,
        } => {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
            let region = call(seen).region.unwrap_or_else(|| "us-east-1".into());
            let mut data = serde_json::json!({
                "authorizationToken": token,
                "proxyEndpoint": format!("https://{ACCOUNT}.dkr.ecr.{region}.amazonaws.com"),
            });
            let now = SystemTime::now();
            let at = match expiry {
                Expiry::In(d) => Some(now + *d),
                Expiry::Ago(d) => Some(now - *d),
                Expiry::Absent => None,
            };
            if let Some(at) = at {
                // epoch seconds with a fraction, as the real service writes them
                let secs = at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
                data["expiresAt"] = serde_json::json!(secs);
            }
            json(200, serde_json::json!({"authorizationData": [data]}), out)?;
        }
        Answer::Error {
            status,
            kind,
            message,
        } => json(
            *status,
            serde_json::json!({"__type": kind, "message": message}),
            out,
        )?,
    }
    Ok(Flow::KeepAlive)
}

fn call(seen: &Seen) -> Call {
    let scope: Vec<String> = seen
        .authorization
        .as_deref()
        .and_then(|a| a.split_once("Credential="))
        .map(|(_, rest)| rest.split([',', ' ']).next().unwrap_or(""))
        .map(|c| c.split('/').map(str::to_string).collect())
        .unwrap_or_default();
    let part = |i: usize| scope.get(i).cloned();
    Call {
        line: format!("{} {}", seen.method, seen.path()),
        target: seen.header("X-Amz-Target").map(str::to_string),
        attempt: seen.header("Amz-Sdk-Request").map(str::to_string),
        access_key: part(0),
        region: part(2),
        service: part(3),
    }
}
