//! An NRI plugin that puts every container of a node in its RDT class.
//!
//! NRI (the Node Resource Interface of containerd ≥ 1.7 and CRI-O ≥ 1.26) lets a plugin on the
//! runtime's socket (`/var/run/nri/nri.sock`) adjust each container as it is created. This
//! crate is such a plugin for RDT:
//! - the node's classes are its configuration (named classes in TOML or goresctrl's YAML),
//!   applied as one transaction when the plugin starts ([`apply_classes`]): a second start
//!   with the same file writes nothing, so a restart never resets a class;
//! - each container's class is decided as goresctrl decides it (the container annotation
//!   `io.kubernetes.cri.rdt-class`, the pod annotations
//!   `rdt.resources.beta.kubernetes.io/container.<name>` and `rdt.resources.beta.kubernetes.io/pod`),
//!   then by the pod's QoS class, then the default ([`Plugin::decide`]);
//! - a new container's adjustment sets its `linux.intelRdt.closID` to its class's group, so
//!   runc or crun joins it to the existing group and never writes a `schemata`;
//! - on connecting, the containers that exist are synchronized: those in their class are left
//!   alone, the others are updated to it ([`Plugin::synchronize`]);
//! - an annotation naming a class the node lacks fails the container's creation with a
//!   message naming the annotation and the classes there are ([`OnUnknown`]).
//!
//! The protocol is NRI's: ttrpc over a socket multiplexed into two logical connections
//! ([`ttrpc`] says how, and why the framing is written here rather than taken from the
//! `ttrpc` crate); the messages are the subset of NRI's `api.proto` the plugin uses,
//! prost derives with NRI's field numbers ([`api`]). [`serve`] runs one connection.
//!
//! # References
//! - containerd/nri v0.12.5: `pkg/api/api.proto`, `pkg/stub/stub.go` (the plugin's side),
//!   `pkg/adaptation/plugin.go` (the runtime's side), `pkg/net/multiplex/mux.go`.
//! - containerd/ttrpc v1.2.7: `channel.go`, `request.proto`, `PROTOCOL.md`.
//! - goresctrl v0.14.0: `pkg/rdt/kubernetes.go`, `pkg/kubernetes/annotations.go`.

pub mod api;
mod lifecycle;
mod plugin;
pub mod ready;
mod repair;
mod shown;
pub mod ttrpc;

pub use lifecycle::{Backoff, Lifecycle, State};
pub use repair::{
    CGROUP_ROOT, MAX_RECHECKS_PER_TICK, MonGroups, NodeSession, PlaceError, Placer,
    RECORD_INTERVAL, Reload, ResctrlPlacer, cgroup_dir_of, container_tasks,
};
pub use shown::{Logged, MAX_SHOWN, shown};

use std::io::BufReader;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use prost::Message as _;
use rdt_pqos::Backend;
use rdt_pqos::config::{ConfigError, ConfigFile, ConfigPlanError, goresctrl::GroupOptions};
use rdt_pqos::proc::ProcFs;
use rdt_pqos::transaction::{self, ApplyPlan};

pub use plugin::{
    CONTAINER_ANNOTATION, Class, MAX_SYNC_BYTES, MAX_SYNC_CONTAINERS, MAX_SYNC_PODS, MonPlace,
    MonWork, OnUnknown, Options, OptionsError, Origin, POD_ANNOTATION,
    POD_CONTAINER_ANNOTATION_PREFIX, Plugin, Qos, ROOT_CLASS, Refused, Repair, Rule,
    is_qualified_class_name,
};

/// The default socket of the runtime's NRI side.
pub const DEFAULT_SOCKET: &str = "/var/run/nri/nri.sock";

/// A failure of the plugin's connection to the runtime.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NriError {
    /// Reading or writing the socket failed.
    #[error("failed to {op}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The byte stream is not NRI's frames.
    #[error("malformed NRI stream: {0}")]
    Frame(String),
    /// A message to send is longer than ttrpc allows.
    #[error("a ttrpc message of {length} bytes is longer than ttrpc's 4 MiB")]
    TooLarge {
        /// Its length, in bytes.
        length: usize,
    },
    /// A message from the runtime does not decode.
    #[error("the runtime's {what} does not decode")]
    Decode {
        /// Which message.
        what: &'static str,
        /// The cause.
        #[source]
        source: prost::DecodeError,
    },
    /// The runtime refused the registration.
    #[error("the runtime refused the plugin's registration (code {code}): {message}")]
    Registration {
        /// The gRPC status code.
        code: i32,
        /// The runtime's message.
        message: String,
    },
}

