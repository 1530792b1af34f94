//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection
//! package does it (`k8s.io/client-go/tools/leaderelection/leaderelection.go`,
//! `tryAcquireOrRenew`): the holder renews `spec.renewTime` every [`Timing::retry`]; a
//! candidate takes the Lease over once `renewTime + leaseDurationSeconds` has passed; every
//! write carries the `resourceVersion` read, so two candidates never both win. The holder
//! that can't renew within [`Timing::duration`] stops its work before another may start.
//!
//! [`lead`] runs a controller only while this process holds the Lease.

use std::future::Future;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::time::Instant;

use super::Clock;
use crate::apiserver::client::{Limits, Patch, status_error};
use crate::apiserver::error::Verb;
use crate::apiserver::time::parse_time;
use crate::apiserver::{ApiClient, ApiError};

/// The Lease calls, behind a trait for the tests' fake.
pub(crate) trait LeaseApi: Send + Sync + 'static {
    /// The Lease; `None` when there is none.
    fn get(&self) -> impl Future<Output = Result<Option<Value>, ApiError>> + Send;
    /// Create it with this `spec`; `false` when another created it first (409).
    fn create(&self, spec: &Value) -> impl Future<Output = Result<bool, ApiError>> + Send;
    /// Write this `spec` if the Lease is still at `resource_version`; `false` on 409.
    fn update(
        &self,
        resource_version: &str,
        spec: &Value,
    ) -> impl Future<Output = Result<bool, ApiError>> + Send;
}

/// A Lease on the API server: `leases/NAME` in `namespace`.
#[derive(Clone)]
pub(crate) struct ApiLease {
    client: ApiClient,
    namespace: String,
    name: String,
}

/// Bounds of one Lease call (a Lease is a few hundred bytes).
const CALL: Limits = Limits::new(Duration::from_secs(5), 64 * 1024);

impl ApiLease {
    /// Lease `name` in `namespace`, through `client`.
    pub(crate) fn new(client: ApiClient, namespace: &str, name: &str) -> ApiLease {
        ApiLease {
            client,
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    fn collection(&self) -> url::Url {
        self.client.url(&[
            "apis",
            "coordination.k8s.io",
            "v1",
            "namespaces",
            &self.namespace,
            "leases",
        ])
    }

    fn object(&self) -> url::Url {
        let mut u = self.collection();
        if let Ok(mut s) = u.path_segments_mut() {
            s.push(&self.name);
        }
        u
    }
}

impl LeaseApi for ApiLease {
    async fn get(&self) -> Result<Option<Value>, ApiError> {
        self.client.get(&self.object(), CALL).await
    }

    async fn create(&self, spec: &Value) -> Result<bool, ApiError> {
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec});
        let url = self.collection();
        let answer = self.client.create(&url, &lease, CALL).await?;
        match answer.status {
            200 | 201 => Ok(true),
            409 => Ok(false),
            _ => Err(status_error(Verb::Create, url.path(), &answer)),
        }
    }

    async fn update(&self, resource_version: &str, spec: &Value) -> Result<bool, ApiError> {
        // A merge patch that names the resourceVersion read is refused (409) when the Lease
        // changed since: the optimistic lock client-go gets from an update.
        let patch = json!({"metadata": {"resourceVersion": resource_version}, "spec": spec});
        let url = self.object();
        let answer = self.client.patch(&url, &Patch::Merge, &patch, CALL).await?;
        match answer.status {
            200 => Ok(true),
            409 | 404 => Ok(false),
            _ => Err(status_error(Verb::Patch, url.path(), &answer)),
        }
    }
}

/// How long a Lease lasts and how often it is tried.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// `leaseDurationSeconds`: how long a holder that stopped renewing keeps it.
    pub duration: Duration,
    /// How often the holder renews and a candidate tries.
    pub retry: Duration,
}

impl Default for Timing {
    /// client-go's defaults for controllers: 15 s, tried every 2 s.
    fn default() -> Self {
        Timing {
            duration: Duration::from_secs(15),
            retry: Duration::from_secs(2),
        }
    }
}

