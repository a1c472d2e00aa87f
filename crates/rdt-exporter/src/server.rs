//! HTTP: `GET /metrics` answers with the text of a collection (OpenMetrics when asked for,
//! as Prometheus does; the Prometheus text format 0.0.4 otherwise); SIGTERM, SIGINT and
//! SIGHUP stop the server gracefully (requests in flight finish; SIGHUP does not reload: a
//! service manager that sends it on a terminal hang-up or a reload request gets a clean
//! stop, the exporter's own groups released, and restarts it with the new settings).
//!
//! # A network service
//! Anyone who can reach the port can open connections, so none of them may cost the
//! exporter its life or its scrapes:
//! - **Connections are capped** at [`Limits::max_connections`] (the exporter derives it from
//!   its descriptor limit). At the cap the connections with no request in flight for a
//!   second ([`IDLE_GRACE`]: a keep-alive connection between scrapes, one that never sent
//!   a byte, a slowloris one) are closed and accepting waits for a free place; a connection
//!   answering a request keeps it, and a new one has that second to send its request.
//! - **Header timeout** ([`Limits::header_timeout`], hyper's `header_read_timeout`): a
//!   request's head must arrive in full within this time of the server starting to wait
//!   for it, on a new connection and after each response, so it is also the keep-alive
//!   idle timeout. A connection that sends nothing, or its head byte by byte, is closed.
//! - **Accept errors never end the server**: `EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM` close
//!   the idle connections and back off (10 ms doubling to 1 s, logged at most once a
//!   minute); a connection reset before its accept is skipped. The runtime has its timer
//!   (axum's own accept loop slept on a runtime without one and panicked).
//! - **Scrapes share collections**: one collection runs at a time, on the thread that owns
//!   the platform; a scrape that arrives while one runs gets that collection's text, so a
//!   burst of scrapes costs one collection, not one each in a queue ([`Collections`]).
//!
//! axum routes and builds the responses; the accept loop and the per-connection hyper
//! `http1` builder are ours, for the cap, the timeouts and the backoff, which
//! `axum::serve` does not offer. Why axum and hyper: maintained by the tokio project, the
//! HTTP implementation most of the Rust ecosystem runs in production (correct HTTP/1.1
//! parsing, keep-alive, limits), so the exporter inherits its fixes. One runtime thread is
//! plenty: the collections run on the main thread.

use std::convert::Infallible;
use std::io;
use std::net::TcpListener;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, mpsc};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{Notify, Semaphore, oneshot, watch};
use tower::ServiceExt as _;

use crate::metrics::{CONTENT_TYPE, TEXT_CONTENT_TYPE, to_prometheus_text};

/// What the HTTP side allows (module docs).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections open at once, at most.
    pub max_connections: usize,
    /// The longest wait for a request's complete head (and between requests of a
    /// keep-alive connection).
    pub header_timeout: Duration,
}

/// One collection's OpenMetrics text (or the message of its error), shared by every
/// scrape that waited for it; its Prometheus 0.0.4 form is made once, for the first client
/// that wants it. Bodies are shared buffers: a thousand scrapes copy no text.
#[derive(Debug)]
pub struct Collected {
    openmetrics: Result<Bytes, String>,
    text: OnceLock<Bytes>,
}

impl Collected {
    /// A collection's result: the OpenMetrics text, or the error's message.
    #[must_use]
    pub fn new(result: Result<String, String>) -> Arc<Self> {
        Arc::new(Self {
            openmetrics: result.map(Bytes::from),
            text: OnceLock::new(),
        })
    }

    /// The Prometheus text format 0.0.4 of the OpenMetrics text.
    fn text(&self, openmetrics: &Bytes) -> Bytes {
        self.text
            .get_or_init(|| {
                let om = std::str::from_utf8(openmetrics).unwrap_or_default();
                Bytes::from(to_prometheus_text(om))
            })
            .clone()
    }
}

/// Scrapes waiting for a collection, and the channel that starts one on the collecting
/// thread (module docs, "Scrapes share collections").
#[derive(Debug)]
pub struct Collections {
    state: Mutex<Waiting>,
}

#[derive(Debug)]
struct Waiting {
    /// A collection runs (or was asked for): new scrapes join it.
    running: bool,
    waiters: Vec<oneshot::Sender<Arc<Collected>>>,
    /// `None` once the server stopped: the collecting thread's loop ends.
    start: Option<mpsc::Sender<()>>,
}

