//! The plugin's decisions: which class a container belongs to, and the adjustment or repair
//! that puts it there. No I/O: [`Plugin::handle`] takes a decoded ttrpc request and answers
//! it; [`crate::serve`] moves the bytes, [`crate::Placer`] makes the repairs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use prost::Message as _;
use rdt_pqos::pods::{ContainerRecord, MAX_POD_LABELS, PodRecord, is_pod_uid};

use crate::api::{
    self, Container, ContainerAdjustment, ContainerRequest, CreateContainerResponse,
    LinuxContainerAdjustment, LinuxRdt, OptionalString, PodSandbox,
};
use crate::shown;
use crate::ttrpc::{
    CODE_FAILED_PRECONDITION, CODE_INVALID_ARGUMENT, CODE_RESOURCE_EXHAUSTED, CODE_UNIMPLEMENTED,
    Status,
};

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
/// One class the node offers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Class {
    /// The name annotations and the QoS mapping use.
    pub name: String,
    /// The resctrl control group (the `closID` a container joins); `None` for the root
    /// group.
    pub group: Option<String>,
    /// goresctrl's `kubernetes.denyPodAnnotation`: the pod annotations
    /// (`rdt.resources.beta.kubernetes.io/pod`, `.../container.<name>`) may not name it.
    pub deny_pod_annotation: bool,
    /// goresctrl's `kubernetes.denyContainerAnnotation`: the container annotation
    /// (`io.kubernetes.cri.rdt-class`) may not name it.
    pub deny_container_annotation: bool,
}

impl Class {
    /// Class `name` in `group`, every annotation allowed.
    #[must_use]
    pub fn new(name: impl Into<String>, group: Option<String>) -> Self {
        Self {
            name: name.into(),
            group,
            ..Self::default()
        }
    }
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
    /// Each pod gets a monitor group of its own in its class's group,
    /// `<group>/mon_groups/<pod-uid>`, made by the plugin, which puts the pod's container
    /// tasks in it when they start and removes it with the pod's last container (one per
    /// pod, not per container: RMIDs are few, 100-odd per L3 domain on many parts, and a
    /// node runs up to 110 pods of several containers). A pod whose UID is not a UUID gets
    /// none ([`rdt_pqos::pods::is_pod_uid`]).
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

/// The rule an annotation broke ([`Refused`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// It names no class of the node.
    UnknownClass {
        /// The classes there are, comma-separated.
        known: String,
    },
    /// Its value cannot be a class name (goresctrl `IsQualifiedClassName`: `/` or a
    /// newline, `.`, `..`, 4096 bytes or more; the root's name aside).
    Unqualified,
    /// The class denies the annotation's kind (goresctrl `denyPodAnnotation`,
    /// `denyContainerAnnotation`).
    Denied {
        /// A pod annotation (else the container annotation).
        pod: bool,
    },
}

/// A container the plugin refuses to place: its annotation breaks a [`Rule`]. Every
/// runtime-supplied string is shown through [`crate::shown`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// `namespace/pod`.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// The annotation's key.
    pub annotation: String,
    /// The class it names.
    pub class: String,
    /// The rule broken.
    pub rule: Rule,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (pod, container, annotation, class) = (
            shown(&self.pod),
            shown(&self.container),
            shown(&self.annotation),
            shown(&self.class),
        );
        write!(
            f,
            "container {container} of pod {pod}: RDT class `{class}` of annotation {annotation} "
        )?;
        match &self.rule {
            Rule::UnknownClass { known } => {
                write!(f, "is not a class of this node; its classes: {known}")
            }
            Rule::Unqualified => f.write_str(
                "is not a class name (goresctrl: no `/` or newline, not `.` or `..`, under 4096 bytes)",
            ),
            Rule::Denied { pod: true } => f.write_str(
                "is not allowed from pod annotations (the class sets denyPodAnnotation)",
            ),
            Rule::Denied { pod: false } => f.write_str(
                "is not allowed from the container annotation (the class sets denyContainerAnnotation)",
            ),
        }
    }
}

impl std::error::Error for Refused {}

