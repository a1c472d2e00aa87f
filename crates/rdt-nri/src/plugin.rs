//! The plugin's decisions: which class a container belongs to, and the adjustment or update
//! that puts it there. No I/O: [`Plugin::handle`] takes a decoded ttrpc request and answers
//! it; [`crate::serve`] moves the bytes.

use std::collections::BTreeMap;
use std::fmt;

use prost::Message as _;

use crate::api::{
    self, Container, ContainerAdjustment, ContainerRequest, ContainerUpdate,
    CreateContainerResponse, LinuxContainerAdjustment, LinuxContainerUpdate, LinuxRdt,
    LinuxResources, OptionalBool, OptionalString, PodSandbox,
};
use crate::ttrpc::{CODE_FAILED_PRECONDITION, CODE_INVALID_ARGUMENT, CODE_UNIMPLEMENTED, Status};

/// The container annotation of a class (goresctrl `RdtContainerAnnotation`, the CRI-level
/// container annotation).
pub const CONTAINER_ANNOTATION: &str = "io.kubernetes.cri.rdt-class";
/// The pod annotation of every container's class (goresctrl `RdtPodAnnotation`).
pub const POD_ANNOTATION: &str = "rdt.resources.beta.kubernetes.io/pod";
/// The pod annotation of one container's class, before the container's name (goresctrl
/// `RdtPodAnnotationContainerPrefix`).
pub const POD_CONTAINER_ANNOTATION_PREFIX: &str = "rdt.resources.beta.kubernetes.io/container.";
/// The name of the root group's class (goresctrl `RootClassName`); the empty name is its
/// alias. A container of this class gets no `linux.intelRdt`: it stays in the group its
/// runtime runs in, the root.
pub const ROOT_CLASS: &str = "system/default";

/// A pod's Kubernetes QoS class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Qos {
    /// `Guaranteed`: kubelet's cgroup layout puts the pod right under `kubepods`.
    Guaranteed,
    /// `Burstable`: under `kubepods/burstable` (`kubepods-burstable.slice`).
    Burstable,
    /// `BestEffort`: under `kubepods/besteffort` (`kubepods-besteffort.slice`).
    BestEffort,
}

impl fmt::Display for Qos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Guaranteed => "Guaranteed",
            Self::Burstable => "Burstable",
            Self::BestEffort => "BestEffort",
        })
    }
}

impl Qos {
    /// The QoS class of `pod` from its cgroup parent as kubelet lays it out (cgroupfs:
    /// `/kubepods/burstable/pod<uid>`; systemd: `kubepods-burstable-pod<uid>.slice`, the
    /// same words); `None` for a pod outside `kubepods` (not kubelet's, or no Linux part).
    ///
    /// # References
    /// kubelet `pkg/kubelet/cm/qos_container_manager_linux.go` (the QoS cgroups) and
    /// `pod_container_manager_linux.go` (a pod's cgroup under its QoS class's).
    #[must_use]
    pub fn of_pod(pod: &PodSandbox) -> Option<Self> {
        let parent = pod.linux.as_ref().map(|l| l.cgroup_parent.as_str())?;
        let lower = parent.to_ascii_lowercase();
        if !lower.contains("kubepods") {
            return None;
        }
        Some(if lower.contains("besteffort") {
            Self::BestEffort
        } else if lower.contains("burstable") {
            Self::Burstable
        } else {
            Self::Guaranteed
        })
    }
}

/// Where a container's class came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// An annotation, by its key.
    Annotation(String),
    /// The pod's QoS class.
    Qos(Qos),
    /// The default class.
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Annotation(key) => write!(f, "annotation {key}"),
            Self::Qos(q) => write!(f, "QoS class {q}"),
            Self::Default => f.write_str("the default"),
        }
    }
}

/// One class the node offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Class {
    /// The name annotations and the QoS mapping use.
    pub name: String,
    /// The resctrl control group (the `closID` a container joins); `None` for the root
    /// group.
    pub group: Option<String>,
}

/// What to do with a container whose annotation names a class the node does not offer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnUnknown {
    /// Fail the container's creation with a message naming the annotation and the classes.
    #[default]
    Fail,
    /// Place it as if it had no annotation (its QoS class's, else the default), and log.
    Default,
}

/// How the plugin places containers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// The class of each QoS class (a class name of [`Plugin::classes`]).
    pub qos: BTreeMap<Qos, String>,
    /// The class of a container nothing else places; `None`: no adjustment (the root).
    pub default: Option<String>,
    /// A class annotation the node does not know.
    pub on_unknown: OnUnknown,
    /// Each container gets a monitoring group of its own in its class's group (`linux.
    /// intelRdt.enableMonitoring`: runc names it after the container id).
    pub monitoring: bool,
}