impl Collections {
    /// The shared state and the receiver of the collecting thread: each `()` received asks
    /// for one collection, whose result goes to [`Collections::finish`]. The receiver ends
    /// when the server stops ([`serve`] returns).
    #[must_use]
    pub fn new() -> (Arc<Self>, mpsc::Receiver<()>) {
        let (tx, rx) = mpsc::channel();
        let this = Self {
            state: Mutex::new(Waiting {
                running: false,
                waiters: Vec::new(),
                start: Some(tx),
            }),
        };
        (Arc::new(this), rx)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for the collection that runs, or starts one; `None` when the collecting
    /// thread is gone (shutting down).
    fn join(&self) -> Option<oneshot::Receiver<Arc<Collected>>> {
        let mut w = self.lock();
        let (tx, rx) = oneshot::channel();
        if !w.running {
            w.start.as_ref()?.send(()).ok()?;
            w.running = true;
        }
        w.waiters.push(tx);
        Some(rx)
    }

    /// Gives `result` to every scrape that waited for this collection; the next scrape
    /// starts a new one.
    pub fn finish(&self, result: &Arc<Collected>) {
        let waiters = {
            let mut w = self.lock();
            w.running = false;
            std::mem::take(&mut w.waiters)
        };
        for tx in waiters {
            let _ = tx.send(Arc::clone(result));
        }
    }

    /// Ends the collecting thread's loop once it has answered what it was asked.
    fn close(&self) {
        self.lock().start = None;
    }
}

/// Which signal stopped the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM.
    Term,
    /// SIGINT.
    Int,
    /// SIGHUP.
    Hup,
}

impl Stop {
    /// `SIGTERM`, `SIGINT`, `SIGHUP`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Term => "SIGTERM",
            Self::Int => "SIGINT",
            Self::Hup => "SIGHUP",
        }
    }
}

/// Serves on `listener` until SIGTERM, SIGINT or SIGHUP, asking `collections` for the
/// text of each scrape; returns the signal. `stopping` is set as the signal arrives, so
/// that a collection in progress ends at its next group (the telemetry's
/// `TelemetryOptions::cancel`) instead of after the whole scan.
///
/// # Errors
/// The runtime or the signal handlers cannot be set up; the listener cannot be made
/// non-blocking. Accept errors are not errors (module docs).
pub fn serve(
    listener: TcpListener,
    collections: &Arc<Collections>,
    limits: Limits,
    stopping: &std::sync::atomic::AtomicBool,
) -> io::Result<Stop> {
    // However this ends (an error, a panic), the collecting thread's loop ends with it.
    struct Close<'a>(&'a Collections);
    impl Drop for Close<'_> {
        fn drop(&mut self) {
            self.0.close();
        }
    }
    let _close = Close(collections);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    let stop = rt.block_on(async {
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let mut hup = signal(SignalKind::hangup())?;
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let app = Router::new()
            .route("/metrics", get(metrics))
            .route("/", get(index))
            .with_state(Arc::clone(collections));
        let stopped = async {
            let s = tokio::select! {
                _ = term.recv() => Stop::Term,
                _ = int.recv() => Stop::Int,
                _ = hup.recv() => Stop::Hup,
            };
            stopping.store(true, std::sync::atomic::Ordering::Relaxed);
            s
        };
        Ok::<_, io::Error>(accept_loop(listener, app, limits, stopped).await)
    })?;
    Ok(stop)
}

/// Accepts until `stopped`, then closes the idle connections and waits (a header timeout
/// at most) for those answering a request.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: Limits,
    stopped: impl Future<Output = Stop>,
) -> Stop {
    let max = limits.max_connections.max(1);
    let places = Arc::new(Semaphore::new(max));
    let pressure = Arc::new(Notify::new());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut backoff = Duration::ZERO;
    let mut logged: Option<Instant> = None;
    tokio::pin!(stopped);
    let stop = loop {
        let place = if let Ok(p) = Arc::clone(&places).try_acquire_owned() {
            p
        } else {
            // At the cap: the connections idle for a while go (asked again as more become
            // idle long enough), the next free place is ours.
            let waited = loop {
                pressure.notify_waiters();
                tokio::select! {
                    p = Arc::clone(&places).acquire_owned() => {
                        // Err only once closed, which it never is.
                        if let Ok(p) = p {
                            break Ok(p);
                        }
                    }
                    () = tokio::time::sleep(IDLE_GRACE / 4) => {}
                    s = &mut stopped => break Err(s),
                }
            };
            match waited {
                Ok(p) => p,
                Err(s) => break s,
            }
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            s = &mut stopped => break s,
        };
        match accepted {
            Ok((stream, _)) => {
                backoff = Duration::ZERO;
                tokio::spawn(connection(
                    stream,
                    app.clone(),
                    limits,
                    Arc::clone(&pressure),
                    stop_rx.clone(),
                    place,
                ));
            }
            Err(e) if is_connection_error(&e) => {}
            Err(e) => {
                drop(place);
                pressure.notify_waiters();
                if logged.is_none_or(|t| t.elapsed() >= Duration::from_mins(1)) {
                    eprintln!(
                        "rdt-exporter: accepting connections: {e} (backing off; idle connections closed)"
                    );
                    logged = Some(Instant::now());
                }
                backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    s = &mut stopped => break s,
                }
            }
        }
    };
    drop(listener);
    let _ = stop_tx.send(true);
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(
        limits.header_timeout + Duration::from_secs(5),
        places.acquire_many(all),
    )
    .await;
    stop
}

/// An accept error that concerns one connection only (reset or aborted before the accept).
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
    ) || e.raw_os_error() == Some(nix::errno::Errno::EPROTO as i32)
}