/// Whether `name` can be a goresctrl class name (goresctrl `IsQualifiedClassName`: the
/// root's name, or a file name: under 4096 bytes, not `.` or `..`, no `/` or newline).
#[must_use]
pub fn is_qualified_class_name(name: &str) -> bool {
    name == ROOT_CLASS
        || (name.len() < 4096 && name != "." && name != ".." && !name.contains(['/', '\n']))
}

/// A container the plugin puts in its class itself: one the runtime created while the
/// plugin was away, or whose class changed. Its tasks are the processes of its cgroup
/// (found from `pid` or `cgroups_path`), written into `group` ([`crate::Placer`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    /// The container's id.
    pub container: String,
    /// Its name.
    pub name: String,
    /// `namespace/pod`.
    pub pod: String,
    /// Its class.
    pub class: String,
    /// The class's resctrl group; `None`: the root group.
    pub group: Option<String>,
    /// The container's process as the runtime knows it (NRI `Container.pid`; 0: unknown).
    pub pid: u32,
    /// The container's cgroups path (NRI `LinuxContainer.cgroups_path`: `/kubepods/...`
    /// with cgroupfs, `slice:prefix:name` with systemd).
    pub cgroups_path: String,
}

/// The most pods a synchronization may hold, all its parts together; past it the runtime
/// gets a `RESOURCE_EXHAUSTED` status and the parts so far are dropped.
pub const MAX_SYNC_PODS: usize = 65_536;
/// The most containers a synchronization may hold, all its parts together (as
/// [`MAX_SYNC_PODS`]).
pub const MAX_SYNC_CONTAINERS: usize = 65_536;
/// The most bytes of encoded requests a synchronization split in parts (`more`) may
/// take, all parts together (16 parts of ttrpc's 4 MiB); as [`MAX_SYNC_PODS`] past it.
/// What is kept of them is less: of each pod and container only the fields the class
/// decision and the repair read (no labels, only the RDT annotations).
pub const MAX_SYNC_BYTES: usize = 64 << 20;

/// A synchronization's parts so far.
#[derive(Debug, Default)]
struct SyncParts {
    pods: Vec<PodSandbox>,
    containers: Vec<Container>,
    bytes: usize,
}

/// Where a placed container went.
#[derive(Clone, Debug)]
struct Placed {
    class: String,
    /// Set for a container the plugin placed itself: its tasks are checked again while it
    /// runs.
    repair: Option<Repair>,
    /// Its pod's sandbox id.
    pod_id: String,
    /// Its name.
    name: String,
    /// Its class's group.
    group: Option<String>,
    /// Its process (0: not started).
    pid: u32,
    /// Its cgroups path.
    cgroups_path: String,
}

/// A pod of placed containers, as the plugin records it ([`Plugin::pods_record`]).
#[derive(Clone, Debug)]
struct PodEntry {
    uid: String,
    namespace: String,
    name: String,
    qos: Option<Qos>,
    labels: BTreeMap<String, String>,
    /// The ids of its containers placed and not removed.
    containers: HashSet<String>,
}

impl PodEntry {
    fn of(pod: &PodSandbox) -> Self {
        Self {
            uid: pod.uid.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            qos: Qos::of_pod(pod),
            labels: pod
                .labels
                .iter()
                .take(MAX_POD_LABELS)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            containers: HashSet::new(),
        }
    }
}

/// Work on the pods' monitor groups ([`Options::monitoring`]), for the session to do
/// ([`Plugin::take_mon_work`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MonWork {
    /// Put a container's tasks in its pod's monitor group (made when missing).
    Place(MonPlace),
    /// Remove pod `uid`'s monitor groups (those the plugin made and that are empty).
    Remove {
        /// The pod's UID.
        uid: String,
    },
}

/// A container's tasks into its pod's monitor group, `<group>/mon_groups/<uid>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonPlace {
    /// The container's id.
    pub container: String,
    /// `namespace/pod`.
    pub pod: String,
    /// The pod's UID (checked: [`rdt_pqos::pods::is_pod_uid`]).
    pub uid: String,
    /// The container's class's group; `None`: the root group.
    pub group: Option<String>,
    /// The container's process (0: unknown).
    pub pid: u32,
    /// Its cgroups path.
    pub cgroups_path: String,
}

