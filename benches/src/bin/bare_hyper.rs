//! `bare-hyper`: the ceiling for the beacon edge. A bare hyper 1 HTTP/1.1 server on
//! a tokio multi-thread runtime that answers every request 200 with the edge's
//! 43-byte GIF and the edge's beacon headers (`Content-Type: image/gif`,
//! `Cache-Control: no-store`, `Access-Control-Allow-Origin: *`), without reading the
//! path or query: no decoding, validation, dedup, log or metrics. Connection
//! handling mirrors the edge's accept loop (keep-alive, `TCP_NODELAY`, one task per
//! connection).

use std::convert::Infallible;
use std::net::SocketAddr;

use clap::Parser;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ACCESS_CONTROL_ALLOW_ORIGIN, CACHE_CONTROL, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// The edge's pixel: a transparent 1x1 GIF (same bytes as `rm_ingest::edge::PIXEL_GIF`).
const PIXEL_GIF: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

#[derive(Debug, Parser)]
#[command(
    name = "bare-hyper",
    about = "Bare hyper server answering the beacon pixel"
)]
struct Cli {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8081")]
    addr: SocketAddr,
    /// Runtime worker threads (default: one per CPU, as the edge).
    #[arg(long)]
    threads: Option<usize>,
}

fn pixel() -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(PIXEL_GIF)));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("image/gif"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    r
}

async fn serve(addr: SocketAddr) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    eprintln!("bare-hyper listening on {}", listener.local_addr()?);
    let mut builder = http1::Builder::new();
    builder.keep_alive(true);
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                eprintln!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let conn = builder.serve_connection(
            TokioIo::new(stream),
            hyper::service::service_fn(|_req: Request<Incoming>| async {
                Ok::<_, Infallible>(pixel())
            }),
        );
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
}

fn main() -> std::io::Result<()> {
    let cli = Cli::parse();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = cli.threads {
        rt.worker_threads(n.max(1));
    }
    rt.enable_all().build()?.block_on(async {
        tokio::select! {
            r = serve(cli.addr) => r,
            r = tokio::signal::ctrl_c() => r,
        }
    })
}
