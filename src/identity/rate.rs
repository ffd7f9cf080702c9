//! Rate limits per principal (per client address when anonymous): a
//! generic cell rate per key, `rate_limit_per_second` with bursts of
//! `rate_limit_burst`.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

/// Checks between two sweeps of keys whose limit has fully recovered (the
/// table of keys stays as small as the set of recent callers).
const SWEEP_EVERY: u64 = 4096;

/// One limiter for every caller.
#[derive(Debug)]
pub struct RateLimits {
    limiter: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
    checks: AtomicU64,
}

impl RateLimits {
    /// `per_second` requests per second with bursts of `burst` (at least
    /// one; the rate rounded up when unset).
    pub fn new(per_second: f64, burst: Option<u32>) -> Result<Self, String> {
        if !(per_second > 0.0 && per_second < 1e9) {
            return Err(format!(
                "invalid rate_limit_per_second {per_second}: expected a number above 0"
            ));
        }
        let burst = burst.unwrap_or(per_second.ceil() as u32);
        let burst = NonZeroU32::new(burst).ok_or("invalid rate_limit_burst 0: expected at least 1")?;
        let quota = Quota::with_period(Duration::from_secs_f64(1.0 / per_second))
            .ok_or_else(|| format!("invalid rate_limit_per_second {per_second}"))?
            .allow_burst(burst);
        Ok(Self {
            limiter: DefaultKeyedRateLimiter::keyed(quota),
            clock: DefaultClock::default(),
            checks: AtomicU64::new(0),
        })
    }

    /// Count one request of `key`; `Err` says how long until it may ask again.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
        }
        self.limiter
            .check_key(&key.to_string())
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_holds_per_key() {
        let limits = RateLimits::new(1.0, Some(3)).unwrap();
        for _ in 0..3 {
            assert!(limits.check("a").is_ok());
        }
        let wait = limits.check("a").unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(1), "{wait:?}");
        assert!(limits.check("b").is_ok(), "another key has its own budget");
        assert!(RateLimits::new(0.0, None).is_err());
        assert!(RateLimits::new(2.0, Some(0)).is_err());
    }
}
