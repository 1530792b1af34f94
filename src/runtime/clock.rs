//! The wall clock reconcilers read (condition timestamps, grace periods). The system clock
//! in production; in tests one that moves with tokio's paused time, so a 30 s wait is
//! asserted without waiting 30 s.

use std::time::SystemTime;

use tokio::time::Instant;

/// A wall clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// `None`: the system clock. `Some((wall, at))`: `wall` at tokio instant `at`.
    anchor: Option<(SystemTime, Instant)>,
}

impl Clock {
    /// The system clock.
    pub(crate) const fn system() -> Clock {
        Clock { anchor: None }
    }

    /// A clock reading `wall` now and moving with tokio's (possibly paused) time.
    #[cfg(test)]
    pub(crate) fn at(wall: SystemTime) -> Clock {
        Clock {
            anchor: Some((wall, Instant::now())),
        }
    }

    /// Now.
    pub(crate) fn now(&self) -> SystemTime {
        match self.anchor {
            None => SystemTime::now(),
            Some((wall, at)) => wall + at.elapsed(),
        }
    }
}