/// The plugin: the node's classes, how to place containers, and where each one went.
#[derive(Debug)]
pub struct Plugin {
    classes: Vec<Class>,
    options: Options,
    /// Container id to where it went, of the containers placed and not removed.
    placed: HashMap<String, Placed>,
    /// Containers of a split synchronization not yet answered.
    sync: SyncParts,
    /// Repairs decided and not yet made ([`Plugin::take_repairs`]).
    repairs: Vec<Repair>,
    /// Pod sandbox id to the pod, of the pods with placed containers.
    pods: HashMap<String, PodEntry>,
    /// Monitor-group work decided and not yet done ([`Plugin::take_mon_work`]).
    mon_work: Vec<MonWork>,
    /// The pods or containers changed since the last [`Plugin::take_changed`].
    changed: bool,
    /// A synchronization completed since the last [`Plugin::take_synced`].
    synced: bool,
}

/// A pod's fields the plugin reads: its first labels ([`MAX_POD_LABELS`], recorded for
/// the policies that select pods), only the RDT annotations.
fn slim_pod(mut p: PodSandbox) -> PodSandbox {
    if p.labels.len() > MAX_POD_LABELS {
        p.labels = std::mem::take(&mut p.labels)
            .into_iter()
            .take(MAX_POD_LABELS)
            .collect();
    }
    p.annotations
        .retain(|k, _| k == POD_ANNOTATION || k.starts_with(POD_CONTAINER_ANNOTATION_PREFIX));
    p
}

/// A container's fields the plugin reads: no labels, only the RDT annotation.
fn slim_container(mut c: Container) -> Container {
    c.labels.clear();
    c.annotations.retain(|k, _| k == CONTAINER_ANNOTATION);
    c
}

