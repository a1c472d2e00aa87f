//! NRI's messages: the subset of `pkg/api/api.proto` (containerd/nri v0.12.5, package
//! `nri.pkg.api.v1alpha1`) the plugin reads or writes, with NRI's field numbers.
//!
//! Written by hand as prost derives rather than generated (prost-build needs `protoc`): each
//! field carries the tag of the same-named field of `api.proto`. Fields this plugin does not
//! use are left out; protobuf skips unknown fields when decoding, so a message from the
//! runtime decodes whatever else it carries, and the fields we send are a subset the runtime
//! decodes as its own. `tests/wire.rs` checks the encoding against bytes made by NRI's Go
//! types.
//!
//! # References
//! - containerd/nri `pkg/api/api.proto` (v0.12.5): the messages and their tags.
//! - Protocol Buffers, "Encoding" (proto3): unknown fields, default values not sent.

use std::collections::BTreeMap;

/// The ttrpc service the plugin serves (`service Plugin`).
pub const PLUGIN_SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";
/// The ttrpc service the runtime serves (`service Runtime`).
pub const RUNTIME_SERVICE: &str = "nri.pkg.api.v1alpha1.Runtime";

/// `enum Event`: the values whose bits make a plugin's event subscription
/// ([`event_mask`]).
pub mod event {
    /// `STOP_POD_SANDBOX`: delivered through `StateChange`, with the pod.
    pub const STOP_POD_SANDBOX: i32 = 2;
    /// `REMOVE_POD_SANDBOX`: delivered through `StateChange`, with the pod.
    pub const REMOVE_POD_SANDBOX: i32 = 3;
    /// `CREATE_CONTAINER`.
    pub const CREATE_CONTAINER: i32 = 4;
    /// `POST_START_CONTAINER`: delivered through `StateChange`, with the started
    /// container (its `pid` set).
    pub const POST_START_CONTAINER: i32 = 7;
    /// `STOP_CONTAINER`.
    pub const STOP_CONTAINER: i32 = 10;
    /// `REMOVE_CONTAINER`.
    pub const REMOVE_CONTAINER: i32 = 11;
}

/// The subscription mask of `events`: bit `e - 1` for event `e` (NRI `pkg/api/event.go`,
/// `EventMask.Set`). Events outside `1..=31` are ignored.
#[must_use]
pub fn event_mask(events: &[i32]) -> i32 {
    events
        .iter()
        .filter(|&&e| (1..=31).contains(&e))
        .fold(0u32, |m, &e| m | (1u32 << (e - 1)))
        .cast_signed()
}

/// `message Empty {}`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Empty {}

/// `message RegisterPluginRequest`: the plugin's first call, on the runtime's service.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct RegisterPluginRequest {
    /// Plugin name (`[a-zA-Z0-9_.+-]+`).
    #[prost(string, tag = "1")]
    pub plugin_name: String,
    /// Invocation index, two digits: plugins are called in ascending index order.
    #[prost(string, tag = "2")]
    pub plugin_idx: String,
    /// The NRI version the plugin was built against, if known.
    #[prost(string, tag = "3")]
    pub nri_version: String,
}

/// `message UpdateContainersRequest` (field 2, evictions, not used).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct UpdateContainersRequest {
    /// Updates to running containers.
    #[prost(message, repeated, tag = "1")]
    pub update: Vec<ContainerUpdate>,
}

/// `message UpdateContainersResponse`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct UpdateContainersResponse {
    /// The updates the runtime could not make.
    #[prost(message, repeated, tag = "1")]
    pub failed: Vec<ContainerUpdate>,
}

/// `message ConfigureRequest`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ConfigureRequest {
    /// The plugin's configuration from the runtime (for a pre-registered plugin).
    #[prost(string, tag = "1")]
    pub config: String,
    /// The runtime's name (`containerd`, `cri-o`, ...).
    #[prost(string, tag = "2")]
    pub runtime_name: String,
    /// The runtime's version.
    #[prost(string, tag = "3")]
    pub runtime_version: String,
    /// The registration timeout, in milliseconds.
    #[prost(int64, tag = "4")]
    pub registration_timeout: i64,
    /// The timeout of every request to the plugin, in milliseconds.
    #[prost(int64, tag = "5")]
    pub request_timeout: i64,
    /// The runtime's NRI version.
    #[prost(string, tag = "6")]
    pub nri_version: String,
}

