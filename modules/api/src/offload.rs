//! Where an EVM-running request executes: first on the RPC thread that received it, for a
//! short budget; past the budget it is stopped and run again from the start on tokio's
//! blocking pool (or an [`EvmPool`]), with the request's real deadline.
//!
//! Why: most simulations and traces finish in tens of microseconds, and handing each of them
//! to a blocking thread and back (two wake-ups, two context switches) cost more CPU than the
//! EVM work itself on a 2-core machine (about a quarter of all samples of an
//! `eth_simulateV1` load). The budget bounds how long a slow request can hold an RPC worker
//! before it moves off it; the work repeated by the second run is at most the budget. Only
//! requests without side effects may use this: the first run is thrown away.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc, Arc, Condvar, Mutex,
    },
    time::Instant,
};

use crate::{RpcError, RpcResult};

type Job = Box<dyn FnOnce() + Send>;

thread_local! {
    /// Whether this thread is one of an [`EvmPool`]'s.
    static ON_POOL_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Threads that run EVM work taken off the RPC threads, one per core, in arrival order. More
/// runs at once than cores would only share the cores, each holding its memory meanwhile; and a
/// thread that finishes a run takes the next queued one itself, so no core waits for an RPC
/// thread to hand it on. The threads end when the pool is dropped.
#[derive(Debug)]
pub struct EvmPool {
    queue: mpsc::Sender<Job>,
    /// Threads waiting for a job: [`EvmPool::join`] hands work to them only.
    idle: Arc<AtomicUsize>,
}

impl EvmPool {
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let (queue, jobs) = mpsc::channel::<Job>();
        let jobs = Arc::new(Mutex::new(jobs));
        let idle = Arc::new(AtomicUsize::new(0));
        for i in 0..threads.max(1) {
            let jobs = jobs.clone();
            let idle = idle.clone();
            std::thread::Builder::new()
                .name(format!("simnode-evm-{i}"))
                .spawn(move || {
                    ON_POOL_THREAD.with(|on| on.set(true));
                    run_jobs(&jobs, &idle)
                })?;
        }
        Ok(Self { queue, idle })
    }

    /// One thread per core.
    pub fn per_core() -> std::io::Result<Self> {
        Self::new(std::thread::available_parallelism().map_or(2, |n| n.get()))
    }

    /// Runs `here` on this thread and `aside` on an idle pool thread at the same time, when
    /// this thread is an EVM thread (of any `EvmPool`) and one of this pool's is idle; else
    /// both here. An `aside` still
    /// queued when `here` is done is taken back and run here, so a busy pool costs nothing but
    /// the queueing and never leaves this thread waiting for a thread to free up. A panic in
    /// `aside` resumes here.
    ///
    /// For pieces of one run that do not depend on each other (a simulated block's state root
    /// and its transaction and receipt roots): at low load the second core does one of them.
    /// Only runs on the pool hand work over: the pool holds the long runs, so an idle pool
    /// thread there means a core without EVM work. A run short enough for an RPC thread says
    /// nothing of the other core, which the RPC threads may be keeping busy: handing over
    /// there cost 12% of the requests/s of a 60-call block at 16 connections.
    pub fn join<A, B, RA, RB>(&self, here: A, aside: B) -> (RA, RB)
    where
        A: FnOnce() -> RA,
        B: FnOnce() -> RB + Send + 'static,
        RB: Send + 'static,
    {
        if !ON_POOL_THREAD.with(|on| on.get()) || self.idle.load(Ordering::Relaxed) == 0 {
            let a = here();
            return (a, aside());
        }
        let shared = Arc::new(Aside {
            state: Mutex::new(AsideState::Queued(aside)),
            finished: AtomicBool::new(false),
            done: Condvar::new(),
        });
        let job: Job = {
            let shared = shared.clone();
            Box::new(move || shared.run_if_queued())
        };
        // With the threads gone the work stays queued in `shared` and is taken back below.
        let _ = self.queue.send(job);
        let a = here();
        (a, shared.finish_here())
    }

    /// Runs `run(deadline)` on the pool. A run still queued at `deadline` is answered here by
    /// `run(deadline)` (which reports the timeout at once) and dropped from the queue when its
    /// turn comes, as is one whose caller went away.
    pub async fn run<T, F>(&self, deadline: Instant, run: F) -> RpcResult<T>
    where
        T: Send + 'static,
        F: Fn(Instant) -> RpcResult<T> + Send + 'static,
    {
        // Shared with the job, which holds the lock only while it runs.
        let run = Arc::new(Mutex::new(run));
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let job = {
            let run = run.clone();
            Box::new(move || {
                if !tx.is_closed() {
                    let out = (run.lock().unwrap_or_else(|e| e.into_inner()))(deadline);
                    let _ = tx.send(out);
                }
            })
        };
        self.queue
            .send(job)
            .map_err(|_| RpcError::internal("the EVM threads are gone"))?;
        let out = match tokio::time::timeout_at(deadline.into(), &mut rx).await {
            Ok(out) => out,
            Err(_elapsed) => {
                // Still queued: report the timeout here (the queued job is then skipped).
                // Running: it stops at the deadline too.
                let queued = run.try_lock().ok().map(|run| run(deadline));
                match queued {
                    Some(timeout) => return timeout,
                    None => rx.await,
                }
            }
        };
        out.map_err(|_dropped| RpcError::internal("an EVM thread failed"))?
    }
}

