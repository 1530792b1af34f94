//! The runtime against the fake cluster, in paused time: every delay is asserted exactly.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tokio::time::{Instant, sleep};

use super::fake::{Call, FakeCluster};
use super::source::WatchError;
use super::*;
use crate::apiserver::ApiError;
use crate::apiserver::error::Verb;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn key(name: &str) -> Key {
    Key {
        namespace: "n".into(),
        name: name.into(),
    }
}

fn object(name: &str, data: &str) -> Value {
    json!({"metadata": {"namespace": "n", "name": name}, "data": data})
}

fn unavailable(verb: Verb, retry_after: Option<Duration>) -> ApiError {
    ApiError::Status {
        verb,
        path: "/api/v1/pods".into(),
        status: 503,
        reason: "ServiceUnavailable".into(),
        message: String::new(),
        retry_after,
    }
}

/// One reconcile as the recorder saw it: when it started (since the test began), the key,
/// and the object's `data` (`None`: reconciled as gone).
type Seen = (Duration, Key, Option<String>);

/// A reconciler that records each call, takes `work` to run, and answers `requeue` for
/// each key's first reconcile (then `Never`).
struct Recorder {
    t0: Instant,
    work: Duration,
    first_requeue: Requeue,
    seen: Mutex<Vec<Seen>>,
    running: AtomicUsize,
    most_running: AtomicUsize,
    /// A key reconciled while a reconcile of it was running (must stay empty).
    overlaps: Mutex<Vec<Key>>,
    busy: Mutex<std::collections::HashSet<Key>>,
}

impl Recorder {
    fn new(work: Duration, first_requeue: Requeue) -> Arc<Recorder> {
        Arc::new(Recorder {
            t0: Instant::now(),
            work,
            first_requeue,
            seen: Mutex::default(),
            running: AtomicUsize::new(0),
            most_running: AtomicUsize::new(0),
            overlaps: Mutex::default(),
            busy: Mutex::default(),
        })
    }

    fn seen(&self) -> Vec<Seen> {
        let mut s = self.seen.lock().unwrap().clone();
        s.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        s
    }
}

impl Reconciler for Recorder {
    async fn reconcile(&self, key: &Key, object: Option<Arc<Value>>) -> Requeue {
        if !self.busy.lock().unwrap().insert(key.clone()) {
            self.overlaps.lock().unwrap().push(key.clone());
        }
        let n = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_running.fetch_max(n, Ordering::SeqCst);
        let first = {
            let mut seen = self.seen.lock().unwrap();
            let first = !seen.iter().any(|(_, k, _)| k == key);
            seen.push((
                self.t0.elapsed(),
                key.clone(),
                object.and_then(|o| o["data"].as_str().map(str::to_string)),
            ));
            first
        };
        sleep(self.work).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.busy.lock().unwrap().remove(key);
        if first {
            self.first_requeue
        } else {
            Requeue::Never
        }
    }
}

const SETTINGS: Settings = Settings {
    kind: "things",
    concurrency: 2,
};

/// Start the runtime on `cluster`; the test's time starts with it.
fn start(
    cluster: &FakeCluster,
    recorder: &Arc<Recorder>,
    settings: Settings,
) -> (tokio::task::JoinHandle<()>, Status) {
    let status = Status::default();
    let task = tokio::spawn(run(
        cluster.clone(),
        recorder.clone(),
        settings,
        status.clone(),
    ));
    (task, status)
}

/// The calls, as (time since `t0`, call).
fn calls(cluster: &FakeCluster, t0: Instant) -> Vec<(Duration, Call)> {
    cluster
        .calls()
        .into_iter()
        .map(|(at, c)| (at - t0, c))
        .collect()
}

fn seen(at: Duration, name: &str, data: Option<&str>) -> Seen {
    (at, key(name), data.map(str::to_string))
}