/// `message ConfigureResponse` (field 3, the failure policy, not used: the runtime's
/// defaults apply).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ConfigureResponse {
    /// The events subscribed to ([`event_mask`]); 0 means all.
    #[prost(int32, tag = "2")]
    pub events: i32,
}

/// `message SynchronizeRequest`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct SynchronizeRequest {
    /// The pods that exist.
    #[prost(message, repeated, tag = "1")]
    pub pods: Vec<PodSandbox>,
    /// The containers that exist.
    #[prost(message, repeated, tag = "2")]
    pub containers: Vec<Container>,
    /// More of the same synchronization follows in further requests (a split sync).
    #[prost(bool, tag = "3")]
    pub more: bool,
}

/// `message SynchronizeResponse`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct SynchronizeResponse {
    /// Updates to existing containers.
    #[prost(message, repeated, tag = "1")]
    pub update: Vec<ContainerUpdate>,
    /// Echoes the request's `more`: this part was collected, not yet answered.
    #[prost(bool, tag = "2")]
    pub more: bool,
}

/// `message CreateContainerRequest`, and the same fields of `StopContainerRequest` and
/// `RemoveContainerRequest`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ContainerRequest {
    /// The container's pod.
    #[prost(message, optional, tag = "1")]
    pub pod: Option<PodSandbox>,
    /// The container.
    #[prost(message, optional, tag = "2")]
    pub container: Option<Container>,
}

/// `message CreateContainerResponse` (field 3, evictions, not used).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct CreateContainerResponse {
    /// The changes to the container being created.
    #[prost(message, optional, tag = "1")]
    pub adjust: Option<ContainerAdjustment>,
    /// Updates to other containers.
    #[prost(message, repeated, tag = "2")]
    pub update: Vec<ContainerUpdate>,
}

/// `message StopContainerResponse`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct StopContainerResponse {
    /// Updates to other containers.
    #[prost(message, repeated, tag = "1")]
    pub update: Vec<ContainerUpdate>,
}

/// `message StateChangeEvent`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct StateChangeEvent {
    /// The event (`enum Event`).
    #[prost(int32, tag = "1")]
    pub event: i32,
    /// The pod.
    #[prost(message, optional, tag = "2")]
    pub pod: Option<PodSandbox>,
    /// The container.
    #[prost(message, optional, tag = "3")]
    pub container: Option<Container>,
}

/// `message PodSandbox` (the fields the plugin reads).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct PodSandbox {
    /// The sandbox id.
    #[prost(string, tag = "1")]
    pub id: String,
    /// The pod's name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// The pod's UID.
    #[prost(string, tag = "3")]
    pub uid: String,
    /// The pod's namespace.
    #[prost(string, tag = "4")]
    pub namespace: String,
    /// The pod's labels.
    #[prost(btree_map = "string, string", tag = "5")]
    pub labels: BTreeMap<String, String>,
    /// The pod's annotations (`rdt.resources.beta.kubernetes.io/pod`, ...).
    #[prost(btree_map = "string, string", tag = "6")]
    pub annotations: BTreeMap<String, String>,
    /// Linux specifics.
    #[prost(message, optional, tag = "8")]
    pub linux: Option<LinuxPodSandbox>,
}

/// `message LinuxPodSandbox` (the fields the plugin reads).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct LinuxPodSandbox {
    /// The pod's cgroup parent: kubelet's layout names the QoS class in it
    /// (`kubepods/burstable/pod<uid>`, `kubepods-besteffort-pod<uid>.slice`).
    #[prost(string, tag = "3")]
    pub cgroup_parent: String,
    /// The sandbox's cgroups path.
    #[prost(string, tag = "4")]
    pub cgroups_path: String,
}

