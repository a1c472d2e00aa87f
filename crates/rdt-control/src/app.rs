//! Reading the metric an application reports ([`rdt_config::policy::AppTarget`]): from a
//! file, from a Prometheus-format endpoint over plain HTTP, or from a command's standard
//! output. Every read is bounded ([`MAX_APP_BYTES`], a timeout) and every failure is an
//! [`AppReadError`] naming its cause.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rdt_config::policy::{AppSource, AppTarget};
use rdt_host::file::{ReadError, kind_of, read_regular};

use crate::stop::{STOP_POLL, Stopper};

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
    /// The command could not be started, did not end in time (it is killed, with its
    /// process group), wrote too much, or ended with a status other than 0.
    #[error("command {command}: {message}")]
    Command {
        /// The command as the policy gives it (`["/prog", "arg"]`, or `sh -c "script"`).
        command: String,
        /// What went wrong (with the first line of its standard error, if any).
        message: String,
    },
    /// A stop was asked ([`Stopper::stop`]) before the metric came (a command is killed).
    #[error("{source_name}: stopped before it answered")]
    Stopped {
        /// The file, endpoint or command.
        source_name: String,
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
    read_metric_until(target, timeout, &Stopper::new())
}

/// [`read_metric`], giving up ([`AppReadError::Stopped`]) within [`STOP_POLL`] (an endpoint:
/// 5 of them) of `stopper` being stopped.
///
/// # Errors
/// [`AppReadError`], naming the file, endpoint or command and the cause.
pub fn read_metric_until(
    target: &AppTarget,
    timeout: Duration,
    stopper: &Stopper,
) -> Result<f64, AppReadError> {
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
            http_get(authority, path, timeout, stopper)?,
            format!("http://{authority}{path}"),
        ),
        AppSource::Command { argv, shell } => {
            let name = command_name(argv, *shell);
            (run_command(argv, *shell, timeout, &name, stopper)?, name)
        }
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

/// The most bytes of a command's standard error kept for its error message.
const MAX_STDERR_BYTES: u64 = 4096;

/// The command as errors name it.
fn command_name(argv: &[String], shell: bool) -> String {
    if shell {
        format!("sh -c {:?}", argv.first().map_or("", |s| s.as_str()))
    } else {
        format!("{argv:?}")
    }
}

/// Runs the command (`argv`, or `/bin/sh -c argv[0]` with `shell`) with an empty standard
/// input, in a process group of its own, and returns its standard output (at most
/// [`MAX_APP_BYTES`], UTF-8) once it ended with status 0. When `timeout` passes first, or
/// its output grows past the bound, its process group is killed (SIGKILL) and reaped.
fn run_command(
    argv: &[String],
    shell: bool,
    timeout: Duration,
    name: &str,
    stopper: &Stopper,
) -> Result<String, AppReadError> {
    let err = |message: String| AppReadError::Command {
        command: name.to_owned(),
        message,
    };
    let deadline = Instant::now() + timeout;
    let mut child = spawn_command(argv, shell).map_err(&err)?;
    let rx = match read_pipes(&mut child) {
        Ok(rx) => rx,
        Err(e) => {
            kill_group(&mut child);
            return Err(err(format!("cannot read its output: {e}")));
        }
    };
    let mut stdout = None;
    let mut stderr = Vec::new();
    let mut stderr_done = false;
    let status = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            kill_group(&mut child);
            return Err(err(format!("no answer within {timeout:?}: killed")));
        }
        if stopper.is_stopped() {
            kill_group(&mut child);
            return Err(AppReadError::Stopped {
                source_name: name.to_owned(),
            });
        }
        match rx.recv_timeout(left.min(STOP_POLL)) {
            Ok((0, Ok(out))) => {
                if out.len() as u64 > MAX_APP_BYTES {
                    kill_group(&mut child);
                    return Err(err(format!(
                        "more than {MAX_APP_BYTES} bytes of output: killed"
                    )));
                }
                stdout = Some(out);
            }
            Ok((_, Ok(out))) => {
                stderr = out;
                stderr_done = true;
            }
            Ok((_, Err(e))) => {
                kill_group(&mut child);
                return Err(err(format!("reading its output: {e}")));
            }
            Err(_) => {}
        }
        if stdout.is_some() {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) => {}
                Err(e) => {
                    kill_group(&mut child);
                    return Err(err(format!("waiting for it: {e}")));
                }
            }
        }
    };
    if !stderr_done {
        stderr = drain_stderr(&rx, deadline);
    }
    let first_err = String::from_utf8_lossy(&stderr)
        .lines()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(" ({})", shorten(l.trim())))
        .unwrap_or_default();
    if !status.success() {
        let how = status.code().map_or_else(
            || format!("killed by signal {}", status.signal().unwrap_or(0)),
            |c| format!("exited with status {c}"),
        );
        return Err(err(format!("{how}{first_err}")));
    }
    String::from_utf8(stdout.unwrap_or_default())
        .map_err(|_| err(format!("its output is not UTF-8 text{first_err}")))
}

/// The reader of a command's standard output (0) or error (1): what it read, or why not.
type PipeRead = (u8, std::io::Result<Vec<u8>>);

/// A command's output pipe, taken from its child.
type Pipe = Option<Box<dyn Read + Send>>;