/// A pool thread's life: takes queued jobs in order until the pool is dropped, counting itself
/// idle while it waits.
fn run_jobs(jobs: &Mutex<mpsc::Receiver<Job>>, idle: &AtomicUsize) {
    loop {
        idle.fetch_add(1, Ordering::Relaxed);
        let next = jobs.lock().unwrap_or_else(|e| e.into_inner()).recv();
        idle.fetch_sub(1, Ordering::Relaxed);
        match next {
            // A run that panics fails its request (its answer channel drops), not the thread.
            Ok(job) => {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
            Err(mpsc::RecvError) => return,
        }
    }
}

/// Work handed to the pool by [`EvmPool::join`], shared with the job that may run it.
struct Aside<B, R> {
    state: Mutex<AsideState<B, R>>,
    /// Set with the result, for the joining thread to spin on before it sleeps.
    finished: AtomicBool,
    done: Condvar,
}

/// How long the joining thread waits for a running `aside` awake before it sleeps: a thread
/// put to sleep is woken through the other core, which costs tens of microseconds in a VM.
const SPIN_FOR_ASIDE: std::time::Duration = std::time::Duration::from_micros(200);

enum AsideState<B, R> {
    Queued(B),
    Running,
    Done(std::thread::Result<R>),
    Taken,
}

impl<B: FnOnce() -> R, R> Aside<B, R> {
    /// On a pool thread: runs the work unless the joining thread took it back.
    fn run_if_queued(&self) {
        let work = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match std::mem::replace(&mut *state, AsideState::Running) {
                AsideState::Queued(work) => work,
                other => {
                    *state = other;
                    return;
                }
            }
        };
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = AsideState::Done(out);
        self.finished.store(true, Ordering::Release);
        self.done.notify_all();
    }

    /// On the joining thread: the work's result, running it here if no thread started it.
    fn finish_here(&self) -> R {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*state, AsideState::Running) {
            drop(state);
            let since = Instant::now();
            while !self.finished.load(Ordering::Acquire) && since.elapsed() < SPIN_FOR_ASIDE {
                std::hint::spin_loop();
            }
            state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        }
        loop {
            match std::mem::replace(&mut *state, AsideState::Taken) {
                AsideState::Queued(work) => {
                    drop(state);
                    return work();
                }
                AsideState::Done(Ok(out)) => return out,
                AsideState::Done(Err(panic)) => {
                    drop(state);
                    std::panic::resume_unwind(panic)
                }
                AsideState::Running => {
                    *state = AsideState::Running;
                    state = self.done.wait(state).unwrap_or_else(|e| e.into_inner());
                }
                AsideState::Taken => unreachable!("only the joining thread takes the result"),
            }
        }
    }
}