/// `message Container` (the fields the plugin reads).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Container {
    /// The container id.
    #[prost(string, tag = "1")]
    pub id: String,
    /// Its pod's sandbox id.
    #[prost(string, tag = "2")]
    pub pod_sandbox_id: String,
    /// The container's name in its pod.
    #[prost(string, tag = "3")]
    pub name: String,
    /// `enum ContainerState`.
    #[prost(int32, tag = "4")]
    pub state: i32,
    /// The container's labels.
    #[prost(btree_map = "string, string", tag = "5")]
    pub labels: BTreeMap<String, String>,
    /// The container's annotations (`io.kubernetes.cri.rdt-class`, ...).
    #[prost(btree_map = "string, string", tag = "6")]
    pub annotations: BTreeMap<String, String>,
    /// Linux specifics.
    #[prost(message, optional, tag = "11")]
    pub linux: Option<LinuxContainer>,
    /// The container's process (its init, in the host's pid namespace), once it runs; 0
    /// before.
    #[prost(uint32, tag = "12")]
    pub pid: u32,
}

/// `ContainerState.CONTAINER_STOPPED`.
pub const CONTAINER_STOPPED: i32 = 4;

/// `message LinuxContainer` (the fields the plugin reads).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct LinuxContainer {
    /// The container's resources (its RDT class among them).
    #[prost(message, optional, tag = "3")]
    pub resources: Option<LinuxResources>,
    /// The container's cgroups path.
    #[prost(string, tag = "5")]
    pub cgroups_path: String,
    /// The container's `linux.intelRdt`.
    #[prost(message, optional, tag = "12")]
    pub rdt: Option<LinuxRdt>,
}

/// `message LinuxResources` (field 5 only: the RDT class).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct LinuxResources {
    /// The RDT class (goresctrl's class name, which the runtime resolves to its group).
    #[prost(message, optional, tag = "5")]
    pub rdt_class: Option<OptionalString>,
}

/// `message ContainerAdjustment` (field 6 only: Linux specifics).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ContainerAdjustment {
    /// Linux specifics.
    #[prost(message, optional, tag = "6")]
    pub linux: Option<LinuxContainerAdjustment>,
}

/// `message LinuxContainerAdjustment` (field 11 only: `linux.intelRdt`).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct LinuxContainerAdjustment {
    /// The container's `linux.intelRdt`.
    #[prost(message, optional, tag = "11")]
    pub rdt: Option<LinuxRdt>,
}

/// `message ContainerUpdate`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct ContainerUpdate {
    /// The container updated.
    #[prost(string, tag = "1")]
    pub container_id: String,
    /// Linux specifics.
    #[prost(message, optional, tag = "2")]
    pub linux: Option<LinuxContainerUpdate>,
    /// A failure of this update does not fail the request.
    #[prost(bool, tag = "3")]
    pub ignore_failure: bool,
}

/// `message LinuxContainerUpdate`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct LinuxContainerUpdate {
    /// The resources to set.
    #[prost(message, optional, tag = "1")]
    pub resources: Option<LinuxResources>,
}

/// `message LinuxRdt`: OCI's `linux.intelRdt` as NRI carries it.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct LinuxRdt {
    /// `closID`: the resctrl control group the container joins.
    #[prost(message, optional, tag = "1")]
    pub clos_id: Option<OptionalString>,
    /// `schemata` lines (never set by this plugin: the class's group has them).
    #[prost(message, optional, tag = "2")]
    pub schemata: Option<OptionalRepeatedString>,
    /// `enableMonitoring`: a monitoring group of the container's own.
    #[prost(message, optional, tag = "3")]
    pub enable_monitoring: Option<OptionalBool>,
    /// Remove the container's `linux.intelRdt`.
    #[prost(bool, tag = "4")]
    pub remove: bool,
}

/// `message OptionalString`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct OptionalString {
    /// The value.
    #[prost(string, tag = "1")]
    pub value: String,
}

/// `message OptionalRepeatedString`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct OptionalRepeatedString {
    /// The values.
    #[prost(string, repeated, tag = "1")]
    pub value: Vec<String>,
}

/// `message OptionalBool`.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct OptionalBool {
    /// The value.
    #[prost(bool, tag = "1")]
    pub value: bool,
}
