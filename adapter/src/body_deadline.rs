//! A request body must arrive in full within a deadline.
//!
//! hyper's header timeout and the per-piece body timeout (`TimeoutBody`)
//! cut off a client that stops sending; one that trickles a byte just
//! before each gap timeout would still hold its connection (and a slot of
//! `--max-connections`) for as long as it likes. This wrapper ends the body
//! with an error once its total deadline has passed, whatever the pace.

use axum::body::HttpBody;
use hyper::body::{Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// The error a body reports once its deadline has passed.
#[derive(Debug)]
pub struct BodyDeadline;

impl std::fmt::Display for BodyDeadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in full within the time allowed (--body-deadline-ms)")
    }
}

impl std::error::Error for BodyDeadline {}

pub struct DeadlineBody<B> {
    inner: Pin<Box<B>>,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl<B> DeadlineBody<B> {
    pub fn new(inner: B, total: Duration) -> Self {
        DeadlineBody {
            inner: Box::pin(inner),
            deadline: Box::pin(tokio::time::sleep(total)),
        }
    }
}

impl<B> HttpBody for DeadlineBody<B>
where
    B: HttpBody,
    B::Error: Into<axum::BoxError>,
{
    type Data = B::Data;
    type Error = axum::BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if this.inner.is_end_stream() {
            return Poll::Ready(None);
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyDeadline))));
        }
        this.inner.as_mut().poll_frame(cx).map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// A body that never finishes: one byte, then nothing.
    struct Trickle(bool);

    impl HttpBody for Trickle {
        type Data = axum::body::Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
            if self.0 {
                Poll::Pending
            } else {
                self.0 = true;
                Poll::Ready(Some(Ok(Frame::data(axum::body::Bytes::from_static(b"x")))))
            }
        }
    }

    #[tokio::test]
    async fn a_body_that_never_finishes_fails_at_its_deadline() {
        let body = DeadlineBody::new(Trickle(false), Duration::from_millis(50));
        let started = std::time::Instant::now();
        let err = body.collect().await.expect_err("the deadline ends it");
        assert!(err.is::<BodyDeadline>(), "{err}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_complete_body_passes() {
        let body = DeadlineBody::new(
            http_body_util::Full::new(axum::body::Bytes::from_static(b"ok")),
            Duration::from_secs(5),
        );
        assert_eq!(
            body.collect().await.unwrap().to_bytes(),
            axum::body::Bytes::from_static(b"ok")
        );
    }
}