/// A configuration the plugin cannot start with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// A QoS mapping or the default names a class the configuration lacks.
    #[error(
        "{what} names class `{class}`, which the configuration does not make; its classes: {known}"
    )]
    UnknownClass {
        /// Which option (`--qos-class burstable=...`, `--default-class`).
        what: String,
        /// The class named.
        class: String,
        /// The classes there are, comma-separated.
        known: String,
    },
}

/// A container the plugin refuses to place.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "container {container} of pod {pod}: RDT class `{class}` of annotation {annotation} is not a class of this node; its classes: {known}"
)]
pub struct Refused {
    /// `namespace/pod`.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// The annotation's key.
    pub annotation: String,
    /// The class it names.
    pub class: String,
    /// The classes there are, comma-separated.
    pub known: String,
}

/// The plugin: the node's classes, how to place containers, and where each one went.
#[derive(Debug)]
pub struct Plugin {
    classes: Vec<Class>,
    options: Options,
    /// Container id to class name, of the containers placed and not removed.
    placed: BTreeMap<String, String>,
    /// Containers of a split synchronization not yet answered.
    sync: (Vec<PodSandbox>, Vec<Container>),
}

impl Plugin {
    /// A plugin over `classes` (the root class is added when missing).
    ///
    /// # Errors
    /// An option names a class `classes` lacks.
    pub fn new(mut classes: Vec<Class>, options: Options) -> Result<Self, OptionsError> {
        if !classes.iter().any(|c| c.name == ROOT_CLASS) {
            classes.push(Class {
                name: ROOT_CLASS.to_owned(),
                group: None,
            });
        }
        let plugin = Self {
            classes,
            options,
            placed: BTreeMap::new(),
            sync: (Vec::new(), Vec::new()),
        };
        let named = plugin
            .options
            .qos
            .iter()
            .map(|(q, c)| (format!("the class of QoS {q}"), c))
            .chain(
                plugin
                    .options
                    .default
                    .iter()
                    .map(|c| ("the default class".to_owned(), c)),
            );
        for (what, class) in named {
            if plugin.class(class).is_none() {
                return Err(OptionsError::UnknownClass {
                    what,
                    class: class.clone(),
                    known: plugin.known(),
                });
            }
        }
        Ok(plugin)
    }

    /// Replaces the classes (a reloaded configuration, made by
    /// [`apply_classes`](crate::apply_classes)); containers placed before keep their
    /// groups.
    ///
    /// # Errors
    /// An option names a class `classes` lacks; the classes stay as they were.
    pub fn set_classes(&mut self, classes: Vec<Class>) -> Result<(), OptionsError> {
        let next = Self::new(classes, self.options.clone())?;
        self.classes = next.classes;
        Ok(())
    }

    /// The classes the node offers.
    #[must_use]
    pub fn classes(&self) -> &[Class] {
        &self.classes
    }

    /// The containers placed and not removed: id to class name.
    #[must_use]
    pub fn placed(&self) -> &BTreeMap<String, String> {
        &self.placed
    }

    /// The class named `name` (`""` is the root's alias).
    #[must_use]
    pub fn class(&self, name: &str) -> Option<&Class> {
        let name = if name.is_empty() { ROOT_CLASS } else { name };
        self.classes.iter().find(|c| c.name == name)
    }

    fn known(&self) -> String {
        let names: Vec<&str> = self.classes.iter().map(|c| c.name.as_str()).collect();
        names.join(", ")
    }