/// Starts the command (`argv`, or `/bin/sh -c argv[0]` with `shell`): an empty standard
/// input, its output piped, in a process group of its own.
fn spawn_command(argv: &[String], shell: bool) -> Result<std::process::Child, String> {
    let mut cmd = if shell {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").args(argv.first());
        c
    } else {
        let Some((program, rest)) = argv.split_first() else {
            return Err("no program".into());
        };
        let mut c = Command::new(program);
        c.args(rest);
        c
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))
}

/// Reads the command's standard output (to [`MAX_APP_BYTES`] + 1) and error (to
/// [`MAX_STDERR_BYTES`]), each by a thread of its own (a command that fills one pipe while
/// we wait on the other must not block); what they read comes on the channel.
fn read_pipes(child: &mut std::process::Child) -> std::io::Result<mpsc::Receiver<PipeRead>> {
    let (tx, rx) = mpsc::channel();
    let pipes: [(u8, Pipe, u64); 2] = [
        (
            0,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            MAX_APP_BYTES + 1,
        ),
        (
            1,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            MAX_STDERR_BYTES,
        ),
    ];
    for (which, pipe, bound) in pipes {
        let tx = tx.clone();
        std::thread::Builder::new()
            .name("app-command".into())
            .spawn(move || {
                let mut out = Vec::new();
                let read = pipe.map_or(Ok(0), |p| p.take(bound).read_to_end(&mut out));
                let _ = tx.send((which, read.map(|_| out)));
            })?;
    }
    Ok(rx)
}

/// The command's standard error from its reader `rx`, waiting until `deadline` at most.
fn drain_stderr(rx: &mpsc::Receiver<PipeRead>, deadline: Instant) -> Vec<u8> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((0, _)) => {}
            Ok((_, Ok(out))) => return out,
            Ok((_, Err(_))) | Err(_) => return Vec::new(),
        }
    }
}

/// Kills the command's process group (it leads it) and reaps the command.
fn kill_group(child: &mut std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `GET path` over HTTP/1.0 from `authority`, the whole exchange within `timeout`, the body
/// of a 200 answer (at most [`MAX_APP_BYTES`]).
fn http_get(
    authority: &str,
    path: &str,
    timeout: Duration,
    stopper: &Stopper,
) -> Result<String, AppReadError> {
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
        if stopper.is_stopped() {
            return Err(AppReadError::Stopped {
                source_name: format!("http://{authority}{path}"),
            });
        }
        stream
            .set_read_timeout(Some(left().min(STOP_POLL * 5)))
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
            // the deadline and the stop are looked at above
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
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

    fn command(argv: &[&str], shell: bool, metric: Option<&str>) -> AppTarget {
        target(
            AppSource::Command {
                argv: argv.iter().map(|s| (*s).to_owned()).collect(),
                shell,
            },
            metric,
        )
    }

    #[test]
    fn a_command_prints_one_number_or_prometheus_text() {
        let t = command(&["/bin/echo", " 42.5"], false, None);
        assert_eq!(read_metric(&t, Duration::from_secs(5)).unwrap(), 42.5);
        // no shell unless asked: the metacharacters are the argument's
        let t = command(&["/bin/echo", "1;", "exit", "3"], false, None);
        let e = read_metric(&t, Duration::from_secs(5))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"1; exit 3\" is not one number"), "{e}");
        let t = command(
            &["printf 'app_ops_total 7\\napp_p99 2.5\\n' | grep p99"],
            true,
            Some("app_p99"),
        );
        assert_eq!(read_metric(&t, Duration::from_secs(5)).unwrap(), 2.5);
    }

    #[test]
    fn a_failing_command_is_named_with_its_status_and_stderr() {
        let t = command(
            &["/bin/sh", "-c", "echo 1; echo boom >&2; exit 3"],
            false,
            None,
        );
        let e = read_metric(&t, Duration::from_secs(5))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"/bin/sh\"") && e.contains("exited with status 3 (boom)"),
            "{e}"
        );
        let t = command(&["/nonexistent/app-stats"], false, None);
        let e = read_metric(&t, Duration::from_secs(5))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/nonexistent/app-stats") && e.contains("cannot start"),
            "{e}"
        );
    }

    #[test]
    fn a_command_is_bounded_in_time_and_output() {
        // a command that hangs, with a child of its own holding its output open: both are
        // killed when the time is up
        let t = command(&["sleep 30 & sleep 30"], true, None);
        let started = Instant::now();
        let e = read_metric(&t, Duration::from_millis(200))
            .unwrap_err()
            .to_string();
        assert!(started.elapsed() < Duration::from_secs(2), "bounded");
        assert!(e.contains("no answer within 200ms: killed"), "{e}");
        // one that would answer late, stopped from another thread
        let stopper = Stopper::new();
        let other = stopper.clone();
        let stop = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            other.stop();
        });
        let t = command(&["/bin/sleep", "30"], false, None);
        let started = Instant::now();
        let e = read_metric_until(&t, Duration::from_secs(30), &stopper).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "stopped early");
        assert!(matches!(e, AppReadError::Stopped { .. }), "{e}");
        stop.join().unwrap();
        // one that writes without end
        let t = command(&["/usr/bin/yes"], false, None);
        let e = read_metric(&t, Duration::from_secs(20))
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than 1048576 bytes"), "{e}");
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
