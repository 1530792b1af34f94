//! The watcher: list, then watch from the list's resource version, for ever, handing each
//! change to the runtime's loop over a channel.
//!
//! States and what moves them (the API's list/watch protocol; client-go's reflector,
//! `k8s.io/client-go/tools/cache/reflector.go` `ListAndWatch`, behaves the same way):
//!
//! | state | outcome | next |
//! |---|---|---|
//! | list | ok | watch from the list's version (the list is handed over whole) |
//! | list | error | back off, list |
//! | watch start | ok | stream |
//! | watch start | 410 | list at once |
//! | watch start | error | back off, list (the server may have lost our version) |
//! | stream | an event | stream, the version moved to the object's (or the bookmark's) |
//! | stream | ended by the server | watch again from the last version at once; back off first if it ended within [`MIN_WATCH`] |
//! | stream | 410 | list at once |
//! | stream | error | back off, watch again from the last version |
//!
//! Every back-off is [`super::backoff::Backoff`]: one sequence for the whole watcher, reset
//! only after a watch has stayed up its healthy interval. Readiness is lost when a list
//! fails and regained when one succeeds.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Status;
use super::backoff::Backoff;
use super::source::{Event, Source, Watch, WatchError};

/// A watch the server ends sooner than this is treated as failed (backed off), so a proxy
/// that closes every watch at once can't make the watcher spin.
pub(crate) const MIN_WATCH: Duration = Duration::from_secs(1);

/// What the watcher hands the loop.
#[derive(Debug)]
pub(crate) enum Change {
    /// A complete list: the collection is exactly these objects now.
    Listed(Vec<Value>),
    /// An object as it is now.
    Applied(Value),
    /// An object gone from the collection.
    Deleted(Value),
}

/// Where the watcher is.
enum State<W> {
    /// No version to watch from: list.
    Empty,
    /// Start a watch from this version.
    Watch(String),
    /// A watch is open; the version of its last event.
    Streaming {
        version: String,
        watch: W,
        since: Instant,
    },
}

/// Run the watcher until the loop (the receiver of `changes`) is gone. `kind` names the
/// collection in log lines (`cannot list pods`).
pub(crate) async fn run<S: Source>(
    source: &S,
    kind: &str,
    changes: mpsc::Sender<Change>,
    status: &Status,
) {
    let mut backoff = Backoff::default();
    let mut state: State<S::Watch> = State::Empty;
    loop {
        state = match state {
            State::Empty => match source.list().await {
                Ok((items, version)) => {
                    status.lists.inc();
                    if changes.send(Change::Listed(items)).await.is_err() {
                        return;
                    }
                    status.ready.store(true, Ordering::SeqCst);
                    State::Watch(version)
                }
                Err(e) => {
                    status.ready.store(false, Ordering::SeqCst);
                    let delay = backoff.failed(Some(&e));
                    tracing::warn!(error = %e, retry_in_s = delay.as_secs_f64(), "cannot list {kind}");
                    tokio::time::sleep(delay).await;
                    State::Empty
                }
            },
            State::Watch(version) => match source.watch(&version).await {
                Ok(watch) => {
                    backoff.healthy();
                    State::Streaming {
                        version,
                        watch,
                        since: Instant::now(),
                    }
                }
                Err(WatchError::Expired) => State::Empty,
                Err(WatchError::Api(e)) => {
                    let delay = backoff.failed(Some(&e));
                    tracing::warn!(error = %e, retry_in_s = delay.as_secs_f64(), "cannot watch {kind}; listing again");
                    tokio::time::sleep(delay).await;
                    State::Empty
                }
            },
            State::Streaming {
                mut version,
                mut watch,
                since,
            } => match watch.next().await {
                Ok(Some(event)) => {
                    let change = match event {
                        Event::Changed(o) => {
                            version = version_of(&o).unwrap_or(version);
                            Some(Change::Applied(o))
                        }
                        Event::Deleted(o) => {
                            version = version_of(&o).unwrap_or(version);
                            Some(Change::Deleted(o))
                        }
                        Event::Bookmark(v) => {
                            if !v.is_empty() {
                                version = v;
                            }
                            None
                        }
                    };
                    if let Some(c) = change
                        && changes.send(c).await.is_err()
                    {
                        return;
                    }
                    State::Streaming {
                        version,
                        watch,
                        since,
                    }
                }
                Ok(None) if since.elapsed() >= MIN_WATCH => State::Watch(version),
                Ok(None) => {
                    let delay = backoff.failed(None);
                    tracing::warn!(
                        retry_in_s = delay.as_secs_f64(),
                        "the {kind} watch ended at once; watching again"
                    );
                    tokio::time::sleep(delay).await;
                    State::Watch(version)
                }
                Err(WatchError::Expired) => State::Empty,
                Err(WatchError::Api(e)) => {
                    let delay = backoff.failed(Some(&e));
                    tracing::warn!(error = %e, retry_in_s = delay.as_secs_f64(), "the {kind} watch failed; watching again");
                    tokio::time::sleep(delay).await;
                    State::Watch(version)
                }
            },
        };
    }
}

/// `metadata.resourceVersion`, when the object has one.
fn version_of(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}
