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
//! places of its own. When they are all taken, a new connection takes the place of the oldest
//! one that has not sent its request yet (closed), and is closed at once only when every place
//! serves a request (each within 2 x [`PROBE_DEADLINE`]). So idle or trickling clients, however
//! many and from however many addresses, never make `/health` a 503 nor leave it unanswered: a
//! probe sends its request at once, idle sockets never do (docs/security.md, rounds 2 and 3).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::{IpAddr, TcpListener as StdListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
use tokio::task::AbortHandle;

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

/// The probe lane's places: each connection in it, oldest first, with whether its request came.
struct ProbeLane {
    places: usize,
    next: AtomicU64,
    held: Mutex<VecDeque<Probe>>,
}

/// A connection in the probe lane.
struct Probe {
    id: u64,
    /// Set once its request's head was read: from then on it is answered, not closed.
    asked: Arc<AtomicBool>,
    abort: Option<AbortHandle>,
}

/// A place in the probe lane, given back when dropped.
struct ProbePlace {
    lane: Arc<ProbeLane>,
    id: u64,
}

impl ProbeLane {
    fn new(places: usize) -> Arc<ProbeLane> {
        Arc::new(ProbeLane {
            places,
            next: AtomicU64::new(0),
            held: Mutex::new(VecDeque::new()),
        })
    }

    /// A place for a new connection: a free one, or that of the oldest connection that has not
    /// sent its request (closed here); `None` when every place serves a request.
    fn take(self: &Arc<Self>) -> Option<(ProbePlace, Arc<AtomicBool>)> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.len() >= self.places {
            let idle = held.iter().position(|p| !p.asked.load(Ordering::SeqCst))?;
            if let Some(old) = held.remove(idle).and_then(|p| p.abort) {
                old.abort();
            }
        }
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let asked = Arc::new(AtomicBool::new(false));
        held.push_back(Probe {
            id,
            asked: asked.clone(),
            abort: None,
        });
        let place = ProbePlace {
            lane: self.clone(),
            id,
        };
        Some((place, asked))
    }

    /// The task serving the connection in place `id`, for closing it.
    fn serving(&self, id: u64, abort: AbortHandle) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = held.iter_mut().find(|p| p.id == id) {
            p.abort = Some(abort);
        }
    }
}

impl Drop for ProbePlace {
    fn drop(&mut self) {
        let mut held = self.lane.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = held.iter().position(|p| p.id == self.id) {
            held.remove(i);
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
    let probes = ProbeLane::new(max);
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
                    async move {
                        Ok::<Response<Full<Bytes>>, Infallible>(answer(req, &shared, peer).await)
                    }
                });
                serve_one(conn, service, HEAD_DEADLINE, REQUEST_DEADLINE).await;
                drop(slot);
            });
            continue;
        }
        // Over a cap: the probe lane, or closed at once when every place there serves a request.
        let Some((place, asked)) = probes.take() else {
            tracing::debug!("control plane: {peer}: over every cap, closed");
            continue;
        };
        let whole = slots.available_permits() == 0;
        let id = place.id;
        let task = tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                asked.store(true, Ordering::SeqCst);
                async move {
                    let probe = req.method() == Method::GET
                        && matches!(req.uri().path(), "/health" | "/metrics" | "/");
                    let reply = match probe {
                        true => answer(req, &shared, peer).await,
                        false => too_many(max, (!whole).then_some(peer.ip())),
                    };
                    Ok::<Response<Full<Bytes>>, Infallible>(reply)
                }
            });
            serve_one(conn, service, PROBE_DEADLINE, 2 * PROBE_DEADLINE).await;
            drop(place);
        });
        probes.serving(id, task.abort_handle());
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

    #[test]
    fn a_new_probe_takes_the_place_of_the_oldest_idle_one() {
        let lane = ProbeLane::new(2);
        let (a, asked_a) = lane.take().unwrap();
        let (b, _) = lane.take().unwrap();
        asked_a.store(true, Ordering::SeqCst);
        // Full: b (idle) goes, a (asking) stays.
        let (c, asked_c) = lane.take().expect("an idle place is taken over");
        let ids: Vec<u64> = lane.held.lock().unwrap().iter().map(|p| p.id).collect();
        assert_eq!(ids, vec![a.id, c.id]);
        asked_c.store(true, Ordering::SeqCst);
        assert!(lane.take().is_none(), "every place serves a request");
        drop((a, b));
        assert_eq!(lane.held.lock().unwrap().len(), 1, "places given back");
        assert!(lane.take().is_some());
    }
}