    /// The class of `container` of `pod`, in goresctrl's order: the container's
    /// annotation, the pod's annotation for this container, the pod's annotation; then
    /// the pod's QoS class; then the default. `Ok(None)`: nothing places it.
    ///
    /// # Errors
    /// An annotation names a class the node lacks and [`Options::on_unknown`] is
    /// [`OnUnknown::Fail`].
    ///
    /// # References
    /// goresctrl `pkg/kubernetes/annotations.go` (`ContainerClassFromAnnotations`) and
    /// `pkg/rdt/kubernetes.go` (the keys).
    pub fn decide(
        &self,
        pod: &PodSandbox,
        container: &Container,
    ) -> Result<Option<(&Class, Origin)>, Refused> {
        let per_container = format!("{POD_CONTAINER_ANNOTATION_PREFIX}{}", container.name);
        let annotated = container
            .annotations
            .get(CONTAINER_ANNOTATION)
            .map(|v| (CONTAINER_ANNOTATION, v))
            .or_else(|| {
                pod.annotations
                    .get(&per_container)
                    .map(|v| (per_container.as_str(), v))
            })
            .or_else(|| {
                pod.annotations
                    .get(POD_ANNOTATION)
                    .map(|v| (POD_ANNOTATION, v))
            });
        if let Some((key, value)) = annotated {
            if let Some(class) = self.class(value) {
                return Ok(Some((class, Origin::Annotation(key.to_owned()))));
            }
            let refused = Refused {
                pod: format!("{}/{}", pod.namespace, pod.name),
                container: container.name.clone(),
                annotation: key.to_owned(),
                class: value.clone(),
                known: self.known(),
            };
            if self.options.on_unknown == OnUnknown::Fail {
                return Err(refused);
            }
            log::warn!("{refused}: placed as if it had no annotation");
        }
        if let Some(q) = Qos::of_pod(pod)
            && let Some(class) = self.options.qos.get(&q).and_then(|c| self.class(c))
        {
            return Ok(Some((class, Origin::Qos(q))));
        }
        Ok(self
            .options
            .default
            .as_deref()
            .and_then(|c| self.class(c))
            .map(|c| (c, Origin::Default)))
    }

    /// The `linux.intelRdt` that puts a container in `class`: its group's `closID` (and a
    /// monitoring group of its own when [`Options::monitoring`]); `None` for the root
    /// class, whose containers keep the runtime's group.
    fn rdt_of(&self, class: &Class) -> Option<LinuxRdt> {
        let group = class.group.as_ref()?;
        Some(LinuxRdt {
            clos_id: Some(OptionalString {
                value: group.clone(),
            }),
            schemata: None,
            enable_monitoring: self
                .options
                .monitoring
                .then_some(OptionalBool { value: true }),
            remove: false,
        })
    }

    /// `CreateContainer`: the adjustment that puts the container in its class.
    ///
    /// # Errors
    /// [`Plugin::decide`]'s refusal.
    pub fn create(
        &mut self,
        pod: &PodSandbox,
        container: &Container,
    ) -> Result<CreateContainerResponse, Refused> {
        let decided = self.decide(pod, container)?;
        let Some((class, origin)) = decided else {
            log::info!("container {} ({}): no class", container.id, container.name);
            return Ok(CreateContainerResponse::default());
        };
        log::info!(
            "container {} ({}) of pod {}/{}: class {} by {origin}",
            container.id,
            container.name,
            pod.namespace,
            pod.name,
            class.name
        );
        let adjust = self.rdt_of(class).map(|rdt| ContainerAdjustment {
            linux: Some(LinuxContainerAdjustment { rdt: Some(rdt) }),
        });
        let name = class.name.clone();
        self.placed.insert(container.id.clone(), name);
        Ok(CreateContainerResponse {
            adjust,
            update: Vec::new(),
        })
    }

    /// `Synchronize`: the containers that exist. A container already in its class (its
    /// `linux.intelRdt.closID` is its class's group, or its RDT class is its class) is left
    /// alone; one elsewhere gets an update to its class (NRI's container updates carry the
    /// RDT class, not `linux.intelRdt`: the runtime resolves the class name). A container
    /// whose annotation names an unknown class is skipped with a warning (it runs
    /// already). Nothing is reset: classes are never written here.
    pub fn synchronize(
        &mut self,
        pods: &[PodSandbox],
        containers: &[Container],
    ) -> Vec<ContainerUpdate> {
        let none = PodSandbox::default();
        let mut updates = Vec::new();
        for c in containers {
            let pod = pods
                .iter()
                .find(|p| p.id == c.pod_sandbox_id)
                .unwrap_or(&none);
            let (class, origin) = match self.decide(pod, c) {
                Ok(Some(d)) => d,
                Ok(None) => continue,
                Err(refused) => {
                    log::warn!("{refused}: left where it runs");
                    continue;
                }
            };
            let linux = c.linux.as_ref();
            let clos = linux
                .and_then(|l| l.rdt.as_ref())
                .and_then(|r| r.clos_id.as_ref())
                .map(|s| s.value.as_str());
            let rdt_class = linux
                .and_then(|l| l.resources.as_ref())
                .and_then(|r| r.rdt_class.as_ref())
                .map(|s| s.value.as_str());
            let in_class = match (&class.group, clos) {
                (Some(g), Some(have)) => g == have,
                (None, None) => rdt_class.is_none_or(|r| self.class(r) == Some(class)),
                (None, Some(_)) => false,
                (Some(_), None) => rdt_class == Some(class.name.as_str()),
            };
            let name = class.name.clone();
            if !in_class {
                log::info!(
                    "container {} ({}): moved to class {name} by {origin} (found in {})",
                    c.id,
                    c.name,
                    clos.or(rdt_class).unwrap_or("the root")
                );
                updates.push(ContainerUpdate {
                    container_id: c.id.clone(),
                    linux: Some(LinuxContainerUpdate {
                        resources: Some(LinuxResources {
                            rdt_class: Some(OptionalString {
                                value: name.clone(),
                            }),
                        }),
                    }),
                    ignore_failure: true,
                });
            }
            self.placed.insert(c.id.clone(), name);
        }
        updates
    }

