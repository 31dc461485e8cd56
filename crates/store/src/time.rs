//! Timestamps as the store persists them: milliseconds since the Unix epoch, identical in every backend.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time with millisecond precision (UTC, Unix epoch). Callers pass timestamps in, so the store never
/// reads a clock itself and tests stay deterministic; [`Timestamp::now`] is for the edges that do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const fn from_unix_millis(millis: i64) -> Self {
        Timestamp(millis)
    }

    pub const fn unix_millis(self) -> i64 {
        self.0
    }

    /// The system clock; before 1970 (a broken clock) it reads as the epoch.
    pub fn now() -> Self {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Timestamp(millis)
    }

    /// This instant plus `duration`, saturating at the end of representable time.
    pub fn saturating_add(self, duration: Duration) -> Self {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_durations_in_millis() {
        let t = Timestamp::from_unix_millis(1_000);
        assert_eq!(
            t.saturating_add(Duration::from_secs(2)).unix_millis(),
            3_000
        );
        assert_eq!(
            Timestamp::from_unix_millis(i64::MAX - 1)
                .saturating_add(Duration::from_secs(1))
                .unix_millis(),
            i64::MAX
        );
    }

    #[test]
    fn now_is_after_2020() {
        assert!(Timestamp::now().unix_millis() > 1_577_836_800_000);
    }
}