/// A failure to make the node's classes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClassesError {
    /// The configuration does not fit the platform (nothing was written).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Reading or writing the platform failed (what was written is undone).
    #[error("{op}")]
    Platform {
        /// What was being done.
        op: &'static str,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The node's classes, made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The classes, in the file's order.
    pub classes: Vec<Class>,
    /// The writes the transaction made (0 when the platform already had them).
    pub writes: usize,
}

/// The classes `file` names: a TOML class's group is its name; a goresctrl class's is its
/// name after `groups.prefix`, and its root class (`system/default`) is the root group.
#[must_use]
pub fn classes_of(file: &ConfigFile, groups: &GroupOptions) -> Vec<Class> {
    match file {
        ConfigFile::Classes(c) => c
            .classes
            .iter()
            .map(|c| Class::new(c.name.clone(), Some(c.name.clone())))
            .collect(),
        ConfigFile::Goresctrl(g) => g
            .partitions
            .iter()
            .flat_map(|p| &p.classes)
            .map(|c| Class {
                name: if c.is_root() {
                    ROOT_CLASS.to_owned()
                } else {
                    c.name.clone()
                },
                group: (!c.is_root()).then(|| groups.group_name(&c.name)),
                deny_pod_annotation: c.deny_pod_annotation,
                deny_container_annotation: c.deny_container_annotation,
            })
            .collect(),
    }
}

/// Makes the classes of `file` on `backend` as one transaction, holding the writers' lock
/// from reading the state to the last write (as `pqos --apply` does): the classes already
/// as the file says are not written again.
///
/// # Errors
/// The file does not fit the platform (nothing written), the lock cannot be taken, a
/// write fails (the writes before it undone), the change cannot be kept.
pub fn apply_classes<B: Backend>(
    backend: &mut B,
    file: &ConfigFile,
    groups: &GroupOptions,
    proc: &ProcFs,
) -> Result<Applied, ClassesError> {
    fn platform<E: std::error::Error + Send + Sync + 'static>(
        op: &'static str,
    ) -> impl FnOnce(E) -> ClassesError {
        move |e| ClassesError::Platform {
            op,
            source: Box::new(e),
        }
    }
    let writes = transaction::with_writers(backend, |backend| {
        let planned = file.plan_with(backend, proc, groups).map_err(|e| match e {
            ConfigPlanError::Config(e) => ClassesError::Config(e),
            ConfigPlanError::Backend(e) => platform("reading the platform")(e),
        })?;
        // a class without CPUs or tasks is what the plugin makes: containers will run in it
        for w in planned
            .warnings
            .iter()
            .filter(|w| !w.ends_with(rdt_pqos::config::NOTHING_RUNS))
        {
            log::warn!("{w}");
        }
        for line in planned.lines() {
            log::info!("{line}");
        }
        let done = planned
            .plan
            .apply(backend)
            .into_result()
            .map_err(platform("applying the classes"))?;
        backend.commit().map_err(platform("keeping the classes"))?;
        Ok::<_, ClassesError>(done.len())
    })
    .map_err(platform("taking the writers' lock"))??;
    Ok(Applied {
        classes: classes_of(file, groups),
        writes,
    })
}

/// `name=group` of each class (`(root)` for the root group), space-separated, as the
/// plugin logs them.
#[must_use]
pub fn class_list(classes: &[Class]) -> String {
    let names: Vec<String> = classes
        .iter()
        .map(|c| format!("{}={}", c.name, c.group.as_deref().unwrap_or("(root)")))
        .collect();
    names.join(" ")
}

/// How the plugin registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// The plugin's name (`[a-zA-Z0-9_.+-]+`).
    pub name: String,
    /// Its index, two digits: plugins are called in ascending index order.
    pub index: String,
}

