//! The HTTP/1.1 accept loop every service runs, with graceful shutdown.
//!
//! On cancellation the loop stops accepting, asks every open connection to finish its
//! in-flight request and close, and waits up to the drain deadline. Request heads are
//! bounded (`max_head_bytes`): a longer request line or header block is refused by
//! hyper with 431 before any handler runs.
//!
//! Connection hygiene (settings in [`crate::listener`]): at most `max_connections`
//! connections are open at once (the loop accepts only with a free permit, so further
//! clients wait in the kernel's backlog while open ones keep being served); a request
//! head must arrive within `header_timeout` and a keep-alive connection may be idle
//! for `idle_timeout` ([`crate::watchdog`]). `body_timeout` travels with the options
//! to the handlers that read bodies. One source (an IPv4 address, an IPv6 /64) keeps
//! at most `max_connections_per_source` open: a connection beyond it is closed as
//! soon as it is accepted, so one client cannot hold every permit.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use crate::listener::{ServeOptions, DEFAULT_DRAIN_DEADLINE_SECS};
use crate::watchdog::{self, Clock, Expired, Tracked, Watched};
use crate::Response;

/// The remote address of the connection a request came on, set by [`serve`] as a
/// request extension (the api keys its authentication limits by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// A service's request handler.
pub trait Handler: Clone + Send + Sync + 'static {
    /// Answers one request. Must not panic; errors are responses.
    fn call(&self, req: http::Request<Incoming>) -> impl Future<Output = Response> + Send;
}

/// Errors of the accept loop.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// In-flight requests did not finish within the drain deadline.
    #[error("drain deadline of {0:?} passed with connections still open")]
    DrainTimeout(Duration),
}

/// The source a connection counts against: an IPv4 address (also IPv4-mapped IPv6)
/// whole, an IPv6 address by its /64 (one host usually holds a whole /64).
pub fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Connections open per source; a [`SourceSlot`] gives its place back on drop.
#[derive(Default)]
struct Sources(Mutex<HashMap<IpAddr, usize>>);

struct SourceSlot(Arc<Sources>, IpAddr);

impl Sources {
    fn take(self: &Arc<Self>, source: IpAddr, cap: usize) -> Option<SourceSlot> {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(source).or_default();
        if cap > 0 && *n >= cap {
            return None;
        }
        *n += 1;
        Some(SourceSlot(Arc::clone(self), source))
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut open = self.0 .0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.1);
            }
        }
    }
}

/// Serves `handler` on `listener` until `shutdown` is cancelled, then drains.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    handler: H,
    shutdown: CancellationToken,
    opts: ServeOptions,
) -> Result<(), ServeError> {
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .keep_alive(true)
        .max_buf_size(opts.max_head_bytes.max(8192));
    let addr = listener.local_addr().ok();
    let permits = Arc::new(Semaphore::new(opts.max_connections.max(1)));
    let sources = Arc::new(Sources::default());
    let (header, idle) = (opts.header_timeout, opts.idle_timeout);
    loop {
        // A permit first: at the cap, new clients wait in the backlog, not in memory.
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            p = Arc::clone(&permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(slot) = sources.take(source_of(peer.ip()), opts.max_connections_per_source) else {
            tracing::debug!(%peer, "connection closed: its source holds its share of connections");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let clock = Clock::new();
        let h = handler.clone();
        let svc_clock = Arc::clone(&clock);
        let svc = hyper::service::service_fn(move |mut req: http::Request<Incoming>| {
            req.extensions_mut().insert(PeerAddr(peer));
            let (h, clock) = (h.clone(), Arc::clone(&svc_clock));
            clock.request_started();
            async move {
                let r = h.call(req).await;
                Ok::<_, std::convert::Infallible>(r.map(|b| Tracked::new(b, clock)))
            }
        });
        let io = TokioIo::new(Watched::new(stream, Arc::clone(&clock)));
        let conn = graceful.watch(builder.serve_connection(io, svc));
        tokio::spawn(async move {
            let _held = (permit, slot);
            match watchdog::guard(conn, &clock, header, idle).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => log_conn_error(peer, &e),
                Err(Expired::Header) => tracing::debug!(%peer, "request head timed out; closed"),
                Err(Expired::Idle) => tracing::debug!(%peer, "idle connection closed"),
            }
        });
    }
    tracing::info!(?addr, "stopped accepting; draining connections");
    tokio::select! {
        () = graceful.shutdown() => Ok(()),
        () = tokio::time::sleep(opts.drain_deadline) => Err(ServeError::DrainTimeout(opts.drain_deadline)),
    }
}

fn log_conn_error(peer: SocketAddr, e: &hyper::Error) {
    if e.is_incomplete_message() || e.is_closed() {
        return;
    }
    tracing::debug!(%peer, error = %e, "connection error");
}
