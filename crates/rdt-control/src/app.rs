//! Reading the metric an application reports ([`rdt_config::policy::AppTarget`]): from a
//! file, or from a Prometheus-format endpoint over plain HTTP. Every read is bounded
//! ([`MAX_APP_BYTES`], a timeout) and every failure is an [`AppReadError`] naming its cause.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use rdt_config::policy::{AppSource, AppTarget};
use rdt_host::file::{ReadError, kind_of, read_regular};

/// The most bytes read from a metric file or endpoint (1 MiB).
pub const MAX_APP_BYTES: u64 = 1 << 20;

/// Why an application's metric could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AppReadError {
    /// The file could not be read (missing, not a regular file, too large).
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The endpoint could not be reached or answered badly (timeout, refused, status).
    #[error("http://{authority}{path}: {message}")]
    Http {
        /// `HOST:PORT`.
        authority: String,
        /// The path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The text holds no such metric, or not a number.
    #[error("{source_name}: {message}")]
    Parse {
        /// The file or endpoint.
        source_name: String,
        /// What went wrong.
        message: String,
    },
}

/// Reads `target`'s metric, waiting at most `timeout` for an endpoint.
///
/// # Errors
/// [`AppReadError`], naming the file or endpoint and the cause.
pub fn read_metric(target: &AppTarget, timeout: Duration) -> Result<f64, AppReadError> {
    let (text, name) = match &target.source {
        AppSource::File(path) => {
            let file_error = |message: String| AppReadError::File {
                path: path.display().to_string(),
                message,
            };
            let bytes = read_regular(path, MAX_APP_BYTES, false).map_err(|e| match e {
                ReadError::Open(e) | ReadError::Io(e) => file_error(e.to_string()),
                ReadError::NotRegular(ft) => file_error(format!("{} is not read", kind_of(ft))),
                ReadError::TooLarge { size, .. } => file_error(format!(
                    "{size} bytes or more, more than the {MAX_APP_BYTES} read"
                )),
                other => file_error(other.to_string()),
            })?;
            (
                String::from_utf8(bytes).map_err(|_| file_error("not UTF-8 text".into()))?,
                path.display().to_string(),
            )
        }
        AppSource::Prometheus { authority, path } => (
            http_get(authority, path, timeout)?,
            format!("http://{authority}{path}"),
        ),
    };
    let parse = |message: String| AppReadError::Parse {
        source_name: name.clone(),
        message,
    };
    if let Some(metric) = &target.metric {
        return prometheus_value(&text, metric).map_err(parse);
    }
    let t = text.trim();
    t.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| parse(format!("{:?} is not one number", shorten(t))))
}

fn shorten(s: &str) -> String {
    s.chars().take(40).collect()
}

/// The value of series `metric` (`name` or `name{label="v",...}`: the first series of that
/// name whose labels include the given ones) in Prometheus text format.
///
/// # Errors
/// No such series, or its value is not a finite number.
pub fn prometheus_value(text: &str, metric: &str) -> Result<f64, String> {
    let (want_name, want_labels) = split_series(metric);
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // name, optional {labels}, value, optional timestamp
        let (series, rest) = match line.find('}') {
            Some(i) if line[..i].contains('{') => (&line[..=i], &line[i + 1..]),
            _ => match line.split_once(char::is_whitespace) {
                Some((s, r)) => (s, r),
                None => continue,
            },
        };
        let (name, labels) = split_series(series);
        if name != want_name || !want_labels.iter().all(|l| labels.contains(l)) {
            continue;
        }
        let value = rest.split_whitespace().next().unwrap_or("");
        return match value {
            "+Inf" | "-Inf" | "NaN" => Err(format!("{metric} is {value}")),
            v => v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("{metric}'s value {:?} is not a number", shorten(v))),
        };
    }
    Err(format!("no series {metric}"))
}

/// `name{a="1",b="2"}` as the name and its `a="1"` label pairs.
fn split_series(s: &str) -> (&str, Vec<&str>) {
    match s.split_once('{') {
        Some((name, rest)) => {
            let inner = rest.trim_end_matches('}');
            let labels = inner
                .split(',')
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            (name.trim(), labels)
        }
        None => (s.trim(), Vec::new()),
    }
}

