//! Closing connections that carry nothing: an HTTP keep-alive connection left open after its
//! last request held its file descriptor for as long as its client liked (hyper's header
//! timeout covers a request begun, not the wait for the next one).
//!
//! A connection is idle while no byte goes either way. A live WebSocket is never idle for
//! long: the server pings it (`--ws.ping-interval`).

use std::{
    pin::Pin,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::Duration,
};

// tokio's clock, so that tests may pause it.
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::Instant,
};

/// When a connection last carried a byte.
#[derive(Debug, Clone)]
pub struct Activity {
    since: Instant,
    /// Milliseconds after `since` of the last byte read or written.
    last_ms: Arc<AtomicU64>,
}

impl Activity {
    fn new() -> Self {
        Self {
            since: Instant::now(),
            last_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    fn touch(&self) {
        let now = self.since.elapsed().as_millis() as u64;
        self.last_ms.store(now, Ordering::Relaxed);
    }

    fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.since.elapsed().saturating_sub(last)
    }

    /// Resolves once the connection has carried nothing for `limit`.
    pub async fn idle_for(&self, limit: Duration) {
        loop {
            let quiet = self.quiet_for();
            if quiet >= limit {
                return;
            }
            tokio::time::sleep(limit - quiet).await;
        }
    }
}

/// `io` with its reads and writes noted in the returned [`Activity`].
pub fn watched<S>(io: S) -> (Watched<S>, Activity) {
    let activity = Activity::new();
    (
        Watched {
            io,
            activity: activity.clone(),
        },
        activity,
    )
}

#[derive(Debug)]
pub struct Watched<S> {
    io: S,
    activity: Activity,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_connection_is_idle_after_its_last_byte() {
        let (mut client, server) = tokio::io::duplex(64);
        let (mut server, activity) = watched(server);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(activity.quiet_for() >= Duration::from_millis(300));
        client.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        server.read_exact(&mut buf).await.unwrap();
        // Quiet from the read on: idle 200 ms after it, not before.
        let started = Instant::now();
        activity.idle_for(Duration::from_millis(200)).await;
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(190), "{waited:?}");
        server.write_all(b"pong").await.unwrap();
        assert!(activity.quiet_for() < Duration::from_millis(100));
    }
}
