//! The HTTP server: hyper on a tokio runtime of its own thread. Every connection is a task, so
//! a slow or idle client holds up nobody; each is bounded: one request per connection, its
//! head within [`HEAD_DEADLINE`](super::HEAD_DEADLINE) and [`MAX_HEAD`](super::MAX_HEAD) bytes
//! (431 beyond; a connection that sends nothing is closed then too), the whole exchange within
//! [`REQUEST_DEADLINE`](super::REQUEST_DEADLINE).
//!
//! Connections are counted twice: at most `max_connections` at once, and at most a quarter of
//! that ([`per_client`]) from one client address, so one client cannot take every slot. A
//! connection over either cap is not turned away blind: it goes to the probe lane, which answers
//! `GET /health` and `GET /metrics` (what a scheduler's probe and Prometheus ask) and a 503 to
//! anything else, with a head deadline of [`PROBE_DEADLINE`]; the lane has `max_connections`
//! places of its own, and beyond those a connection is closed at once. So idle or trickling
//! clients, however many, never make `/health` a 503 (docs/security.md, round 2).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, TcpListener as StdListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use super::consts::{per_client, HEAD_DEADLINE, MAX_HEAD, MAX_HEADERS, REQUEST_DEADLINE};
use super::routes::{answer, too_many, Shared};

/// The probe lane's head deadline: a probe sends its request at once.
pub(crate) const PROBE_DEADLINE: Duration = Duration::from_secs(1);

/// Connections held, per client address.
#[derive(Default)]
struct Clients(Mutex<HashMap<IpAddr, usize>>);

/// One connection of a client, counted until dropped.
struct ClientSlot {
    clients: Arc<Clients>,
    ip: IpAddr,
    _slot: OwnedSemaphorePermit,
}

impl Clients {
    /// A place for a connection of `ip`, when the client holds fewer than `cap` and a slot of
    /// `slots` is free.
    fn admit(
        self: &Arc<Self>,
        ip: IpAddr,
        cap: usize,
        slots: &Arc<Semaphore>,
    ) -> Option<ClientSlot> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(ip).or_default();
        if *n >= cap {
            return None;
        }
        let slot = slots.clone().try_acquire_owned().ok()?;
        *n += 1;
        Some(ClientSlot {
            clients: self.clone(),
            ip,
            _slot: slot,
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut held = self.clients.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

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
    let max = shared.config.max_connections;
    let slots = Arc::new(Semaphore::new(max));
    let probes = Arc::new(Semaphore::new(max));
    let clients = Arc::new(Clients::default());
    loop {
        let accepted = tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => accepted,
        };
        let (conn, peer) = match accepted {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors, most likely: wait a little, do not spin.
                tracing::warn!("control plane: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let shared = shared.clone();
        if let Some(slot) = clients.admit(peer.ip(), per_client(max), &slots) {
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let shared = shared.clone();
                    async move { Ok::<Response<Full<Bytes>>, Infallible>(answer(req, &shared).await) }
                });
                serve_one(conn, service, HEAD_DEADLINE, REQUEST_DEADLINE).await;
                drop(slot);
            });
            continue;
        }
        // Over a cap: the probe lane, or closed at once when it is full too.
        let Ok(place) = probes.clone().try_acquire_owned() else {
            tracing::debug!("control plane: {peer}: over every cap, closed");
            continue;
        };
        let whole = slots.available_permits() == 0;
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                async move {
                    let probe = req.method() == Method::GET
                        && matches!(req.uri().path(), "/health" | "/metrics" | "/");
                    let reply = match probe {
                        true => answer(req, &shared).await,
                        false => too_many(max, (!whole).then_some(peer.ip())),
                    };
                    Ok::<Response<Full<Bytes>>, Infallible>(reply)
                }
            });
            serve_one(conn, service, PROBE_DEADLINE, 2 * PROBE_DEADLINE).await;
            drop(place);
        });
    }
}

/// Serve one request on `conn`: its head within `head`, the whole exchange within `whole`.
async fn serve_one<S>(conn: tokio::net::TcpStream, service: S, head: Duration, whole: Duration)
where
    S: hyper::service::Service<
            Request<Incoming>,
            Response = Response<Full<Bytes>>,
            Error = Infallible,
        > + Send
        + 'static,
    S::Future: Send + 'static,
{
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(head)
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .keep_alive(false)
        .serve_connection(TokioIo::new(conn), service);
    if let Err(e) = tokio::time::timeout(whole, connection).await {
        tracing::debug!("control plane: a connection ran past its deadline: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_holds_at_most_its_share() {
        let clients = Arc::new(Clients::default());
        let slots = Arc::new(Semaphore::new(8));
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        let cap = per_client(8);
        let held: Vec<_> = (0..cap)
            .map(|_| clients.admit(a, cap, &slots).unwrap())
            .collect();
        assert!(clients.admit(a, cap, &slots).is_none(), "over its share");
        let other = clients.admit(b, cap, &slots);
        assert!(other.is_some(), "another client still gets a slot");
        drop(held);
        assert!(clients.admit(a, cap, &slots).is_some(), "freed when closed");
        assert_eq!(per_client(1), 1);
        assert_eq!(per_client(256), 64);
    }
}
