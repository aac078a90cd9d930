//! Per-key request accounting: a token bucket for requests/s (with a burst) and a daily quota.
//!
//! One bucket per key, shared by every HTTP request and WebSocket message made with it. A batch
//! is charged one token per item, all or nothing, so a batch is either served whole or refused
//! whole. A batch larger than the burst is let through once the bucket is full and leaves it in
//! debt (negative), so the long-run rate still holds and no batch size is refused forever.
//! Quota counters live in memory and reset at UTC midnight and at restart.

use std::{
    sync::Mutex,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};

use super::error::FrontDoorError;

const SECONDS_PER_DAY: u64 = 86_400;

/// Limits of one key; `None` fields fall back to the node's defaults (the `--rpc.*` flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct KeyLimits {
    /// Requests per second; 0 means unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps: Option<u32>,
    /// Most requests at once after an idle period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// Requests per UTC day; 0 means unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily_quota: Option<u64>,
}

impl KeyLimits {
    /// These limits with the gaps filled from `defaults`.
    pub fn or(self, defaults: EffectiveLimits) -> EffectiveLimits {
        let rps = self.rps.unwrap_or(defaults.rps);
        EffectiveLimits {
            rps,
            // A burst below 1 could never admit a request.
            burst: self.burst.unwrap_or(defaults.burst).max(1),
            daily_quota: self.daily_quota.unwrap_or(defaults.daily_quota),
        }
    }
}

/// Limits in force for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectiveLimits {
    pub rps: u32,
    pub burst: u32,
    pub daily_quota: u64,
}

#[derive(Debug)]
pub struct Limiter {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    limits: EffectiveLimits,
    tokens: f64,
    refilled_at: Instant,
    day: u64,
    used_today: u64,
}

impl Limiter {
    pub fn new(limits: EffectiveLimits) -> Self {
        Self {
            state: Mutex::new(State {
                limits,
                tokens: f64::from(limits.burst),
                refilled_at: Instant::now(),
                day: 0,
                used_today: 0,
            }),
        }
    }

    /// Changes the limits (a key's stored limits were edited) without resetting what was used.
    pub fn set_limits(&self, limits: EffectiveLimits) {
        let mut state = self.lock();
        if state.limits != limits {
            state.tokens = state.tokens.min(f64::from(limits.burst));
            state.limits = limits;
        }
    }

    pub fn limits(&self) -> EffectiveLimits {
        self.lock().limits
    }

    /// Charges `n` requests now, or says why not and how long to wait.
    pub fn try_acquire(&self, n: u32) -> Result<(), FrontDoorError> {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.try_acquire_at(n, Instant::now(), unix)
    }

    fn try_acquire_at(&self, n: u32, now: Instant, unix: Duration) -> Result<(), FrontDoorError> {
        let mut state = self.lock();
        let limits = state.limits;

        let day = unix.as_secs() / SECONDS_PER_DAY;
        if day != state.day {
            state.day = day;
            state.used_today = 0;
        }
        if limits.daily_quota > 0 && state.used_today + u64::from(n) > limits.daily_quota {
            let next_midnight = Duration::from_secs((day + 1) * SECONDS_PER_DAY);
            return Err(FrontDoorError::QuotaExceeded {
                allowed_per_day: limits.daily_quota,
                backoff: next_midnight.saturating_sub(unix),
            });
        }

        if limits.rps > 0 {
            let rps = f64::from(limits.rps);
            let burst = f64::from(limits.burst);
            let elapsed = now
                .saturating_duration_since(state.refilled_at)
                .as_secs_f64();
            state.tokens = (state.tokens + elapsed * rps).min(burst);
            state.refilled_at = now;
            let needed = f64::from(n).min(burst);
            if state.tokens < needed {
                let wait = (needed - state.tokens) / rps;
                return Err(FrontDoorError::RateLimited {
                    allowed_rps: rps,
                    backoff: Duration::from_secs_f64(wait.max(0.001)),
                });
            }
            state.tokens -= f64::from(n);
        }

        state.used_today += u64::from(n);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock leaves only counters behind; keep serving.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rps: u32, burst: u32, daily_quota: u64) -> EffectiveLimits {
        EffectiveLimits {
            rps,
            burst,
            daily_quota,
        }
    }

    #[test]
    fn bucket_allows_burst_then_refills_at_rate() {
        let limiter = Limiter::new(limits(10, 3, 0));
        let t0 = Instant::now();
        let unix = Duration::from_secs(1_000_000);
        for _ in 0..3 {
            assert!(limiter.try_acquire_at(1, t0, unix).is_ok());
        }
        let Err(FrontDoorError::RateLimited {
            allowed_rps,
            backoff,
        }) = limiter.try_acquire_at(1, t0, unix)
        else {
            panic!("fourth request in the same instant must be limited");
        };
        assert_eq!(allowed_rps, 10.0);
        assert!((backoff.as_secs_f64() - 0.1).abs() < 1e-6, "{backoff:?}");
        // After the advertised backoff, one more request fits.
        assert!(limiter.try_acquire_at(1, t0 + backoff, unix).is_ok());
    }

    #[test]
    fn batch_is_all_or_nothing_and_big_batches_go_into_debt() {
        let limiter = Limiter::new(limits(10, 5, 0));
        let t0 = Instant::now();
        let unix = Duration::from_secs(1_000_000);
        assert!(limiter.try_acquire_at(4, t0, unix).is_ok());
        assert!(
            limiter.try_acquire_at(2, t0, unix).is_err(),
            "only one token left"
        );
        assert!(limiter.try_acquire_at(1, t0, unix).is_ok());
        // A batch of 20 with a burst of 5 waits for a full bucket, then passes and leaves debt.
        let t1 = t0 + Duration::from_millis(500);
        assert!(limiter.try_acquire_at(20, t1, unix).is_ok());
        let Err(FrontDoorError::RateLimited { backoff, .. }) = limiter.try_acquire_at(1, t1, unix)
        else {
            panic!("bucket is in debt");
        };
        // 15 tokens of debt + 1 needed at 10/s.
        assert!((backoff.as_secs_f64() - 1.6).abs() < 1e-6, "{backoff:?}");
    }

    #[test]
    fn daily_quota_resets_at_utc_midnight() {
        let limiter = Limiter::new(limits(0, 1, 2));
        let t = Instant::now();
        let day = Duration::from_secs(20_000 * SECONDS_PER_DAY + 86_000);
        assert!(limiter.try_acquire_at(2, t, day).is_ok());
        let Err(FrontDoorError::QuotaExceeded {
            allowed_per_day,
            backoff,
        }) = limiter.try_acquire_at(1, t, day)
        else {
            panic!("quota is used up");
        };
        assert_eq!(allowed_per_day, 2);
        assert_eq!(backoff, Duration::from_secs(400));
        assert!(limiter.try_acquire_at(1, t, day + backoff).is_ok());
    }

    #[test]
    fn zero_rps_means_unlimited() {
        let limiter = Limiter::new(limits(0, 1, 0));
        let t = Instant::now();
        for _ in 0..1000 {
            assert!(limiter.try_acquire_at(1, t, Duration::ZERO).is_ok());
        }
    }
}