impl Plugin {
    /// A plugin over `classes` (the root class is added when missing).
    ///
    /// # Errors
    /// An option names a class `classes` lacks.
    pub fn new(mut classes: Vec<Class>, options: Options) -> Result<Self, OptionsError> {
        if !classes.iter().any(|c| c.name == ROOT_CLASS) {
            classes.push(Class::new(ROOT_CLASS, None));
        }
        let plugin = Self {
            classes,
            options,
            placed: HashMap::new(),
            sync: SyncParts::default(),
            repairs: Vec::new(),
            pods: HashMap::new(),
            mon_work: Vec::new(),
            changed: false,
            synced: false,
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

    /// The class container `id` was placed in, while it is not removed.
    #[must_use]
    pub fn placed(&self, id: &str) -> Option<&str> {
        self.placed.get(id).map(|p| p.class.as_str())
    }

    /// How many containers are placed and not removed.
    #[must_use]
    pub fn placed_count(&self) -> usize {
        self.placed.len()
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

    /// The class of `container` of `pod`, as goresctrl decides it
    /// (`ContainerClassFromAnnotations`): the container's annotation, else the pod's
    /// annotation for this container, else the pod's annotation; the one found must be a
    /// class name, name a class of the node, and be of a kind the class allows
    /// ([`Class::deny_pod_annotation`], [`Class::deny_container_annotation`]) — a denied
    /// annotation is refused, never passed over for a weaker one. Without an annotation:
    /// the pod's QoS class's, then the default. `Ok(None)`: nothing places it.
    ///
    /// # Errors
    /// The annotation breaks a [`Rule`]: always for [`Rule::Denied`]; for an unknown or
    /// unqualified class when [`Options::on_unknown`] is [`OnUnknown::Fail`] (else the
    /// container is placed as if it had no annotation).
    ///
    /// # References
    /// goresctrl `pkg/rdt/kubernetes.go` (`ContainerClassFromAnnotations`) and
    /// `pkg/rdt/rdt.go` (`IsQualifiedClassName`).
    pub fn decide(
        &self,
        pod: &PodSandbox,
        container: &Container,
    ) -> Result<Option<(&Class, Origin)>, Refused> {
        let per_container = format!("{POD_CONTAINER_ANNOTATION_PREFIX}{}", container.name);
        let annotated = container
            .annotations
            .get(CONTAINER_ANNOTATION)
            .map(|v| (CONTAINER_ANNOTATION, v, false))
            .or_else(|| {
                pod.annotations
                    .get(&per_container)
                    .map(|v| (per_container.as_str(), v, true))
            })
            .or_else(|| {
                pod.annotations
                    .get(POD_ANNOTATION)
                    .map(|v| (POD_ANNOTATION, v, true))
            });
        if let Some((key, value, from_pod)) = annotated {
            let refused = |rule| Refused {
                pod: format!("{}/{}", pod.namespace, pod.name),
                container: container.name.clone(),
                annotation: key.to_owned(),
                class: value.clone(),
                rule,
            };
            let class = if is_qualified_class_name(value) {
                self.class(value)
            } else {
                None
            };
            if let Some(class) = class {
                let denied = if from_pod {
                    class.deny_pod_annotation
                } else {
                    class.deny_container_annotation
                };
                if denied {
                    return Err(refused(Rule::Denied { pod: from_pod }));
                }
                return Ok(Some((class, Origin::Annotation(key.to_owned()))));
            }
            let r = refused(if is_qualified_class_name(value) {
                Rule::UnknownClass {
                    known: self.known(),
                }
            } else {
                Rule::Unqualified
            });
            if self.options.on_unknown == OnUnknown::Fail {
                return Err(r);
            }
            log::warn!("{r}: placed as if it had no annotation");
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

    /// The `linux.intelRdt` that puts a container in `class`: its group's `closID`; `None`
    /// for the root class, whose containers keep the runtime's group. No
    /// `enableMonitoring`: with [`Options::monitoring`] the plugin makes one monitor group
    /// per pod itself (runc's would be one per container, named by its id).
    fn rdt_of(class: &Class) -> Option<LinuxRdt> {
        let group = class.group.as_ref()?;
        Some(LinuxRdt {
            clos_id: Some(OptionalString {
                value: group.clone(),
            }),
            schemata: None,
            enable_monitoring: None,
            remove: false,
        })
    }

    /// Records container `c` of `pod` as placed in `class` (replacing a record of the same
    /// id), its pod with it.
    fn insert_placed(
        &mut self,
        pod: &PodSandbox,
        c: &Container,
        class: &Class,
        repair: Option<Repair>,
    ) {
        let placed = Placed {
            class: class.name.clone(),
            repair,
            pod_id: pod.id.clone(),
            name: c.name.clone(),
            group: class.group.clone(),
            pid: c.pid,
            cgroups_path: c
                .linux
                .as_ref()
                .map(|l| l.cgroups_path.clone())
                .unwrap_or_default(),
        };
        if let Some(old) = self.placed.insert(c.id.clone(), placed) {
            self.unref_pod(&old.pod_id, &c.id);
        }
        let entry = self
            .pods
            .entry(pod.id.clone())
            .or_insert_with(|| PodEntry::of(pod));
        entry.containers.insert(c.id.clone());
        self.changed = true;
    }

    /// Container `id` of pod `pod_id` is no more; the pod goes with its last.
    fn unref_pod(&mut self, pod_id: &str, id: &str) -> Option<PodEntry> {
        let e = self.pods.get_mut(pod_id)?;
        e.containers.remove(id);
        if e.containers.is_empty() {
            return self.pods.remove(pod_id);
        }
        None
    }

    /// Container `id` is removed: forgotten, and its pod's monitor groups removed with the
    /// pod's last container.
    fn removed(&mut self, id: &str) {
        let Some(p) = self.placed.remove(id) else {
            return;
        };
        self.changed = true;
        if let Some(pod) = self.unref_pod(&p.pod_id, id)
            && self.options.monitoring
            && is_pod_uid(&pod.uid)
        {
            self.mon_work.push(MonWork::Remove { uid: pod.uid });
        }
    }

    /// The monitor-group placement of container `id`, when [`Options::monitoring`] and
    /// its pod's UID can name a group.
    fn mon_place(&self, id: &str) -> Option<MonPlace> {
        if !self.options.monitoring {
            return None;
        }
        let p = self.placed.get(id)?;
        let pod = self.pods.get(&p.pod_id)?;
        if !is_pod_uid(&pod.uid) {
            log::warn!(
                "pod {}/{}: UID {} is not a UUID: no monitor group",
                shown(&pod.namespace),
                shown(&pod.name),
                shown(&pod.uid)
            );
            return None;
        }
        Some(MonPlace {
            container: id.to_owned(),
            pod: format!("{}/{}", pod.namespace, pod.name),
            uid: pod.uid.clone(),
            group: p.group.clone(),
            pid: p.pid,
            cgroups_path: p.cgroups_path.clone(),
        })
    }

    /// The monitor-group work decided since the last call.
    pub fn take_mon_work(&mut self) -> Vec<MonWork> {
        std::mem::take(&mut self.mon_work)
    }

    /// Whether the pods or containers changed since the last call (the record is to be
    /// written again).
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// Whether a synchronization completed since the last call: the pods the plugin knows
    /// are then all the runtime's ([`Plugin::pod_uids`]).
    pub fn take_synced(&mut self) -> bool {
        std::mem::take(&mut self.synced)
    }

    /// The UIDs of the pods with placed containers.
    pub fn pod_uids(&self) -> impl Iterator<Item = &str> {
        self.pods.values().map(|p| p.uid.as_str())
    }

    /// The pods of placed containers with their containers, as
    /// [`rdt_pqos::pods::PodsRecord`] has them (without monitor groups: the session's),
    /// capped ([`PodRecord::capped`]), by UID.
    #[must_use]
    pub fn pods_record(&self) -> Vec<PodRecord> {
        let mut by_pod: HashMap<&str, PodRecord> = HashMap::with_capacity(self.pods.len());
        for (id, p) in &self.placed {
            let Some(pod) = self.pods.get(&p.pod_id) else {
                continue;
            };
            let record = by_pod.entry(p.pod_id.as_str()).or_insert_with(|| {
                let qos = pod.qos.map(|q| q.to_string());
                PodRecord::capped(
                    &pod.uid,
                    &pod.namespace,
                    &pod.name,
                    qos.as_deref(),
                    &pod.labels,
                )
            });
            record.containers.push(ContainerRecord::capped(
                id,
                &p.name,
                &p.class,
                p.group.as_deref(),
                p.pid,
                &p.cgroups_path,
            ));
        }
        let mut out: Vec<PodRecord> = by_pod.into_values().collect();
        for r in &mut out {
            r.containers.sort_by(|a, b| a.id.cmp(&b.id));
        }
        out.sort_by(|a, b| a.uid.cmp(&b.uid));
        out
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
            log::info!(
                "container {} ({}): no class",
                shown(&container.id),
                shown(&container.name)
            );
            return Ok(CreateContainerResponse::default());
        };
        log::info!(
            "container {} ({}) of pod {}/{}: class {} by {origin}",
            shown(&container.id),
            shown(&container.name),
            shown(&pod.namespace),
            shown(&pod.name),
            class.name
        );
        let adjust = Self::rdt_of(class).map(|rdt| ContainerAdjustment {
            linux: Some(LinuxContainerAdjustment { rdt: Some(rdt) }),
        });
        let class = class.clone();
        self.insert_placed(pod, container, &class, None);
        Ok(CreateContainerResponse {
            adjust,
            update: Vec::new(),
        })
    }

    /// `Synchronize`: the containers that exist. A container already in its class (its
    /// `linux.intelRdt.closID` is its class's group, or the runtime's own RDT class names
    /// that group) is left alone; one elsewhere is to be put in its class by the plugin
    /// itself: the [`Repair`]s returned (and kept for re-checks while the container
    /// runs). No update is sent to the runtime: NRI's container updates reach the runtime
    /// as CRI resources, which carry no RDT class, so containerd drops them. A stopped
    /// container is skipped; so is one whose annotation breaks a rule (it runs already:
    /// logged). Pods are matched by id through a hash map: linear in pods and containers.
    ///
    /// The containers and pods it knew before are replaced by these (the runtime's whole
    /// state); with [`Options::monitoring`] each running container's tasks are to be put in
    /// its pod's monitor group ([`MonWork::Place`]).
    pub fn synchronize(&mut self, pods: &[PodSandbox], containers: &[Container]) -> Vec<Repair> {
        let by_id: HashMap<&str, &PodSandbox> = pods.iter().map(|p| (p.id.as_str(), p)).collect();
        let none = PodSandbox::default();
        let mut repairs = Vec::new();
        self.placed.clear();
        self.pods.clear();
        self.changed = true;
        self.synced = true;
        for c in containers {
            if c.state == api::CONTAINER_STOPPED {
                continue;
            }
            let pod = by_id
                .get(c.pod_sandbox_id.as_str())
                .copied()
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
            let in_class = match (&class.group, clos.or(rdt_class)) {
                (Some(g), Some(have)) => g == have,
                (None, None) => true,
                (None, Some(have)) => {
                    have.is_empty() || self.class(have).is_some_and(|c| c.group.is_none())
                }
                (Some(_), None) => false,
            };
            let repair = (!in_class).then(|| {
                log::debug!(
                    "container {} ({}): class {} by {origin}, to be placed by the plugin",
                    shown(&c.id),
                    shown(&c.name),
                    class.name
                );
                Repair {
                    container: c.id.clone(),
                    name: c.name.clone(),
                    pod: format!("{}/{}", pod.namespace, pod.name),
                    class: class.name.clone(),
                    group: class.group.clone(),
                    pid: c.pid,
                    cgroups_path: linux.map(|l| l.cgroups_path.clone()).unwrap_or_default(),
                }
            });
            if let Some(r) = &repair {
                repairs.push(r.clone());
            }
            let class = class.clone();
            self.insert_placed(pod, c, &class, repair);
            if let Some(m) = self.mon_place(&c.id) {
                self.mon_work.push(MonWork::Place(m));
            }
        }
        repairs
    }

    /// The repairs decided since the last call (by `Synchronize`), to be made.
    pub fn take_repairs(&mut self) -> Vec<Repair> {
        std::mem::take(&mut self.repairs)
    }

    /// The containers the plugin placed itself and that still run (not stopped or
    /// removed): their tasks are checked again from time to time.
    pub fn repaired(&self) -> impl Iterator<Item = &Repair> {
        self.placed.values().filter_map(|p| p.repair.as_ref())
    }

    /// A container started (NRI's `PostStartContainer`): one the plugin is to place itself
    /// (found by `Synchronize` before it ran: no process, so nothing to move yet) now has
    /// its process, and its repair is made at once ([`Plugin::take_repairs`]).
    ///
    /// With [`Options::monitoring`], its tasks are then put in its pod's monitor group
    /// ([`MonWork::Place`]).
    pub fn started(&mut self, c: &Container) {
        let cgroups = c
            .linux
            .as_ref()
            .filter(|l| !l.cgroups_path.is_empty())
            .map(|l| l.cgroups_path.clone());
        let Some(placed) = self.placed.get_mut(&c.id) else {
            return;
        };
        placed.pid = c.pid;
        if let Some(path) = &cgroups {
            placed.cgroups_path.clone_from(path);
        }
        self.changed = true;
        if let Some(repair) = placed.repair.as_mut() {
            repair.pid = c.pid;
            if let Some(path) = cgroups {
                repair.cgroups_path = path;
            }
            self.repairs.push(repair.clone());
        }
        if let Some(m) = self.mon_place(&c.id) {
            self.mon_work.push(MonWork::Place(m));
        }
    }

    /// Pod `pod` stopped (`STOP_POD_SANDBOX`: its containers are stopped) or is removed
    /// (`REMOVE_POD_SANDBOX`: forgotten with its containers): its monitor groups are
    /// removed.
    pub fn pod_gone(&mut self, pod: &PodSandbox, removed: bool) {
        if removed && let Some(entry) = self.pods.remove(&pod.id) {
            for id in &entry.containers {
                self.placed.remove(id);
            }
            self.changed = true;
        }
        if self.options.monitoring && is_pod_uid(&pod.uid) {
            self.mon_work.push(MonWork::Remove {
                uid: pod.uid.clone(),
            });
        }
    }

    /// Forgets the repair of container `id` (its tasks are gone).
    pub fn forget_repair(&mut self, id: &str) {
        if let Some(p) = self.placed.get_mut(id) {
            p.repair = None;
        }
    }

    /// Drops what a previous connection left half-done (a split synchronization).
    pub fn reset_connection(&mut self) {
        self.sync = SyncParts::default();
    }

    /// One part of a synchronization, added to those before it within the limits
    /// ([`MAX_SYNC_PODS`], [`MAX_SYNC_CONTAINERS`], [`MAX_SYNC_BYTES`]); the whole
    /// synchronization once the last part is in.
    fn sync_part(
        &mut self,
        payload: &[u8],
        req: api::SynchronizeRequest,
    ) -> Result<Option<SyncParts>, Status> {
        let s = &mut self.sync;
        s.bytes += payload.len();
        let pods = s.pods.len() + req.pods.len();
        let containers = s.containers.len() + req.containers.len();
        if pods > MAX_SYNC_PODS || containers > MAX_SYNC_CONTAINERS || s.bytes > MAX_SYNC_BYTES {
            let message = format!(
                "Synchronize: {pods} pods, {containers} containers, {} bytes so far: more than \
                 this plugin takes ({MAX_SYNC_PODS} pods, {MAX_SYNC_CONTAINERS} containers, \
                 {MAX_SYNC_BYTES} bytes); the synchronization is refused",
                s.bytes
            );
            self.sync = SyncParts::default();
            log::error!("{message}");
            return Err(Status {
                code: CODE_RESOURCE_EXHAUSTED,
                message,
            });
        }
        s.pods.extend(req.pods.into_iter().map(slim_pod));
        s.containers
            .extend(req.containers.into_iter().map(slim_container));
        if req.more {
            return Ok(None);
        }
        Ok(Some(std::mem::take(&mut self.sync)))
    }

    /// Answers one request of NRI's `Plugin` service: `method` with its encoded request,
    /// the encoded response or the error status the runtime sees.
    ///
    /// # Errors
    /// A status: the request does not decode (`INVALID_ARGUMENT`), a container is refused
    /// (`FAILED_PRECONDITION`, [`Refused`]'s message), a synchronization past the limits
    /// (`RESOURCE_EXHAUSTED`), a method this plugin does not implement
    /// (`UNIMPLEMENTED`; the runtime calls only the events subscribed).
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
                    shown(&req.runtime_name),
                    shown(&req.runtime_version),
                    shown(&req.nri_version)
                );
                Ok(api::ConfigureResponse {
                    events: api::event_mask(&[
                        api::event::STOP_POD_SANDBOX,
                        api::event::REMOVE_POD_SANDBOX,
                        api::event::CREATE_CONTAINER,
                        api::event::POST_START_CONTAINER,
                        api::event::STOP_CONTAINER,
                        api::event::REMOVE_CONTAINER,
                    ]),
                }
                .encode_to_vec())
            }
            "Synchronize" => {
                let req = api::SynchronizeRequest::decode(payload).map_err(|e| bad(method, &e))?;
                let Some(all) = self.sync_part(payload, req)? else {
                    return Ok(api::SynchronizeResponse {
                        update: Vec::new(),
                        more: true,
                    }
                    .encode_to_vec());
                };
                let repairs = self.synchronize(&all.pods, &all.containers);
                log::info!(
                    "synchronized {} container(s) of {} pod(s): {} outside their class, to be placed",
                    all.containers.len(),
                    all.pods.len(),
                    repairs.len()
                );
                self.repairs.extend(repairs);
                Ok(api::SynchronizeResponse {
                    update: Vec::new(),
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
                    log::info!("container {} ({}) stopped", shown(&c.id), shown(&c.name));
                    self.forget_repair(&c.id);
                }
                Ok(api::StopContainerResponse::default().encode_to_vec())
            }
            "RemoveContainer" => {
                let req = ContainerRequest::decode(payload).map_err(|e| bad(method, &e))?;
                if let Some(c) = req.container {
                    self.removed(&c.id);
                }
                Ok(api::Empty::default().encode_to_vec())
            }
            "StateChange" => {
                let ev = api::StateChangeEvent::decode(payload).map_err(|e| bad(method, &e))?;
                match (ev.event, ev.container, ev.pod) {
                    (api::event::REMOVE_CONTAINER, Some(c), _) => self.removed(&c.id),
                    (api::event::POST_START_CONTAINER, Some(c), _) => self.started(&c),
                    (api::event::STOP_POD_SANDBOX, _, Some(p)) => self.pod_gone(&p, false),
                    (api::event::REMOVE_POD_SANDBOX, _, Some(p)) => self.pod_gone(&p, true),
                    _ => {}
                }
                Ok(api::Empty::default().encode_to_vec())
            }
            "Shutdown" => {
                log::info!("the runtime shuts down");
                Ok(api::Empty::default().encode_to_vec())
            }
            _ => Err(Status {
                code: CODE_UNIMPLEMENTED,
                message: format!("{}: not implemented by this plugin", shown(method)),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
