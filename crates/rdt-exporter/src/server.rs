//! HTTP: `GET /metrics` answers with the text of a fresh scrape (OpenMetrics when asked
//! for, as Prometheus does; the Prometheus text format 0.0.4 otherwise); SIGTERM and
//! SIGINT stop the server gracefully (requests in flight finish).
//!
//! The server is axum on a current-thread tokio runtime, on a thread of its own. Why axum:
//! it is maintained by the tokio project on top of hyper, the HTTP implementation most of
//! the Rust ecosystem runs in production (correct HTTP/1.1 parsing, keep-alive, limits,
//! graceful shutdown), so the exporter inherits its fixes; a "tiny" server crate
//! (tiny_http, a hand-written loop over `TcpListener`) would save compile time but leave
//! HTTP edge cases and their security fixes to a smaller project or to us. One runtime
//! thread is plenty: a scrape is a few hundred positioned reads, done on the main thread.
//!
//! The scrapes themselves run on the thread that owns the platform (the main thread): the
//! handler sends a reply channel there and awaits the text. The monitoring guard of the
//! exporter's own groups thus lives in one plain scope and is released when that scope
//! ends, after the server has stopped.

use std::io;
use std::net::TcpListener;
use std::sync::mpsc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::oneshot;

use crate::metrics::{CONTENT_TYPE, TEXT_CONTENT_TYPE, to_prometheus_text};

/// A scrape request: where to send the text (or the error message).
pub type ScrapeRequest = oneshot::Sender<Result<String, String>>;

/// Serves on `listener` until SIGTERM or SIGINT, sending each scrape to `scrapes`.
///
/// # Errors
/// The runtime or the signal handlers cannot be set up; the listener fails.
pub fn serve(listener: TcpListener, scrapes: mpsc::Sender<ScrapeRequest>) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    rt.block_on(async move {
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let app = Router::new()
            .route("/metrics", get(metrics))
            .route("/", get(index))
            .with_state(scrapes);
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            })
            .await
    })
}

/// `GET /metrics`: OpenMetrics when the client asks for it (Prometheus does), else the
/// Prometheus text format 0.0.4 (curl, promtool).
async fn metrics(
    State(scrapes): State<mpsc::Sender<ScrapeRequest>>,
    headers: HeaderMap,
) -> Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let (reply, answer) = oneshot::channel();
    if scrapes.send(reply).is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    }
    match answer.await {
        Ok(Ok(text)) if openmetrics => {
            ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response()
        }
        Ok(Ok(text)) => (
            [(header::CONTENT_TYPE, TEXT_CONTENT_TYPE)],
            to_prometheus_text(&text),
        )
            .into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, format!("error: {e}\n")).into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response(),
    }
}

async fn index() -> &'static str {
    "rdt-exporter: Intel RDT / AMD PQoS metrics at /metrics\n"
}
