//! Who made a resctrl group, judged by its name: the one rule behind
//! [`rdt_core::BackendExt::groups`] and the telemetry's `owner`.

use rdt_core::{GroupKind, GroupOwner};

use crate::fs::{cos_of_name, is_pqos_mon_name};

/// The owner of the group named `name` (the last path component): a control group is ours
/// when pqos names it (`COS<n>`) or when `named_class` says it is one of this library's
/// named classes ([`rdt_core::BackendExt::class_named`]); a monitor group is ours when pqos
/// names it (`pqos-<pid>-<n>`). Every other group is another tool's.
pub(crate) fn group_owner(
    kind: GroupKind,
    name: &str,
    named_class: impl FnOnce(&str) -> bool,
) -> GroupOwner {
    let ours = match kind {
        GroupKind::Control => cos_of_name(name).is_some() || named_class(name),
        GroupKind::Monitor => is_pqos_mon_name(name),
    };
    if ours {
        GroupOwner::Pqos
    } else {
        GroupOwner::Foreign
    }
}
