//! The HTTP server: hyper on a tokio runtime of its own thread. Every connection is a task, so
//! a slow or idle client holds up nobody; each is bounded: one request per connection, its
//! head within [`HEAD_DEADLINE`](super::HEAD_DEADLINE) and [`MAX_HEAD`](super::MAX_HEAD) bytes
//! (431 beyond), the whole exchange within [`REQUEST_DEADLINE`](super::REQUEST_DEADLINE), and
//! at most `max_connections` at once (beyond, a 503 at once and the connection closed, so the
//! backlog never fills).

use std::convert::Infallible;
use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use super::routes::{answer, Shared};
use super::{HEAD_DEADLINE, MAX_HEAD, MAX_HEADERS, REQUEST_DEADLINE};

/// Serve `listener` until `stop` changes; requests are answered from `shared`.
pub(super) async fn serve(
    listener: StdListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("control plane: cannot listen: {e}");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(shared.config.max_connections));
    loop {
        let accepted = tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => accepted,
        };
        let (conn, _) = match accepted {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors, most likely: wait a little, do not spin.
                tracing::warn!("control plane: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tokio::spawn(too_many(conn, shared.config.max_connections));
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                async move { Ok::<Response<Full<Bytes>>, Infallible>(answer(req, &shared).await) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_DEADLINE)
                .max_header_size(MAX_HEAD)
                .max_headers(MAX_HEADERS)
                .keep_alive(false)
                .serve_connection(TokioIo::new(conn), service);
            if let Err(e) = tokio::time::timeout(REQUEST_DEADLINE, connection).await {
                tracing::debug!("control plane: a connection ran past its deadline: {e}");
            }
            drop(slot);
        });
    }
}

/// Turn a connection over the cap away at once: 503, closed.
async fn too_many(mut conn: tokio::net::TcpStream, max: usize) {
    let body =
        format!("{{\"error\":\"too many connections (--max-connections {max}): try again\"}}\n");
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // Take what the client sent first: closing on unread bytes resets the connection, and the
    // client would lose the answer.
    let exchange = async {
        let mut buf = [0u8; 4096];
        let _ = tokio::time::timeout(Duration::from_millis(200), conn.read(&mut buf)).await;
        let _ = conn.write_all(reply.as_bytes()).await;
        let _ = conn.shutdown().await;
        while matches!(conn.read(&mut buf).await, Ok(n) if n > 0) {}
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), exchange).await;
}