impl Default for Registration {
    fn default() -> Self {
        Self {
            name: "rdt".to_owned(),
            index: "10".to_owned(),
        }
    }
}

/// The NRI version this plugin's messages follow (sent on registration).
pub const NRI_VERSION: &str = "v0.12.5";

/// The stream of the plugin's registration on the runtime's connection: a client's first
/// (ttrpc numbers a client's streams 1, 3, 5, ...).
const REGISTRATION_STREAM: u32 = 1;

/// What a connection to the runtime does besides moving bytes: the hooks
/// [`serve_session`] calls.
pub trait Session {
    /// Answers one request of NRI's `Plugin` service: the method, its encoded request; the
    /// encoded response or the status the runtime sees ([`Plugin::handle`]).
    ///
    /// # Errors
    /// The status the runtime gets.
    fn handle(&mut self, method: &str, payload: &[u8]) -> Result<Vec<u8>, ttrpc::Status>;
    /// A new connection: what a previous one left half-done is dropped.
    fn connected(&mut self) {}
    /// The runtime accepted the registration.
    fn registered(&mut self) {}
    /// After each answer, whenever the socket is idle for the tick, and between
    /// connections at each back-off step: deferred and periodic work.
    fn tick(&mut self) {}
    /// The plugin's state changed ([`Lifecycle::run`]; called again with the same state
    /// at times).
    fn state_changed(&mut self, state: State) {
        let _ = state;
    }
}

/// A closure is a session that only answers.
impl<F: FnMut(&str, &[u8]) -> Result<Vec<u8>, ttrpc::Status>> Session for F {
    fn handle(&mut self, method: &str, payload: &[u8]) -> Result<Vec<u8>, ttrpc::Status> {
        self(method, payload)
    }
}

/// How a connection ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The runtime closed it.
    Closed,
    /// The stop flag was set.
    Stopped,
}

/// Runs one connection to the runtime: registers, then answers the runtime's requests with
/// `handle` (method, encoded request: [`Plugin::handle`]) until the runtime closes the
/// connection (`Ok`).
///
/// # Errors
/// The socket fails, the stream is not NRI's, the runtime refuses the registration.
pub fn serve(
    stream: UnixStream,
    registration: &Registration,
    mut handle: impl FnMut(&str, &[u8]) -> Result<Vec<u8>, ttrpc::Status>,
) -> Result<(), NriError> {
    let never = AtomicBool::new(false);
    serve_session(stream, registration, &never, Duration::ZERO, &mut handle).map(|_| ())
}

/// The frames of the answer to the request `payload` of the runtime's stream `stream` on
/// the plugin's connection: `session`'s answer, or its status; an answer longer than
/// ttrpc's 4 MiB replaced by a `RESOURCE_EXHAUSTED` status.
fn answer(stream: u32, payload: &[u8], session: &mut dyn Session) -> Result<Vec<u8>, NriError> {
    use ttrpc::{PLUGIN_CONN, Request, Response, Status, TYPE_RESPONSE, encode};
    let answer = match Request::decode(payload) {
        Ok(req) if req.service == api::PLUGIN_SERVICE => session.handle(&req.method, &req.payload),
        Ok(req) => Err(Status {
            code: ttrpc::CODE_UNIMPLEMENTED,
            message: format!("service {} is not served here", shown(&req.service)),
        }),
        Err(e) => Err(Status {
            code: ttrpc::CODE_INVALID_ARGUMENT,
            message: format!("the ttrpc request does not decode: {e}"),
        }),
    };
    let response = |answer: Result<Vec<u8>, Status>| {
        match answer {
            Ok(payload) => Response {
                status: None,
                payload,
            },
            Err(status) => Response {
                status: Some(status),
                payload: Vec::new(),
            },
        }
        .encode_to_vec()
    };
    match encode(PLUGIN_CONN, stream, TYPE_RESPONSE, &response(answer)) {
        Err(NriError::TooLarge { length }) => {
            let message = format!(
                "the plugin's answer is {length} bytes, more than ttrpc's {} (not sent)",
                ttrpc::TTRPC_MAX
            );
            log::warn!("stream {stream}: {message}");
            let refused = Status {
                code: ttrpc::CODE_RESOURCE_EXHAUSTED,
                message,
            };
            encode(PLUGIN_CONN, stream, TYPE_RESPONSE, &response(Err(refused)))
        }
        other => other,
    }
}