    /// Answers one request of NRI's `Plugin` service: `method` with its encoded request,
    /// the encoded response or the error status the runtime sees.
    ///
    /// # Errors
    /// A status: the request does not decode (`INVALID_ARGUMENT`), a container is refused
    /// (`FAILED_PRECONDITION`, [`Refused`]'s message), a method this plugin does not
    /// implement (`UNIMPLEMENTED`; the runtime calls only the events subscribed).
    pub fn handle(&mut self, method: &str, payload: &[u8]) -> Result<Vec<u8>, Status> {
        fn bad(method: &str, e: &prost::DecodeError) -> Status {
            Status {
                code: CODE_INVALID_ARGUMENT,
                message: format!("{method}: the request does not decode: {e}"),
            }
        }
        match method {
            "Configure" => {
                let req = api::ConfigureRequest::decode(payload).map_err(|e| bad(method, &e))?;
                log::info!(
                    "configured by {} {} (NRI {})",
                    req.runtime_name,
                    req.runtime_version,
                    req.nri_version
                );
                Ok(api::ConfigureResponse {
                    events: api::event_mask(&[
                        api::event::CREATE_CONTAINER,
                        api::event::STOP_CONTAINER,
                        api::event::REMOVE_CONTAINER,
                    ]),
                }
                .encode_to_vec())
            }
            "Synchronize" => {
                let req = api::SynchronizeRequest::decode(payload).map_err(|e| bad(method, &e))?;
                self.sync.0.extend(req.pods);
                self.sync.1.extend(req.containers);
                if req.more {
                    return Ok(api::SynchronizeResponse {
                        update: Vec::new(),
                        more: true,
                    }
                    .encode_to_vec());
                }
                let (pods, containers) = std::mem::take(&mut self.sync);
                let update = self.synchronize(&pods, &containers);
                log::info!(
                    "synchronized {} container(s) of {} pod(s): {} update(s)",
                    containers.len(),
                    pods.len(),
                    update.len()
                );
                Ok(api::SynchronizeResponse {
                    update,
                    more: false,
                }
                .encode_to_vec())
            }
            "CreateContainer" => {
                let req = ContainerRequest::decode(payload).map_err(|e| bad(method, &e))?;
                let (pod, container) = (
                    req.pod.unwrap_or_default(),
                    req.container.unwrap_or_default(),
                );
                self.create(&pod, &container)
                    .map(|r| r.encode_to_vec())
                    .map_err(|refused| Status {
                        code: CODE_FAILED_PRECONDITION,
                        message: refused.to_string(),
                    })
            }
            "StopContainer" => {
                let req = ContainerRequest::decode(payload).map_err(|e| bad(method, &e))?;
                if let Some(c) = req.container {
                    log::info!("container {} ({}) stopped", c.id, c.name);
                }
                Ok(api::StopContainerResponse::default().encode_to_vec())
            }
            "RemoveContainer" => {
                let req = ContainerRequest::decode(payload).map_err(|e| bad(method, &e))?;
                if let Some(c) = req.container {
                    self.placed.remove(&c.id);
                }
                Ok(api::Empty::default().encode_to_vec())
            }
            "StateChange" => {
                let ev = api::StateChangeEvent::decode(payload).map_err(|e| bad(method, &e))?;
                if ev.event == api::event::REMOVE_CONTAINER
                    && let Some(c) = ev.container
                {
                    self.placed.remove(&c.id);
                }
                Ok(api::Empty::default().encode_to_vec())
            }
            "Shutdown" => {
                log::info!("the runtime shuts down");
                Ok(api::Empty::default().encode_to_vec())
            }
            _ => Err(Status {
                code: CODE_UNIMPLEMENTED,
                message: format!("{method}: not implemented by this plugin"),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
