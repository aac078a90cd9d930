//! The threads that serve RPC connections: one single-threaded tokio runtime per thread, each
//! owning the connections dealt to it, instead of one work-stealing runtime for all of them.
//!
//! Why: a request is short (tens of microseconds) and runs start to finish on the thread that
//! read it, so nothing is gained by moving tasks between threads, and on a 2-core machine the
//! work-stealing scheduler's wake-ups of idle workers cost CPU the requests need. The acceptor
//! deals new connections to the thread with the fewest and a connection never changes thread.
//!
//! A thread serving a single connection also spins for `--rpc.spin-us` after each answer
//! before it sleeps: a client sending requests one after another (a script, a wallet backend,
//! `wrk -c1`) then finds the thread awake instead of paying a sleep and a wake-up per request
//! (in a VM an idle vCPU is halted, and waking it is a round trip through the hypervisor). With
//! two or more connections on a thread it does not spin: requests queue up and the thread rarely
//! sleeps, and a spinning thread would take CPU from the others.
//!
//! Tried and dropped: moving a thread whose only connection is local onto the CPU its client
//! sends from (`SO_INCOMING_CPU`, then pinning), so that client and server take turns on one
//! CPU without cross-CPU wake-ups. With the client pinned to a CPU it doubled `wrk -c1` on the
//! 2-vCPU bench VM (one eth_simulateV1 transfer 12k -> 24k req/s); with an unpinned client the
//! kernel wakes the client on the other, idle CPU after every answer, the thread follows it,
//! and the same load fell to 5k req/s.