/// One connection: hyper's HTTP/1.1 with the header timeout; closed when idle at the cap
/// or when the server stops. Holds its `place` until it ends.
async fn connection(
    stream: tokio::net::TcpStream,
    app: Router,
    limits: Limits,
    pressure: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
    place: tokio::sync::OwnedSemaphorePermit,
) {
    let _place = place;
    let activity = Arc::new(Activity::new());
    let in_flight = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        let app = app.clone();
        let guard = Busy::new(&in_flight);
        async move {
            let resp = app.oneshot(req.map(Body::new)).await?;
            // Busy until hyper has sent the whole body and dropped it.
            Ok::<_, Infallible>(resp.map(|b| {
                Body::new(Guarded {
                    inner: b,
                    _busy: guard,
                })
            }))
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    loop {
        let squeezed = pressure.notified();
        tokio::select! {
            _ = conn.as_mut() => return,
            () = squeezed => {
                if activity.idle_for().is_some_and(|d| d >= IDLE_GRACE) {
                    return; // dropping the connection closes it
                }
            }
            _ = stop.changed() => {
                if activity.idle_for().is_some() {
                    return;
                }
                conn.as_mut().graceful_shutdown();
                let _ = conn.as_mut().await;
                return;
            }
        }
    }
}

/// How long a connection must have been idle (no request in flight, since its accept or
/// its last response) to be closed at the cap: a new client has this long to send its
/// request, so a flood of new connections cannot push out a scrape that just connected.
const IDLE_GRACE: Duration = Duration::from_secs(1);

/// What a connection does: requests in flight, and since when it has had none.
#[derive(Debug)]
struct Activity {
    start: Instant,
    busy: AtomicUsize,
    /// Milliseconds from `start` to the end of the last response (0: none yet).
    idle_since_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            busy: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// How long the connection has had no request in flight; `None` while it has one.
    fn idle_for(&self) -> Option<Duration> {
        if self.busy.load(Ordering::Acquire) > 0 {
            return None;
        }
        let since = self.idle_since_ms.load(Ordering::Acquire);
        Some(Duration::from_millis(self.now_ms().saturating_sub(since)))
    }
}

/// A request in flight on a connection, until its response body is dropped.
#[derive(Debug)]
struct Busy(Arc<Activity>);

impl Busy {
    fn new(activity: &Arc<Activity>) -> Self {
        activity.busy.fetch_add(1, Ordering::AcqRel);
        Self(Arc::clone(activity))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let a = &self.0;
        a.idle_since_ms.store(a.now_ms(), Ordering::Release);
        a.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its connection [`Busy`] while hyper sends it.
#[derive(Debug)]
struct Guarded {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for Guarded {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// `GET /metrics`: OpenMetrics when the client asks for it (Prometheus does), else the
/// Prometheus text format 0.0.4 (curl, promtool).
async fn metrics(State(collections): State<Arc<Collections>>, headers: HeaderMap) -> Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let Some(answer) = collections.join() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    };
    let Ok(collected) = answer.await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    };
    match &collected.openmetrics {
        Ok(om) if openmetrics => {
            ([(header::CONTENT_TYPE, CONTENT_TYPE)], om.clone()).into_response()
        }
        Ok(om) => (
            [(header::CONTENT_TYPE, TEXT_CONTENT_TYPE)],
            collected.text(om),
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("error: {e}\n")).into_response(),
    }
}

async fn index() -> &'static str {
    "rdt-exporter: Intel RDT / AMD PQoS metrics at /metrics\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrapes_that_arrive_during_a_collection_get_its_result() {
        // arrange
        let (c, rx) = Collections::new();
        // act: three scrapes before the collecting thread answers
        let a = c.join().unwrap();
        let b = c.join().unwrap();
        let d = c.join().unwrap();
        let asked: Vec<()> = rx.try_iter().collect();
        c.finish(&Collected::new(Ok(
            "# TYPE a counter\na_total 1\n".to_owned()
        )));
        let after = c.join().unwrap();
        // assert
        assert_eq!(asked.len(), 1, "one collection for three scrapes");
        let got: Vec<Arc<Collected>> = [a, b, d]
            .into_iter()
            .map(|mut r| r.try_recv().unwrap())
            .collect();
        assert!(
            got.iter().all(|g| Arc::ptr_eq(g, &got[0])),
            "one collection"
        );
        let om = got[0].openmetrics.as_ref().unwrap();
        assert_eq!(om.as_ref(), b"# TYPE a counter\na_total 1\n");
        let text = got[0].text(om);
        assert_eq!(text.as_ref(), b"# TYPE a_total counter\na_total 1\n");
        assert_eq!(got[1].text(om).as_ptr(), text.as_ptr(), "made once");
        assert_eq!(rx.try_iter().count(), 1, "a later scrape starts a new one");
        drop(after);
        c.close();
        c.finish(&Collected::new(Ok(String::new())));
        assert!(c.join().is_none(), "closed: no new collection");
    }
}
