//! Host settings: limits, timeouts, polling bounds and the retry policy, with the contract's defaults.

use std::time::Duration;

/// Limits and timing the host applies to every extension call.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSettings {
    /// Per-request timeout (contract: 60 s → 504). A registry entry may override it.
    pub request_timeout: Duration,
    /// Largest request body sent to an extension (contract: 4 MB → 413, never forwarded).
    pub max_request_bytes: usize,
    /// Largest response body read from an extension (contract: 20 MB → dropped, 502).
    pub max_response_bytes: usize,
    /// Overall deadline of a long-running operation (RELO or stepwise), from the first request.
    pub operation_deadline: Duration,
    /// Interval between RELO polls (`/resource/get`); the contract gives no hint, so this is host policy.
    pub relo_poll_interval: Duration,
    /// Lower bound applied to an extension's `retryAfterSeconds` (default 60 when absent).
    pub min_poll_interval: Duration,
    /// Upper bound applied to an extension's `retryAfterSeconds`.
    pub max_poll_interval: Duration,
    /// Retries of failed requests.
    pub retry: RetryPolicy,
}

impl Default for HostSettings {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(60),
            max_request_bytes: 4 * 1024 * 1024,
            max_response_bytes: 20 * 1024 * 1024,
            operation_deadline: Duration::from_secs(2 * 60 * 60),
            relo_poll_interval: Duration::from_secs(5),
            min_poll_interval: Duration::from_secs(1),
            max_poll_interval: Duration::from_secs(600),
            retry: RetryPolicy::default(),
        }
    }
}

impl HostSettings {
    /// Clamps an extension-requested poll interval into `[min_poll_interval, max_poll_interval]`.
    pub fn clamp_poll_interval(&self, requested: Duration) -> Duration {
        requested.clamp(
            self.min_poll_interval,
            self.max_poll_interval.max(self.min_poll_interval),
        )
    }
}

/// Exponential backoff with full jitter for retryable failures.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Delay cap before the first retry; doubles per attempt.
    pub base_delay: Duration,
    /// Largest backoff delay.
    pub max_delay: Duration,
    /// Largest `Retry-After` honoured on a 429; longer requests are cut to this.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(10),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Never retry.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The backoff before retry number `retry` (1-based): uniform in `[0, min(max, base * 2^(retry-1))]`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let exponent = retry.saturating_sub(1).min(20);
        let cap = self
            .base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay);
        let fraction: f64 = rand::random();
        cap.mul_f64(fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_stays_within_its_cap() {
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
            ..RetryPolicy::default()
        };
        for _ in 0..200 {
            assert!(policy.backoff(1) <= Duration::from_millis(100));
            assert!(policy.backoff(2) <= Duration::from_millis(200));
            assert!(policy.backoff(9) <= Duration::from_millis(300));
        }
    }

    #[test]
    fn poll_interval_is_clamped() {
        let settings = HostSettings {
            min_poll_interval: Duration::from_secs(2),
            max_poll_interval: Duration::from_secs(30),
            ..HostSettings::default()
        };
        assert_eq!(
            settings.clamp_poll_interval(Duration::from_secs(60)),
            Duration::from_secs(30)
        );
        assert_eq!(
            settings.clamp_poll_interval(Duration::ZERO),
            Duration::from_secs(2)
        );
        assert_eq!(
            settings.clamp_poll_interval(Duration::from_secs(7)),
            Duration::from_secs(7)
        );
    }
}
