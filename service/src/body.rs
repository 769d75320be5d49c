//! The body every service answers with: whole bytes (almost every answer), or a
//! stream of chunks from a bounded channel (large downloads such as report CSVs), so
//! a large answer is written as it is produced and never held twice in memory.
//!
//! A streamed body ends when its sender is dropped. The channel is bounded: a slow
//! reader slows the producer down instead of letting chunks pile up. A producer that
//! cannot finish (a store read failing halfway through a download) fails the body
//! ([`BodySender::fail`]): the server then cuts the connection without the last chunk,
//! so the client sees an incomplete transfer, never a shorter file that looks whole.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::sync::mpsc;

/// A response body: whole, or streamed.
#[derive(Debug)]
pub struct Body(Kind);

#[derive(Debug)]
enum Kind {
    Whole(Option<Bytes>),
    Stream(mpsc::Receiver<Result<Bytes, StreamFailed>>),
}

/// Why a streamed body stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the answer's stream failed: {0}")]
pub struct StreamFailed(pub String);

/// The sending half of a streamed body.
#[derive(Debug, Clone)]
pub struct BodySender(mpsc::Sender<Result<Bytes, StreamFailed>>);

/// The body's reader went away (the client closed the connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderGone;

impl BodySender {
    /// Sends the next chunk; waits while the channel is full.
    pub async fn send(&self, chunk: Bytes) -> Result<(), ReaderGone> {
        self.0.send(Ok(chunk)).await.map_err(|_| ReaderGone)
    }

    /// Ends the body with an error: the connection is cut before the last chunk.
    pub async fn fail(self, why: impl Into<String>) {
        let _ = self.0.send(Err(StreamFailed(why.into()))).await;
    }
}

impl Body {
    /// A body of these bytes.
    pub fn new(bytes: Bytes) -> Body {
        Body(Kind::Whole((!bytes.is_empty()).then_some(bytes)))
    }

    /// A streamed body and its sender; at most `chunks` chunks wait unsent.
    pub fn channel(chunks: usize) -> (BodySender, Body) {
        let (tx, rx) = mpsc::channel(chunks.max(1));
        (BodySender(tx), Body(Kind::Stream(rx)))
    }
}

impl Default for Body {
    fn default() -> Self {
        Body::new(Bytes::new())
    }
}

impl HttpBody for Body {
    type Data = Bytes;
    type Error = StreamFailed;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, StreamFailed>>> {
        match &mut self.0 {
            Kind::Whole(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Kind::Stream(rx) => rx.poll_recv(cx).map(|c| c.map(|b| b.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.0, Kind::Whole(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Kind::Whole(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Stream(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn whole_and_streamed_bodies_read_back() {
        let b = Body::new(Bytes::from_static(b"abc"));
        assert_eq!(b.size_hint().exact(), Some(3));
        assert_eq!(b.collect().await.unwrap().to_bytes(), "abc");
        assert!(Body::default().is_end_stream());
        let (tx, body) = Body::channel(2);
        let producer = tokio::spawn(async move {
            for i in 0..100 {
                tx.send(Bytes::from(format!("{i},"))).await.unwrap();
            }
        });
        let all = body.collect().await.unwrap().to_bytes();
        producer.await.unwrap();
        let want: String = (0..100).map(|i| format!("{i},")).collect();
        assert_eq!(all, want.as_bytes());
    }

    #[tokio::test]
    async fn a_failed_stream_is_an_error_not_a_shorter_body() {
        let (tx, body) = Body::channel(2);
        tokio::spawn(async move {
            tx.send(Bytes::from_static(b"a,b\r\n")).await.unwrap();
            tx.fail("the store went away").await;
        });
        let e = body
            .collect()
            .await
            .expect_err("the reader sees the failure");
        assert_eq!(e, StreamFailed("the store went away".into()));
    }
}