/// The longest a write to the runtime may block, per `write(2)` (`SO_SNDTIMEO`): a
/// runtime that stops reading ends the connection, not the plugin's progress.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// [`serve`] with the hooks of `session`, until the runtime closes the connection or
/// `stop` is set (checked at least every `tick`; `Duration::ZERO`: reads block, `stop` is
/// checked between messages only). A response longer than ttrpc's 4 MiB is not sent: the
/// runtime gets a `RESOURCE_EXHAUSTED` status for that request instead, and the
/// connection goes on. An error status answering anything but the registration is logged,
/// not taken for a refused registration.
///
/// # Errors
/// The socket fails, the stream is not NRI's, the runtime refuses the registration
/// ([`NriError::Registration`]).
pub fn serve_session(
    stream: UnixStream,
    registration: &Registration,
    stop: &AtomicBool,
    tick: Duration,
    session: &mut dyn Session,
) -> Result<Ended, NriError> {
    use ttrpc::{
        Next, PLUGIN_CONN, RUNTIME_CONN, Request, Response, TYPE_REQUEST, TYPE_RESPONSE, encode,
        send,
    };
    let io = |op: &'static str| move |source| NriError::Io { op, source };
    if !tick.is_zero() {
        stream
            .set_read_timeout(Some(tick))
            .map_err(io("set the NRI socket's read timeout"))?;
    }
    stream
        .set_write_timeout(Some(WRITE_TIMEOUT))
        .map_err(io("set the NRI socket's write timeout"))?;
    let mut writer = stream.try_clone().map_err(io("duplicate the NRI socket"))?;
    let mut reader = ttrpc::Reader::new(BufReader::with_capacity(64 << 10, stream));
    session.connected();
    let register = Request {
        service: api::RUNTIME_SERVICE.to_owned(),
        method: "RegisterPlugin".to_owned(),
        payload: api::RegisterPluginRequest {
            plugin_name: registration.name.clone(),
            plugin_idx: registration.index.clone(),
            nri_version: NRI_VERSION.to_owned(),
        }
        .encode_to_vec(),
        timeout_nano: 0,
    };
    send(
        &mut writer,
        &encode(
            RUNTIME_CONN,
            REGISTRATION_STREAM,
            TYPE_REQUEST,
            &register.encode_to_vec(),
        )?,
    )?;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(Ended::Stopped);
        }
        let m = match reader.poll()? {
            Next::End => return Ok(Ended::Closed),
            Next::Idle => {
                session.tick();
                continue;
            }
            Next::Message(m) => m,
        };
        match (m.conn, m.kind) {
            (RUNTIME_CONN, TYPE_RESPONSE) => {
                let r = Response::decode(&m.payload[..]).map_err(|source| NriError::Decode {
                    what: "response",
                    source,
                })?;
                let failed = r.status.filter(|s| s.code != 0);
                match (m.stream, failed) {
                    (REGISTRATION_STREAM, Some(s)) => {
                        return Err(NriError::Registration {
                            code: s.code,
                            message: shown(&s.message).to_string(),
                        });
                    }
                    (REGISTRATION_STREAM, None) => {
                        log::info!(
                            "registered as {}-{}",
                            shown(&registration.index),
                            shown(&registration.name)
                        );
                        session.registered();
                    }
                    (stream, Some(s)) => log::warn!(
                        "the runtime answered stream {stream} with an error (code {}): {}",
                        s.code,
                        shown(&s.message)
                    ),
                    (stream, None) => {
                        log::debug!("ignored a response on stream {stream} of the runtime");
                    }
                }
            }
            (PLUGIN_CONN, TYPE_REQUEST) => {
                send(&mut writer, &answer(m.stream, &m.payload, session)?)?;
                session.tick();
            }
            _ => log::debug!(
                "ignored a ttrpc message of type {} on connection {}",
                m.kind,
                m.conn
            ),
        }
    }
}