#[tokio::test(start_paused = true)]
async fn a_list_then_each_change_is_reconciled() {
    let cluster = FakeCluster::default();
    cluster.apply(object("a", "a1"));
    let r = Recorder::new(Duration::ZERO, Requeue::Never);
    let (task, status) = start(&cluster, &r, SETTINGS);
    sleep(secs(1)).await;
    assert!(status.ready.load(Ordering::SeqCst));
    cluster.apply(object("b", "b1"));
    sleep(secs(1)).await;
    cluster.remove(&key("a"));
    sleep(secs(1)).await;
    assert_eq!(
        r.seen(),
        vec![
            seen(ms(0), "a", Some("a1")),
            seen(secs(1), "b", Some("b1")),
            seen(secs(2), "a", None),
        ]
    );
    assert_eq!(
        calls(&cluster, r.t0),
        vec![(ms(0), Call::List), (ms(0), Call::Watch("1".into()))]
    );
    assert_eq!(status.lists.get(), 1);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn a_410_relists_at_once_and_what_vanished_is_reconciled_as_gone() {
    let cluster = FakeCluster::default();
    cluster.apply(object("a", "a1"));
    cluster.apply(object("b", "b1"));
    let r = Recorder::new(Duration::ZERO, Requeue::Never);
    let (task, status) = start(&cluster, &r, SETTINGS);
    sleep(secs(1)).await;
    // Changes the watch is not told of (it is compacted away first).
    cluster.compact();
    cluster.remove(&key("a"));
    cluster.apply(object("b", "b2"));
    sleep(secs(1)).await;
    assert_eq!(
        calls(&cluster, r.t0),
        vec![
            (ms(0), Call::List),
            (ms(0), Call::Watch("2".into())),
            (secs(1), Call::List),
            (secs(1), Call::Watch("4".into())),
        ]
    );
    assert_eq!(
        r.seen(),
        vec![
            seen(ms(0), "a", Some("a1")),
            seen(ms(0), "b", Some("b1")),
            seen(secs(1), "a", None),
            seen(secs(1), "b", Some("b2")),
        ]
    );
    assert_eq!(status.lists.get(), 2);
    // A watch start refused with 410 relists at once too.
    cluster.end_watches();
    cluster.fail_watches([WatchError::Expired]);
    sleep(secs(1)).await;
    let c = calls(&cluster, r.t0);
    assert_eq!(
        c[4..],
        [
            (secs(2), Call::Watch("4".into())),
            (secs(2), Call::List),
            (secs(2), Call::Watch("4".into())),
        ]
    );
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn bookmarks_move_the_version_the_next_watch_starts_from() {
    let cluster = FakeCluster::default();
    cluster.apply(object("a", "a1"));
    let r = Recorder::new(Duration::ZERO, Requeue::Never);
    let (task, _) = start(&cluster, &r, SETTINGS);
    sleep(secs(5)).await;
    let v = cluster.bookmark();
    sleep(secs(1)).await;
    // The server's timeout: a new watch at once, from the bookmark.
    cluster.end_watches();
    sleep(secs(1)).await;
    assert_eq!(
        calls(&cluster, r.t0),
        vec![
            (ms(0), Call::List),
            (ms(0), Call::Watch("1".into())),
            (secs(6), Call::Watch(v)),
        ]
    );
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn list_errors_back_off_honour_retry_after_and_cost_readiness() {
    let cluster = FakeCluster::default();
    cluster.fail_lists([
        unavailable(Verb::List, None),
        unavailable(Verb::List, None),
        unavailable(Verb::List, Some(secs(7))),
    ]);
    let r = Recorder::new(Duration::ZERO, Requeue::Never);
    let (task, status) = start(&cluster, &r, SETTINGS);
    sleep(ms(100)).await;
    assert!(!status.ready.load(Ordering::SeqCst));
    sleep(secs(20)).await;
    assert!(status.ready.load(Ordering::SeqCst));
    assert_eq!(
        calls(&cluster, r.t0),
        vec![
            (ms(0), Call::List),
            (ms(500), Call::List),
            (ms(1500), Call::List),
            // 2 s was next; the server asked for 7.
            (ms(8500), Call::List),
            (ms(8500), Call::Watch("0".into())),
        ]
    );
    task.abort();
}

/// The back-off goes on through successful lists (a watch that keeps failing to start
/// right after its list must not relist every 0.5 s), and starts over only after a watch
/// stayed up 30 s.
#[tokio::test(start_paused = true)]
async fn the_back_off_resets_only_after_a_healthy_watch() {
    let cluster = FakeCluster::default();
    let e = || WatchError::Api(unavailable(Verb::Watch, None));
    cluster.fail_watches([e(), e(), e()]);
    let r = Recorder::new(Duration::ZERO, Requeue::Never);
    let (task, _) = start(&cluster, &r, SETTINGS);
    sleep(secs(10)).await;
    let t = |c: &[(Duration, Call)]| c.iter().map(|(t, _)| *t).collect::<Vec<_>>();
    // list, watch refused, 0.5 s, list, watch refused, 1 s, list, watch refused, 2 s,
    // list, watch (up).
    assert_eq!(
        t(&calls(&cluster, r.t0)),
        [0, 0, 500, 500, 1500, 1500, 3500, 3500].map(ms)
    );
    // A mid-stream failure 6.5 s into the watch: the back-off goes on (4 s), and the watch
    // resumes from its version, no list.
    cluster.break_watches(unavailable(Verb::Watch, None));
    sleep(secs(10)).await;
    let c = calls(&cluster, r.t0);
    assert_eq!(c[8..], [(secs(14), Call::Watch("0".into()))]);
    // Up 30 s (from 14 s), then a failure: 0.5 s again.
    sleep(secs(24)).await;
    cluster.break_watches(unavailable(Verb::Watch, None));
    sleep(secs(1)).await;
    let c = calls(&cluster, r.t0);
    assert_eq!(c[9..], [(ms(44_500), Call::Watch("0".into()))]);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn a_watch_the_server_ends_at_once_is_backed_off() {
    let cluster = FakeCluster::default();
    let r = Recorder::new(Duration::ZERO, Requeue::Never);
    let (task, _) = start(&cluster, &r, SETTINGS);
    sleep(ms(100)).await;
    cluster.end_watches();
    sleep(secs(2)).await;
    assert_eq!(
        calls(&cluster, r.t0),
        vec![
            (ms(0), Call::List),
            (ms(0), Call::Watch("0".into())),
            (ms(600), Call::Watch("0".into())),
        ]
    );
    task.abort();
}

/// A change while its key is being reconciled waits for that reconcile, then runs once
/// with the newest object; other keys go on meanwhile (the stream is read while effects
/// run).
#[tokio::test(start_paused = true)]
async fn a_key_is_never_reconciled_twice_at_once() {
    let cluster = FakeCluster::default();
    cluster.apply(object("a", "a1"));
    let r = Recorder::new(secs(10), Requeue::Never);
    let (task, _) = start(&cluster, &r, SETTINGS);
    sleep(secs(1)).await;
    cluster.apply(object("a", "a2"));
    cluster.apply(object("a", "a3"));
    cluster.apply(object("b", "b1"));
    sleep(secs(30)).await;
    assert_eq!(
        r.seen(),
        vec![
            seen(ms(0), "a", Some("a1")),
            seen(secs(1), "b", Some("b1")),
            seen(secs(10), "a", Some("a3")),
        ]
    );
    assert!(r.overlaps.lock().unwrap().is_empty());
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn at_most_n_reconciles_run_at_once() {
    let cluster = FakeCluster::default();
    for i in 0..7 {
        cluster.apply(object(&format!("o{i}"), "x"));
    }
    let r = Recorder::new(secs(1), Requeue::Never);
    let settings = Settings {
        concurrency: 3,
        ..SETTINGS
    };
    let (task, _) = start(&cluster, &r, settings);
    sleep(secs(10)).await;
    let starts: Vec<Duration> = r.seen().iter().map(|s| s.0).collect();
    assert_eq!(starts, [0, 0, 0, 1000, 1000, 1000, 2000].map(ms).to_vec());
    assert_eq!(r.most_running.load(Ordering::SeqCst), 3);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn a_requeue_runs_again_without_an_event_and_an_event_runs_it_sooner() {
    let cluster = FakeCluster::default();
    cluster.apply(object("a", "a1"));
    cluster.apply(object("b", "b1"));
    let r = Recorder::new(Duration::ZERO, Requeue::After(secs(7)));
    let (task, _) = start(&cluster, &r, SETTINGS);
    sleep(secs(2)).await;
    cluster.apply(object("b", "b2"));
    sleep(secs(20)).await;
    assert_eq!(
        r.seen(),
        vec![
            seen(ms(0), "a", Some("a1")),
            seen(ms(0), "b", Some("b1")),
            // b's event at 2 s ran it then; its pending 7 s requeue was the same run.
            seen(secs(2), "b", Some("b2")),
            seen(secs(7), "a", Some("a1")),
        ]
    );
    task.abort();
}

/// The list back-off: a list that fails after a 410 relist goes on with the sequence when
/// the watch before it was up less than the healthy interval (2 s after 0.5 s and 1 s),
/// and starts again from 0.5 s after a watch that stayed up 30 s. No list or watch comes
/// sooner than its delay.
#[tokio::test(start_paused = true)]
async fn list_back_off_goes_on_after_a_short_watch_and_resets_after_a_healthy_one() {
    let cluster = FakeCluster::default();
    cluster.fail_lists([unavailable(Verb::List, None), unavailable(Verb::List, None)]);
    let r = Recorder::new(Duration::ZERO, Requeue::Never);
    let (task, status) = start(&cluster, &r, SETTINGS);
    // Lists at 0 and 0.5 s fail; at 1.5 s one succeeds and the watch starts.
    sleep(ms(2500)).await;
    // 1 s into the watch: a 410, and the relist fails.
    cluster.fail_lists([unavailable(Verb::List, None)]);
    cluster.compact();
    sleep(ms(37_500)).await;
    // 35.5 s into the next watch (from 4.5 s): a 410, and the relist fails again.
    cluster.fail_lists([unavailable(Verb::List, None)]);
    cluster.compact();
    sleep(secs(5)).await;
    assert_eq!(
        calls(&cluster, r.t0),
        vec![
            (ms(0), Call::List),
            (ms(500), Call::List),
            (ms(1500), Call::List),
            (ms(1500), Call::Watch("0".into())),
            (ms(2500), Call::List),
            // Not reset by the list at 1.5 s nor by a watch up 1 s: 2 s.
            (ms(4500), Call::List),
            (ms(4500), Call::Watch("0".into())),
            (ms(40_000), Call::List),
            // The watch had been up 35.5 s: from the start, 0.5 s.
            (ms(40_500), Call::List),
            (ms(40_500), Call::Watch("0".into())),
        ]
    );
    assert_eq!(status.lists.get(), 3);
    assert!(status.ready.load(Ordering::SeqCst));
    task.abort();
}