/// MicroTime, as the API writes `acquireTime` and `renewTime`.
fn micro(t: SystemTime) -> String {
    let ts = jiff::Timestamp::try_from(t).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    ts.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// One try: take or renew the Lease for `identity`. `Ok(true)`: held now.
async fn try_acquire_or_renew<L: LeaseApi>(
    api: &L,
    identity: &str,
    timing: Timing,
    clock: &Clock,
) -> Result<bool, ApiError> {
    let now = clock.now();
    let seconds = timing.duration.as_secs().max(1);
    let Some(lease) = api.get().await? else {
        let spec = json!({"holderIdentity": identity, "leaseDurationSeconds": seconds,
            "acquireTime": micro(now), "renewTime": micro(now), "leaseTransitions": 0});
        return api.create(&spec).await;
    };
    let spec = lease.get("spec").cloned().unwrap_or(Value::Null);
    let holder = spec.get("holderIdentity").and_then(Value::as_str);
    let rv = lease
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let transitions = spec
        .get("leaseTransitions")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if holder == Some(identity) {
        let mut renewed = spec.clone();
        renewed["renewTime"] = json!(micro(now));
        return api.update(rv, &renewed).await;
    }
    let lasts = spec
        .get("leaseDurationSeconds")
        .and_then(Value::as_u64)
        .map_or(timing.duration, Duration::from_secs);
    let renewed_at = spec
        .get("renewTime")
        .and_then(Value::as_str)
        .and_then(parse_time);
    let expired = holder.is_none_or(str::is_empty) || renewed_at.is_none_or(|t| t + lasts <= now);
    if !expired {
        return Ok(false);
    }
    let taken = json!({"holderIdentity": identity, "leaseDurationSeconds": seconds,
        "acquireTime": micro(now), "renewTime": micro(now),
        "leaseTransitions": transitions + 1});
    api.update(rv, &taken).await
}

/// Run `work` while this process (`identity`) holds the Lease; never returns. Losing the
/// Lease (no renewal within [`Timing::duration`]) aborts `work`; it is started anew the
/// next time the Lease is won.
pub(crate) async fn lead<L, W, F>(api: L, identity: String, timing: Timing, clock: Clock, work: W)
where
    L: LeaseApi,
    W: Fn() -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let mut running: Option<tokio::task::JoinHandle<()>> = None;
    let mut renewed = Instant::now();
    loop {
        let held = match try_acquire_or_renew(&api, &identity, timing, &clock).await {
            Ok(held) => held,
            Err(e) => {
                tracing::warn!(identity = %identity, "lease: {e}");
                false
            }
        };
        if held {
            renewed = Instant::now();
            if running.is_none() {
                tracing::info!(identity = %identity, "lease acquired: leading");
                running = Some(tokio::spawn(work()));
            }
        } else if running.is_some() && renewed.elapsed() >= timing.duration {
            tracing::warn!(identity = %identity, "lease lost (not renewed for {} s): stopping", timing.duration.as_secs());
            if let Some(task) = running.take() {
                task.abort();
            }
        }
        tokio::time::sleep(timing.retry).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// One Lease in memory, with resourceVersions; writes can be made to fail.
    #[derive(Default)]
    struct Store {
        lease: Mutex<Option<(u64, Value)>>,
        down: Mutex<bool>,
    }

    #[derive(Clone)]
    struct Fake(Arc<Store>);

    impl Fake {
        fn check(&self) -> Result<(), ApiError> {
            if *self.0.down.lock().unwrap() {
                Err(ApiError::NoTimeLeft {
                    verb: crate::apiserver::error::Verb::Patch,
                    path: "/leases".into(),
                })
            } else {
                Ok(())
            }
        }
        fn holder(&self) -> Option<String> {
            self.0.lease.lock().unwrap().as_ref().and_then(|(_, s)| {
                s.get("holderIdentity")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
        }
    }

    impl LeaseApi for Fake {
        async fn get(&self) -> Result<Option<Value>, ApiError> {
            self.check()?;
            Ok(self.0.lease.lock().unwrap().as_ref().map(
                |(rv, spec)| json!({"metadata": {"resourceVersion": rv.to_string()}, "spec": spec}),
            ))
        }
        async fn create(&self, spec: &Value) -> Result<bool, ApiError> {
            self.check()?;
            let mut l = self.0.lease.lock().unwrap();
            if l.is_some() {
                return Ok(false);
            }
            *l = Some((1, spec.clone()));
            Ok(true)
        }
        async fn update(&self, rv: &str, spec: &Value) -> Result<bool, ApiError> {
            self.check()?;
            let mut l = self.0.lease.lock().unwrap();
            match l.as_mut() {
                Some((v, s)) if v.to_string() == rv => {
                    *v += 1;
                    *s = spec.clone();
                    Ok(true)
                }
                _ => Ok(false),
            }
        }
    }

    fn wall() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_176_606)
    }

    /// Start a candidate; its work counts how often it started and whether it runs.
    fn candidate(
        api: &Fake,
        name: &str,
        clock: Clock,
    ) -> (tokio::task::JoinHandle<()>, Arc<Mutex<u32>>) {
        let started = Arc::new(Mutex::new(0));
        let s = started.clone();
        let task = tokio::spawn(lead(
            api.clone(),
            name.to_string(),
            Timing::default(),
            clock,
            move || {
                *s.lock().unwrap() += 1;
                std::future::pending::<()>()
            },
        ));
        (task, started)
    }

    #[tokio::test(start_paused = true)]
    async fn one_leads_and_the_other_takes_over_when_it_stops_renewing() {
        let api = Fake(Arc::default());
        let clock = Clock::at(wall());
        let (a, a_started) = candidate(&api, "a", clock);
        tokio::time::sleep(Duration::from_millis(10)).await;
        let (_b, b_started) = candidate(&api, "b", clock);
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(api.holder().as_deref(), Some("a"));
        assert_eq!(
            (*a_started.lock().unwrap(), *b_started.lock().unwrap()),
            (1, 0)
        );
        // a dies: b waits out the 15 s lease from a's last renewal, then leads.
        a.abort();
        tokio::time::sleep(Duration::from_secs(14)).await;
        assert_eq!(api.holder().as_deref(), Some("a"));
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(api.holder().as_deref(), Some("b"));
        assert_eq!(*b_started.lock().unwrap(), 1);
        let spec = api.0.lease.lock().unwrap().as_ref().unwrap().1.clone();
        assert_eq!(spec["leaseTransitions"], 1);
        assert_eq!(spec["leaseDurationSeconds"], 15);
    }

    #[tokio::test(start_paused = true)]
    async fn a_holder_that_cannot_renew_stops_its_work_within_the_lease() {
        let api = Fake(Arc::default());
        let clock = Clock::at(wall());
        let (_a, started) = candidate(&api, "a", clock);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(*started.lock().unwrap(), 1);
        *api.0.down.lock().unwrap() = true;
        // The API is gone: after 15 s without a renewal the work is stopped; once the API
        // is back the lease (still ours) is renewed and the work started again.
        tokio::time::sleep(Duration::from_secs(20)).await;
        *api.0.down.lock().unwrap() = false;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(*started.lock().unwrap(), 2);
        assert_eq!(api.holder().as_deref(), Some("a"));
    }

    #[test]
    fn lease_times_are_micro_times() {
        assert_eq!(micro(wall()), "2026-12-02T01:56:46.000000Z");
    }
}