/// `GET path` over HTTP/1.0 from `authority`, the whole exchange within `timeout`, the body
/// of a 200 answer (at most [`MAX_APP_BYTES`]).
fn http_get(authority: &str, path: &str, timeout: Duration) -> Result<String, AppReadError> {
    let err = |message: String| AppReadError::Http {
        authority: authority.to_owned(),
        path: path.to_owned(),
        message,
    };
    let deadline = Instant::now() + timeout;
    let addr = authority
        .to_socket_addrs()
        .map_err(|e| err(format!("cannot resolve: {e}")))?
        .next()
        .ok_or_else(|| err("no address".into()))?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| err(format!("cannot connect: {e}")))?;
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    stream
        .set_write_timeout(Some(left()))
        .and_then(|()| {
            write!(
                stream,
                "GET {path} HTTP/1.0\r\nHost: {authority}\r\nAccept: text/plain\r\n\
                 Connection: close\r\n\r\n"
            )
        })
        .map_err(|e| err(format!("cannot send the request: {e}")))?;
    let mut body = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if Instant::now() >= deadline {
            return Err(err(format!("no whole answer within {timeout:?}")));
        }
        stream
            .set_read_timeout(Some(left()))
            .map_err(|e| err(e.to_string()))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                body.extend_from_slice(&buf[..n]);
                if body.len() as u64 > MAX_APP_BYTES {
                    return Err(err(format!("more than {MAX_APP_BYTES} bytes")));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(err(format!("no whole answer within {timeout:?}")));
            }
            Err(e) => return Err(err(format!("reading the answer: {e}"))),
        }
    }
    let text = String::from_utf8(body).map_err(|_| err("the answer is not UTF-8".into()))?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .or_else(|| text.split_once("\n\n"))
        .ok_or_else(|| err("no HTTP header".into()))?;
    let status = head.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(err(format!("answered {:?}", shorten(status))));
    }
    Ok(body.to_owned())
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // exact decimal values parsed back
mod tests {
    use super::*;
    use rdt_config::policy::AppGoal;
    use std::net::TcpListener;

    const TEXT: &str = "# HELP app_latency_ms p99\n# TYPE app_latency_ms gauge\n\
        app_latency_ms{quantile=\"0.5\"} 1.5\napp_latency_ms{quantile=\"0.99\"} 4.25 1700000000\n\
        app_ops_total 12345\n";

    #[test]
    fn a_series_is_found_by_name_and_labels() {
        assert_eq!(prometheus_value(TEXT, "app_ops_total"), Ok(12345.0));
        assert_eq!(
            prometheus_value(TEXT, "app_latency_ms{quantile=\"0.99\"}"),
            Ok(4.25)
        );
        assert_eq!(prometheus_value(TEXT, "app_latency_ms"), Ok(1.5));
        assert!(
            prometheus_value(TEXT, "nope")
                .unwrap_err()
                .contains("no series nope")
        );
        assert!(prometheus_value("m NaN\n", "m").is_err());
        assert!(
            prometheus_value("m x\n", "m")
                .unwrap_err()
                .contains("not a number")
        );
    }

    fn target(source: AppSource, metric: Option<&str>) -> AppTarget {
        AppTarget {
            goal: AppGoal::Throughput(1.0),
            source,
            metric: metric.map(str::to_owned),
        }
    }

    #[test]
    fn a_file_holds_one_number_or_prometheus_text() {
        let dir = tempfile::tempdir().unwrap();
        let one = dir.path().join("one");
        std::fs::write(&one, "  42.5\n").unwrap();
        let t = target(AppSource::File(one.clone()), None);
        assert_eq!(read_metric(&t, Duration::from_secs(1)).unwrap(), 42.5);
        let prom = dir.path().join("prom");
        std::fs::write(&prom, TEXT).unwrap();
        let t = target(AppSource::File(prom), Some("app_ops_total"));
        assert_eq!(read_metric(&t, Duration::from_secs(1)).unwrap(), 12345.0);
        std::fs::write(&one, "fast").unwrap();
        let t = target(AppSource::File(one), None);
        let e = read_metric(&t, Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"fast\" is not one number"), "{e}");
        let t = target(AppSource::File("/dev/zero".into()), None);
        let e = read_metric(&t, Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/dev/zero"), "{e}");
    }

    #[test]
    fn an_endpoint_is_read_with_a_timeout() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let authority = server.local_addr().unwrap().to_string();
        let serve = std::thread::spawn(move || {
            let (mut s, _) = server.accept().unwrap();
            // the request's head, however many reads it takes
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "the request ended early: {req:?}");
                req.extend_from_slice(&buf[..n]);
            }
            assert!(String::from_utf8_lossy(&req).starts_with("GET /metrics HTTP/1.0"));
            write!(
                s,
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n{TEXT}"
            )
            .unwrap();
            drop(s);
            // a second peer that never answers
            let (_silent, _) = server.accept().unwrap();
            std::thread::sleep(Duration::from_millis(500));
        });
        let t = target(
            AppSource::Prometheus {
                authority: authority.clone(),
                path: "/metrics".into(),
            },
            Some("app_latency_ms{quantile=\"0.99\"}"),
        );
        assert_eq!(read_metric(&t, Duration::from_secs(2)).unwrap(), 4.25);
        let started = Instant::now();
        let e = read_metric(&t, Duration::from_millis(200))
            .unwrap_err()
            .to_string();
        assert!(started.elapsed() < Duration::from_millis(450), "bounded");
        assert!(
            e.contains(&authority) && e.contains("no whole answer"),
            "{e}"
        );
        serve.join().unwrap();
    }
}
