//! Where an EVM-running request executes: first on the RPC thread that received it, for a
//! short budget; past the budget it is stopped and run again from the start on tokio's
//! blocking pool, with the request's real deadline.
//!
//! Why: most simulations and traces finish in tens of microseconds, and handing each of them
//! to a blocking thread and back (two wake-ups, two context switches) cost more CPU than the
//! EVM work itself on a 2-core machine (about a quarter of all samples of an
//! `eth_simulateV1` load). The budget bounds how long a slow request can hold an RPC worker
//! before it moves off it; the work repeated by the second run is at most the budget. Only
//! requests without side effects may use this: the first run is thrown away.

use std::{sync::Arc, time::Instant};

use tokio::sync::Semaphore;

use crate::{RpcError, RpcResult};

/// Runs `run(stop_at)` on this thread with `stop_at` = the earlier of `deadline` and now +
/// `inline_budget`; when that run stops with [`RpcError::Timeout`] before `deadline`, runs
/// `run(deadline)` again on the blocking pool. `run` must report reaching its `stop_at` as
/// `RpcError::Timeout` and must not have side effects.
///
/// With `pool_slots`, a run on the pool first takes one of its permits, waiting for one until
/// `deadline` (then `run(deadline)` reports the timeout itself): more runs at once than cores
/// only share the cores, each holding its memory meanwhile.
pub async fn inline_then_blocking<T, F>(
    inline_budget: std::time::Duration,
    deadline: Instant,
    pool_slots: Option<&Arc<Semaphore>>,
    run: F,
) -> RpcResult<T>
where
    T: Send + 'static,
    F: Fn(Instant) -> RpcResult<T> + Send + 'static,
{
    if !inline_budget.is_zero() {
        let stop_at = deadline.min(Instant::now() + inline_budget);
        match run(stop_at) {
            Err(RpcError::Timeout(_)) if stop_at < deadline && Instant::now() < deadline => {}
            done => return done,
        }
    }
    let permit = match pool_slots {
        None => None,
        Some(slots) => {
            match tokio::time::timeout_at(deadline.into(), slots.clone().acquire_owned()).await {
                Ok(Ok(permit)) => Some(permit),
                Ok(Err(closed)) => return Err(RpcError::internal(closed)),
                Err(_elapsed) => return run(deadline),
            }
        }
    };
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        run(deadline)
    })
    .await
    .map_err(|e| RpcError::internal(format!("EVM task failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            atomic::{AtomicUsize, Ordering},
            Arc,
        },
        time::Duration,
    };

    use super::*;

    /// A run that needs `work` of wall time and reports its stop time as a timeout.
    fn job(work: Duration, runs: Arc<AtomicUsize>) -> impl Fn(Instant) -> RpcResult<u32> {
        move |stop_at| {
            runs.fetch_add(1, Ordering::SeqCst);
            let done = Instant::now() + work;
            loop {
                if Instant::now() >= done {
                    return Ok(7);
                }
                if Instant::now() >= stop_at {
                    return Err(RpcError::Timeout(0));
                }
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn short_work_runs_once_inline() {
        let runs = Arc::new(AtomicUsize::new(0));
        let deadline = Instant::now() + Duration::from_secs(5);
        let out = inline_then_blocking(
            Duration::from_millis(200),
            deadline,
            None,
            job(Duration::ZERO, runs.clone()),
        )
        .await;
        assert_eq!(out.unwrap(), 7);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_past_the_budget_is_run_again_to_the_end() {
        let runs = Arc::new(AtomicUsize::new(0));
        let deadline = Instant::now() + Duration::from_secs(5);
        let out = inline_then_blocking(
            Duration::from_millis(2),
            deadline,
            None,
            job(Duration::from_millis(30), runs.clone()),
        )
        .await;
        assert_eq!(out.unwrap(), 7);
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_past_the_deadline_times_out() {
        let runs = Arc::new(AtomicUsize::new(0));
        let deadline = Instant::now() + Duration::from_millis(20);
        let out = inline_then_blocking(
            Duration::from_millis(2),
            deadline,
            None,
            job(Duration::from_secs(10), runs.clone()),
        )
        .await;
        assert!(matches!(out, Err(RpcError::Timeout(_))));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn zero_budget_goes_straight_to_the_pool() {
        let runs = Arc::new(AtomicUsize::new(0));
        let deadline = Instant::now() + Duration::from_secs(5);
        let out = inline_then_blocking(
            Duration::ZERO,
            deadline,
            None,
            job(Duration::ZERO, runs.clone()),
        )
        .await;
        assert_eq!(out.unwrap(), 7);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    /// Pool runs past the slots wait for one; one that cannot get a slot before its deadline
    /// reports the timeout (its run sees the deadline passed) instead of running on the pool.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pool_runs_wait_for_a_slot_until_their_deadline() {
        let slots = Arc::new(Semaphore::new(1));
        let held = slots.clone().acquire_owned().await.unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        let deadline = Instant::now() + Duration::from_millis(30);
        let out = inline_then_blocking(
            Duration::ZERO,
            deadline,
            Some(&slots),
            job(Duration::from_millis(1), runs.clone()),
        )
        .await;
        assert!(matches!(out, Err(RpcError::Timeout(_))), "{out:?}");
        assert!(Instant::now() >= deadline, "it waited for the slot");

        // A slot freed meanwhile lets the run go on.
        let deadline = Instant::now() + Duration::from_secs(5);
        let waiting = tokio::spawn({
            let slots = slots.clone();
            let runs = runs.clone();
            async move {
                inline_then_blocking(
                    Duration::ZERO,
                    deadline,
                    Some(&slots),
                    job(Duration::ZERO, runs),
                )
                .await
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "no slot yet");
        drop(held);
        assert_eq!(waiting.await.unwrap().unwrap(), 7);
        assert_eq!(slots.available_permits(), 1, "the run gave its slot back");
    }
}
