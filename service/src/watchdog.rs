//! The header and idle timeouts of one connection.
//!
//! hyper's own `header_read_timeout` starts its clock whenever it waits for a request
//! head, idle keep-alive pauses included, so it cannot give a slow head 10 s and an
//! idle connection 60 s. The watchdog tells the two apart: a [`Clock`] per connection
//! is in one of three phases, moved by the connection's reads ([`Watched`]) and its
//! requests ([`Clock::request_started`], [`Clock::request_finished`]):
//!
//! - **head**: from accept, or from the first byte after an idle pause, until hyper
//!   hands the request to the handler; limited by the header timeout;
//! - **busy**: a request in flight, until its response body has been handed to hyper;
//!   never cut here (a slow body is the handler's body timeout);
//! - **idle**: between requests; limited by the idle timeout, counted from the last
//!   byte written, since hyper may still be flushing a large response to a slow
//!   reader after it took the body (so a reader that stops reading for the idle
//!   timeout is closed too, like nginx's `send_timeout`).
//!
//! When a phase's time runs out the connection future is dropped, which closes the
//! socket; no request is being read or answered then, so nothing is cut short.
//!
//! Phase changes do not wake the watchdog: it sleeps until its phase's deadline or for
//! the shorter of the two timeouts, whichever comes first, then looks again. Every
//! change sets a deadline at least that far from the moment it happens, so the
//! watchdog is always awake by the deadline in force, and a connection's requests
//! cost no wake-up and no timer of the watchdog's (before issue 17 each request woke
//! it twice and re-armed its timer twice: about 2 % of the edge's CPU per beacon).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

const HEAD: u8 = 0;
const BUSY: u8 = 1;
const IDLE: u8 = 2;

/// Which timeout closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expired {
    /// The request head did not arrive in time.
    Header,
    /// No request came within the idle timeout.
    Idle,
}

/// The phase of one connection and when it began.
pub(crate) struct Clock {
    origin: Instant,
    phase: AtomicU8,
    since_ms: AtomicU64,
}

impl Clock {
    /// A clock for a connection accepted now: waiting for its first head.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            origin: Instant::now(),
            phase: AtomicU8::new(HEAD),
            since_ms: AtomicU64::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// hyper handed a request to the handler.
    pub(crate) fn request_started(&self) {
        self.phase.store(BUSY, Ordering::Release);
    }

    /// The response body has been handed to hyper: the connection is idle.
    pub(crate) fn request_finished(&self) {
        self.since_ms.store(self.now_ms(), Ordering::Release);
        self.phase.store(IDLE, Ordering::Release);
    }

    fn bytes_read(&self) {
        if self.phase.load(Ordering::Acquire) == IDLE {
            self.since_ms.store(self.now_ms(), Ordering::Release);
            self.phase.store(HEAD, Ordering::Release);
        }
    }

    fn bytes_written(&self) {
        // Only moves the idle deadline later: the watchdog wakes before it anyway.
        if self.phase.load(Ordering::Acquire) == IDLE {
            self.since_ms.store(self.now_ms(), Ordering::Release);
        }
    }

    /// When the current phase runs out and what expires then; `None` while busy.
    fn deadline(&self, header: Duration, idle: Duration) -> Option<(Instant, Expired)> {
        let since = self.origin + Duration::from_millis(self.since_ms.load(Ordering::Acquire));
        match self.phase.load(Ordering::Acquire) {
            HEAD => Some((since + header, Expired::Header)),
            IDLE => Some((since + idle, Expired::Idle)),
            _ => None,
        }
    }
}

/// Runs `conn` until it ends (`Ok`) or a timeout of `clock` expires (`Err`; `conn` is
/// dropped, closing the socket).
pub(crate) async fn guard<F: Future>(
    conn: F,
    clock: &Clock,
    header: Duration,
    idle: Duration,
) -> Result<F::Output, Expired> {
    let mut conn = std::pin::pin!(conn);
    // A change of phase at time t sets a deadline of at least t + step, so sleeping at
    // most `step` from now never oversleeps the deadline in force (module header).
    let step = header.min(idle);
    loop {
        let next = Instant::now() + step;
        let at = clock
            .deadline(header, idle)
            .map_or(next, |(at, _)| at.min(next));
        tokio::select! {
            out = conn.as_mut() => return Ok(out),
            () = tokio::time::sleep_until(at) => {
                // Still the same phase past its deadline: close.
                if let Some((at, expired)) = clock.deadline(header, idle) {
                    if Instant::now() >= at {
                        return Err(expired);
                    }
                }
            }
        }
    }
}