/// Runs `run(stop_at)` on this thread with `stop_at` = the earlier of `deadline` and now +
/// `inline_budget`; when that run stops with [`RpcError::Timeout`] before `deadline`, runs
/// `run(deadline)` again off this thread: on `pool` when there is one, else on tokio's blocking
/// pool. `run` must report reaching its `stop_at` as `RpcError::Timeout` and must not have side
/// effects.
pub async fn inline_then_blocking<T, F>(
    inline_budget: std::time::Duration,
    deadline: Instant,
    pool: Option<&EvmPool>,
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
    if let Some(pool) = pool {
        return pool.run(deadline, run).await;
    }
    tokio::task::spawn_blocking(move || run(deadline))
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

    /// Runs queue for the pool's threads; one still queued at its deadline reports the timeout
    /// (its run sees the deadline passed) and never runs on the pool.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pool_runs_queue_for_a_thread_until_their_deadline() {
        let pool = Arc::new(EvmPool::new(1).unwrap());
        // Holds the one thread until released (and says when it has it).
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (started, has_thread) = tokio::sync::oneshot::channel::<()>();
        let held = Mutex::new((held, Some(started)));
        let blocker = tokio::spawn({
            let pool = pool.clone();
            async move {
                let deadline = Instant::now() + Duration::from_secs(5);
                pool.run(deadline, move |_| {
                    let mut held = held.lock().unwrap();
                    if let Some(started) = held.1.take() {
                        let _ = started.send(());
                    }
                    let _ = held.0.recv();
                    Ok(1u32)
                })
                .await
            }
        });
        has_thread.await.unwrap();

        let runs = Arc::new(AtomicUsize::new(0));
        let deadline = Instant::now() + Duration::from_millis(30);
        let out = inline_then_blocking(
            Duration::ZERO,
            deadline,
            Some(&pool),
            job(Duration::from_millis(1), runs.clone()),
        )
        .await;
        assert!(matches!(out, Err(RpcError::Timeout(_))), "{out:?}");
        assert!(Instant::now() >= deadline, "it waited for the thread");
        assert_eq!(
            runs.load(Ordering::SeqCst),
            1,
            "only the run reporting the timeout"
        );

        // A thread freed meanwhile takes the next queued run, and the timed-out one is skipped.
        let deadline = Instant::now() + Duration::from_secs(5);
        let waiting = tokio::spawn({
            let pool = pool.clone();
            let runs = runs.clone();
            async move {
                inline_then_blocking(
                    Duration::ZERO,
                    deadline,
                    Some(&pool),
                    job(Duration::ZERO, runs),
                )
                .await
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "no thread yet");
        release.send(()).unwrap();
        assert_eq!(blocker.await.unwrap().unwrap(), 1);
        assert_eq!(waiting.await.unwrap().unwrap(), 7);
        assert_eq!(
            runs.load(Ordering::SeqCst),
            2,
            "the timed-out run was not run again"
        );
    }

    /// Runs `job` on one of `pool`'s threads and returns what it returns.
    fn on_the_pool<T: Send + 'static>(
        pool: &Arc<EvmPool>,
        job: impl FnOnce(&EvmPool) -> T + Send + 'static,
    ) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = pool.clone();
        pool.queue
            .send(Box::new(move || {
                let _ = tx.send(job(&handle));
            }))
            .unwrap();
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the job ran")
    }

    fn wait_until_idle(pool: &EvmPool, threads: usize) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while pool.idle.load(Ordering::Relaxed) < threads {
            assert!(
                Instant::now() < deadline,
                "the pool threads never waited for a job"
            );
            std::thread::yield_now();
        }
    }

    /// On a pool thread, with another idle, the aside work runs on that one while `here` runs.
    #[test]
    fn join_on_the_pool_runs_the_aside_work_on_an_idle_thread_meanwhile() {
        let pool = Arc::new(EvmPool::new(2).unwrap());
        wait_until_idle(&pool, 2);
        let (both_at_once, elsewhere) = on_the_pool(&pool, |pool| {
            let caller = std::thread::current().id();
            let (started, aside_started) = std::sync::mpsc::channel();
            let (here, aside) = pool.join(
                // Returns only once the aside work runs: both at once, on two threads.
                move || aside_started.recv_timeout(Duration::from_secs(5)).is_ok(),
                move || {
                    let _ = started.send(());
                    std::thread::current().id()
                },
            );
            (here, aside != caller)
        });
        assert!(
            both_at_once,
            "the aside work did not start while `here` ran"
        );
        assert!(elsewhere);
    }

    /// Off the pool, or with no other thread idle, both run on the caller.
    #[test]
    fn join_runs_both_here_off_the_pool_or_with_no_thread_idle() {
        let here_and_aside = |pool: &EvmPool| {
            let caller = std::thread::current().id();
            let (here, aside) = pool.join(
                || std::thread::current().id(),
                || std::thread::current().id(),
            );
            (here == caller, aside == caller)
        };
        let pool = Arc::new(EvmPool::new(1).unwrap());
        wait_until_idle(&pool, 1);
        assert_eq!(here_and_aside(&pool), (true, true), "off the pool");
        assert_eq!(
            on_the_pool(&pool, here_and_aside),
            (true, true),
            "the pool's only thread"
        );
    }

    /// Aside work no thread has started is taken back by the caller; a panic in it resumes on
    /// the caller.
    #[test]
    fn aside_work_not_started_runs_here_and_its_panic_reaches_the_caller() {
        let queued = |work: Box<dyn FnOnce() -> u32 + Send>| Aside {
            state: Mutex::new(AsideState::Queued(work)),
            finished: AtomicBool::new(false),
            done: Condvar::new(),
        };
        assert_eq!(queued(Box::new(|| 5)).finish_here(), 5);
        let aside = queued(Box::new(|| 6));
        aside.run_if_queued();
        assert_eq!(aside.finish_here(), 6, "the pool thread's result");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let aside = queued(Box::new(|| panic!("a bug in the aside work")));
            aside.run_if_queued();
            aside.finish_here()
        }));
        assert!(panicked.is_err());
    }

    /// A run that panics fails its own request; the thread goes on to the next.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_run_fails_alone() {
        let pool = EvmPool::new(1).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let out: RpcResult<u32> = pool.run(deadline, |_| panic!("a bug in a run")).await;
        assert!(matches!(out, Err(RpcError::Internal(_))), "{out:?}");
        assert_eq!(pool.run(deadline, |_| Ok(3u32)).await.unwrap(), 3);
    }
}