use std::{
    cell::RefCell,
    future::Future,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use tokio::sync::{oneshot, Notify};

thread_local! {
    /// The load record of the RPC worker running on this thread, if it is one.
    static CURRENT: RefCell<Option<Arc<WorkerLoad>>> = const { RefCell::new(None) };
}

/// Tells the worker running this thread (if any) that it has just answered a request, so that
/// it stays awake for the next one. Called by the front door for every answered call.
pub fn note_answer() {
    CURRENT.with(|current| {
        if let Some(load) = current.borrow().as_ref() {
            load.answered();
        }
    });
}

/// What the acceptor and the spinner know of one worker.
#[derive(Debug)]
struct WorkerLoad {
    connections: AtomicUsize,
    /// Nanoseconds from `origin` to the last answer.
    last_answer: AtomicU64,
    origin: Instant,
    /// Wakes the parked spinner.
    answered: Notify,
    /// Turns of the spin loop so far (for tests).
    spins: AtomicU64,
}

impl WorkerLoad {
    fn new() -> Self {
        Self {
            connections: AtomicUsize::new(0),
            last_answer: AtomicU64::new(0),
            origin: Instant::now(),
            answered: Notify::new(),
            spins: AtomicU64::new(0),
        }
    }

    fn answered(&self) {
        self.last_answer
            .store(self.origin.elapsed().as_nanos() as u64, Ordering::Relaxed);
        // With more connections the spinner would only wake up to go back to sleep.
        if self.connections.load(Ordering::Relaxed) <= 1 {
            self.answered.notify_one();
        }
    }

    fn since_last_answer(&self) -> Duration {
        let now = self.origin.elapsed().as_nanos() as u64;
        Duration::from_nanos(now.saturating_sub(self.last_answer.load(Ordering::Relaxed)))
    }

    /// Spins (yielding to the runtime, which polls its sockets on every yield) while this
    /// worker has at most one connection and answered less than `window` ago; parks otherwise.
    async fn spin(self: Arc<Self>, window: Duration) {
        loop {
            self.answered.notified().await;
            while self.connections.load(Ordering::Relaxed) <= 1 && self.since_last_answer() < window
            {
                self.spins.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Counts a connection against its worker until dropped.
#[derive(Debug)]
pub struct ConnectionSlot(Arc<WorkerLoad>);

impl ConnectionSlot {
    fn new(load: &Arc<WorkerLoad>) -> Self {
        load.connections.fetch_add(1, Ordering::Relaxed);
        Self(load.clone())
    }
}

/// Counts one more connection on the worker running this thread (if it is one) until the slot
/// is dropped. For WebSocket connections: the slot [`Workers::deal`] takes ends with the HTTP
/// exchange, which ends at the upgrade, while the socket stays on this thread.
pub fn hold_connection() -> Option<ConnectionSlot> {
    CURRENT.with(|current| current.borrow().as_ref().map(ConnectionSlot::new))
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct Worker {
    runtime: tokio::runtime::Handle,
    load: Arc<WorkerLoad>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// The RPC worker threads. Dropping this stops them (after the connection tasks they run are
/// dropped with their runtimes).
#[derive(Debug)]
pub struct Workers {
    workers: Vec<Worker>,
}

impl Workers {
    /// Starts `threads` workers (at least one). `spin` 0 turns spinning off.
    pub fn start(threads: usize, spin: Duration) -> std::io::Result<Self> {
        let mut workers = Vec::new();
        for index in 0..threads.max(1) {
            let (started, handle) = std::sync::mpsc::channel();
            let (stop, stopped) = oneshot::channel::<()>();
            let load = Arc::new(WorkerLoad::new());
            let thread_load = load.clone();
            // The runtime is built, and dropped, on its own thread: one left in the caller's
            // hands by a failed start would be dropped inside the async caller, which panics.
            let thread = std::thread::Builder::new()
                .name(format!("simnode-rpc-{index}"))
                .spawn(move || {
                    let runtime = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(runtime) => runtime,
                        Err(err) => {
                            let _ = started.send(Err(err));
                            return;
                        }
                    };
                    let _ = started.send(Ok(runtime.handle().clone()));
                    CURRENT.with(|current| *current.borrow_mut() = Some(thread_load.clone()));
                    runtime.block_on(async move {
                        if !spin.is_zero() {
                            tokio::spawn(thread_load.spin(spin));
                        }
                        // A dropped sender stops the worker too.
                        let _ = stopped.await;
                    });
                })?;
            let handle = handle.recv().unwrap_or_else(|_| {
                Err(std::io::Error::other("an RPC thread ended as it started"))
            })?;
            workers.push(Worker {
                runtime: handle,
                load,
                stop: Some(stop),
                thread: Some(thread),
            });
        }
        Ok(Self { workers })
    }

    pub fn len(&self) -> usize {
        self.workers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// Open connections of each thread.
    pub fn connections(&self) -> Vec<usize> {
        self.workers
            .iter()
            .map(|w| w.load.connections.load(Ordering::Relaxed))
            .collect()
    }

    /// Runs `serve(stream)` for a new connection on the worker with the fewest connections.
    /// The connection counts against that worker until the future ends.
    pub fn deal<F, Fut>(&self, stream: std::net::TcpStream, serve: F)
    where
        F: FnOnce(tokio::net::TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Some(worker) = self
            .workers
            .iter()
            .min_by_key(|w| w.load.connections.load(Ordering::Relaxed))
        else {
            return;
        };
        let slot = ConnectionSlot::new(&worker.load);
        worker.runtime.spawn(async move {
            let _slot = slot;
            // The stream was accepted elsewhere: it joins this runtime's reactor here.
            match tokio::net::TcpStream::from_std(stream) {
                Ok(stream) => serve(stream).await,
                Err(err) => {
                    tracing::debug!(target: "simnode::rpc", %err, "cannot register a connection")
                }
            }
        });
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            drop(worker.stop.take());
        }
        // Joining from inside a runtime would block it; the threads end on their own.
        for worker in &mut self.workers {
            if let Some(thread) = worker.thread.take() {
                if tokio::runtime::Handle::try_current().is_err() {
                    let _ = thread.join();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_go_to_the_least_loaded_worker_and_are_released() {
        let workers = Workers::start(2, Duration::ZERO).expect("workers");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (release_tx, release_rx) = std::sync::mpsc::channel::<oneshot::Sender<()>>();
        let mut clients = Vec::new();
        for _ in 0..4 {
            clients.push(std::net::TcpStream::connect(addr).expect("connect"));
            let (stream, _) = listener.accept().expect("accept");
            stream.set_nonblocking(true).expect("nonblocking");
            let (tx, rx) = oneshot::channel::<()>();
            release_tx.send(tx).expect("send");
            workers.deal(stream, move |_stream| async move {
                let _ = rx.await;
            });
        }
        let counts = |w: &Workers| w.connections();
        assert_eq!(counts(&workers), vec![2, 2]);
        for tx in release_rx.try_iter() {
            let _ = tx.send(());
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while counts(&workers) != vec![0, 0] {
            assert!(
                Instant::now() < deadline,
                "slots not released: {:?}",
                counts(&workers)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_spinner_spins_after_an_answer_within_its_window_and_with_one_connection_only() {
        let load = Arc::new(WorkerLoad::new());
        load.connections.store(1, Ordering::Relaxed);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let spins = || load.spins.load(Ordering::Relaxed);
        runtime.block_on(async {
            tokio::spawn(load.clone().spin(Duration::from_millis(10)));
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert_eq!(spins(), 0, "no answer yet: parked");

            load.answered();
            tokio::time::sleep(Duration::from_millis(30)).await;
            let after_answer = spins();
            assert!(
                after_answer > 0,
                "an answer with one connection starts a spin"
            );
            tokio::time::sleep(Duration::from_millis(30)).await;
            assert_eq!(spins(), after_answer, "the spin ends with its window");

            load.connections.store(2, Ordering::Relaxed);
            load.answered();
            tokio::time::sleep(Duration::from_millis(30)).await;
            assert_eq!(spins(), after_answer, "two connections: no spin");
        });
    }
}
