//! The delay queue: at most one pending run per key, at the earliest time asked for.

use std::collections::{BTreeSet, HashMap};

use tokio::time::Instant;

use super::Key;

/// Keys waiting for their time.
#[derive(Default)]
pub(crate) struct Queue {
    by_time: BTreeSet<(Instant, Key)>,
    at: HashMap<Key, Instant>,
}

impl Queue {
    /// Run `key` at `at`, or at the time already pending if that is earlier.
    pub(crate) fn schedule(&mut self, key: Key, at: Instant) {
        if let Some(&pending) = self.at.get(&key) {
            if pending <= at {
                return;
            }
            self.by_time.remove(&(pending, key.clone()));
        }
        self.at.insert(key.clone(), at);
        self.by_time.insert((at, key));
    }

    /// When the next key is due.
    pub(crate) fn next_time(&self) -> Option<Instant> {
        self.by_time.first().map(|(at, _)| *at)
    }

    /// The earliest key due at `now`, taken off the queue.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Key> {
        let (at, _) = self.by_time.first()?;
        if *at > now {
            return None;
        }
        let (_, key) = self.by_time.pop_first()?;
        self.at.remove(&key);
        Some(key)
    }

    /// Keys pending.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.at.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(name: &str) -> Key {
        Key {
            namespace: "n".into(),
            name: name.into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn one_entry_per_key_at_its_earliest_time() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut q = Queue::default();
        q.schedule(key("a"), t0 + 5 * s);
        q.schedule(key("b"), t0 + 2 * s);
        q.schedule(key("a"), t0 + s);
        q.schedule(key("a"), t0 + 9 * s);
        assert_eq!(q.len(), 2);
        assert_eq!(q.next_time(), Some(t0 + s));
        assert_eq!(q.pop_due(t0), None);
        assert_eq!(q.pop_due(t0 + 3 * s), Some(key("a")));
        assert_eq!(q.pop_due(t0 + 3 * s), Some(key("b")));
        assert_eq!(q.pop_due(t0 + 3 * s), None);
        assert_eq!((q.len(), q.next_time()), (0, None));
    }
}
