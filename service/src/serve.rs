//! The HTTP/1.1 accept loop every service runs, with graceful shutdown.
//!
//! On cancellation the loop stops accepting, asks every open connection to finish its
//! in-flight request and close, and waits up to the drain deadline. Request heads are
//! bounded (`max_head_bytes`): a longer request line or header block is refused by
//! hyper with 431 before any handler runs.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::Response;

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

/// Default of `--drain-deadline-secs`: how long shutdown waits for in-flight requests.
pub const DEFAULT_DRAIN_DEADLINE_SECS: u64 = 10;

/// Serving options.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// Largest request head (request line plus headers) in bytes.
    pub max_head_bytes: usize,
    /// How long shutdown waits for in-flight requests.
    pub drain_deadline: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            max_head_bytes: 16 * 1024,
            drain_deadline: Duration::from_secs(DEFAULT_DRAIN_DEADLINE_SECS),
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
    loop {
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
        let _ = stream.set_nodelay(true);
        let h = handler.clone();
        let svc = hyper::service::service_fn(move |req| {
            let h = h.clone();
            async move { Ok::<_, std::convert::Infallible>(h.call(req).await) }
        });
        let conn = builder.serve_connection(TokioIo::new(stream), svc);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                log_conn_error(peer, &e);
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