/// A socket whose reads move its [`Clock`] from idle to head and whose writes keep an
/// idle phase from running out while a response is still being flushed.
pub(crate) struct Watched<S> {
    inner: S,
    clock: Arc<Clock>,
}

impl<S> Watched<S> {
    pub(crate) fn new(inner: S, clock: Arc<Clock>) -> Self {
        Self { inner, clock }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.clock.bytes_read();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.clock.bytes_written();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.clock.bytes_written();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A response body that marks its connection idle when hyper is done with it.
pub(crate) struct Tracked<B> {
    inner: B,
    clock: Arc<Clock>,
}

impl<B> Tracked<B> {
    pub(crate) fn new(inner: B, clock: Arc<Clock>) -> Self {
        Self { inner, clock }
    }
}

impl<B> Drop for Tracked<B> {
    fn drop(&mut self) {
        self.clock.request_finished();
    }
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: Duration = Duration::from_secs(10);
    const IDLE: Duration = Duration::from_secs(60);

    /// How long `guard` lets a connection that never ends live, and why it closes it.
    async fn lifetime(clock: &Clock) -> (Duration, Expired) {
        let t = Instant::now();
        let e = guard(std::future::pending::<()>(), clock, HEADER, IDLE)
            .await
            .expect_err("a pending connection only ends by a timeout");
        (t.elapsed(), e)
    }

    #[tokio::test(start_paused = true)]
    async fn heads_get_the_header_timeout_and_pauses_the_idle_one() {
        let clock = Clock::new();
        assert_eq!(lifetime(&clock).await, (HEADER, Expired::Header));

        let clock = Clock::new();
        clock.request_started();
        clock.request_finished();
        assert_eq!(lifetime(&clock).await, (IDLE, Expired::Idle));

        // The first byte after a pause starts the header clock.
        let clock = Clock::new();
        clock.request_started();
        clock.request_finished();
        tokio::time::advance(Duration::from_secs(30)).await;
        clock.bytes_read();
        assert_eq!(lifetime(&clock).await, (HEADER, Expired::Header));

        // Writes after the body was taken (a slow reader) push the idle deadline.
        let clock = Clock::new();
        clock.request_started();
        clock.request_finished();
        tokio::time::advance(Duration::from_secs(50)).await;
        clock.bytes_written();
        assert_eq!(lifetime(&clock).await, (IDLE, Expired::Idle));
    }

    /// Phase changes while the watchdog sleeps (no wake-up) still close at the
    /// deadline of the phase in force.
    #[tokio::test(start_paused = true)]
    async fn changes_while_it_sleeps_keep_their_deadlines() {
        let clock = Clock::new();
        clock.request_started();
        clock.request_finished();
        let t = Instant::now();
        let watched = guard(std::future::pending::<()>(), &clock, HEADER, IDLE);
        let change = async {
            // Idle for 5 s, then a slow head: closed 10 s after its first byte.
            tokio::time::sleep(Duration::from_secs(5)).await;
            clock.bytes_read();
            std::future::pending::<()>().await
        };
        let e = tokio::select! {
            e = watched => e.expect_err("only a timeout ends it"),
            () = change => unreachable!(),
        };
        assert_eq!((t.elapsed(), e), (Duration::from_secs(15), Expired::Header));

        // A request of 25 s, then idle: closed 60 s after it finished.
        let clock = Clock::new();
        let t = Instant::now();
        let watched = guard(std::future::pending::<()>(), &clock, HEADER, IDLE);
        let change = async {
            clock.request_started();
            tokio::time::sleep(Duration::from_secs(25)).await;
            clock.request_finished();
            std::future::pending::<()>().await
        };
        let e = tokio::select! {
            e = watched => e.expect_err("only a timeout ends it"),
            () = change => unreachable!(),
        };
        assert_eq!((t.elapsed(), e), (Duration::from_secs(85), Expired::Idle));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_is_never_cut() {
        let clock = Clock::new();
        clock.request_started();
        let out = guard(tokio::time::sleep(IDLE * 10), &clock, HEADER, IDLE).await;
        assert!(out.is_ok(), "busy for 10 idle timeouts and still served");
    }
}
