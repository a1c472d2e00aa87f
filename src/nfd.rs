//! Node Feature Discovery: the RDT / PQoS features of a node as a feature file of NFD's
//! `local` source, so that Kubernetes pods can be scheduled on nodes that can isolate them
//! (`nodeSelector: {feature.node.kubernetes.io/cpu-rdt.RDTL3CA: "true"}`).
//!
//! NFD's `local` source reads every file of
//! `/etc/kubernetes/node-feature-discovery/features.d/` (not those whose name starts with a
//! dot), each line `<key>[=<value>]` a node label (value `true` when absent), `#` lines
//! comments, files over 64 KiB ignored; a label key must carry its namespace, and NFD's
//! master accepts `feature.node.kubernetes.io` for it. [`NodeFeatures::write`] writes the
//! file as NFD asks writers to: under a dot name, then renamed into place.
//!
//! | label (after `feature.node.kubernetes.io/cpu-rdt.`) | value | from | name |
//! |---|---|---|---|
//! | `RDTMON` | `true` | monitoring enumerated (PQM and CPUID.(0FH,0):EDX\[1\]) | NFD's |
//! | `RDTCMT` | `true` | L3 occupancy event (CPUID.(0FH,1):EDX\[0\]) | NFD's |
//! | `RDTMBM` | `true` | total *and* local bandwidth events (EDX\[1\] and \[2\]) | NFD's |
//! | `RDTL3CA` | `true` | L3 CAT | NFD's |
//! | `RDTL3CA_NUM_CLOSID` | integer | L3 classes usable now, less the default one | NFD's |
//! | `RDTL3CA_NUM_WAYS` | integer | L3 CBM length (ways that can be allocated) | ours |
//! | `RDTL2CA` | `true` | L2 CAT | NFD's |
//! | `RDTL2CA_NUM_CLOSID`, `RDTL2CA_NUM_WAYS` | integer | as for L3 | ours |
//! | `RDTMBA` | `true` | MBA (Intel) or AMD L3 bandwidth enforcement | NFD's |
//! | `RDTMBA_NUM_CLOSID` | integer | MBA classes, less the default one | ours |
//! | `RDTSMBA` | `true` | AMD slow memory bandwidth allocation | ours |
//!
//! NFD's `cpu` source decides its names from CPUID leaves 07H, 0FH and 10H alone (Intel's
//! enumeration: an AMD part's bandwidth allocation, leaf 8000_0020H, is not seen there) and
//! no longer makes node labels of them (they remain `cpu.rdt` features for its rules); here
//! they come from the [`Capabilities`] the platform was opened with, so on the OS interface
//! they say what resctrl offers (a feature the kernel hides, `rdt=!mba`, is absent) and the
//! class counts are the kernel's (the fewest `num_closids` of all resources, halved with
//! CDP). `RDTL3CA_NUM_CLOSID` keeps NFD's meaning: the classes a workload can be given,
//! not counting the default class (NFD: `info/L3/num_closids` - 1). A feature enumerated
//! without its details (a partial CPUID source) gets its `true` label and no counts.
//!
//! # References
//! NFD `source/local/local.go` (the parser: `parseFeatureFile`, `MaxFeatureFileSize`, dot
//! files skipped), `source/cpu/rdt_linux_amd64.go` (`discoverRDT`: the names, and
//! `RDTL3CA_NUM_CLOSID` = `num_closids` - 1), `pkg/apis/nfd/validate/validate.go`
//! (`Label`: qualified key, namespace, value), `docs/usage/customization-guide.md` ("Local
//! feature source", "Feature files").

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use rdt_core::{Capabilities, Feature};

use crate::{OpenError, OpenOptions};

/// The directory NFD's `local` source reads feature files from (its `featureFilesDir`).
pub const FEATURES_DIR: &str = "/etc/kubernetes/node-feature-discovery/features.d";

/// What every label key here starts with: NFD's label namespace and the `cpu-rdt.` prefix
/// its `cpu` source gave the RDT labels.
pub const LABEL_PREFIX: &str = "feature.node.kubernetes.io/cpu-rdt.";

/// The largest feature file NFD reads, in bytes (`MaxFeatureFileSize`); a larger one is
/// ignored whole.
pub const MAX_FILE_BYTES: usize = 65_536;

/// The RDT / PQoS features of a node, as the labels of an NFD feature file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeFeatures {
    /// (name after [`LABEL_PREFIX`], value), in the order of the module's table.
    labels: Vec<(&'static str, String)>,
}

impl NodeFeatures {
    /// No RDT feature: the file of a node whose CPU has none (it replaces an older file
    /// that had some).
    #[must_use]
    pub const fn none() -> Self {
        Self { labels: Vec::new() }
    }

    /// The features `caps` enumerates, as the module's table says.
    #[must_use]
    pub fn from_capabilities(caps: &Capabilities) -> Self {
        let mut labels: Vec<(&'static str, String)> = Vec::new();
        let mut flag = |name, on: bool| {
            if on {
                labels.push((name, "true".to_owned()));
            }
        };
        flag("RDTMON", caps.monitoring.is_present());
        if let Some(m) = caps.monitoring.get() {
            flag("RDTCMT", m.events.llc_occupancy);
            flag("RDTMBM", m.events.mbm_total && m.events.mbm_local);
        }
        for (cat, on, closid, ways) in [
            (
                &caps.l3_cat,
                "RDTL3CA",
                "RDTL3CA_NUM_CLOSID",
                "RDTL3CA_NUM_WAYS",
            ),
            (
                &caps.l2_cat,
                "RDTL2CA",
                "RDTL2CA_NUM_CLOSID",
                "RDTL2CA_NUM_WAYS",
            ),
        ] {
            if !cat.is_present() {
                continue;
            }
            labels.push((on, "true".to_owned()));
            if let Some(c) = cat.get() {
                labels.push((closid, c.usable_classes().saturating_sub(1).to_string()));
                labels.push((ways, c.cbm_len.to_string()));
            }
        }
        if caps.mba.is_present() {
            labels.push(("RDTMBA", "true".to_owned()));
        }
        if let Feature::Supported(m) = &caps.mba {
            labels.push((
                "RDTMBA_NUM_CLOSID",
                m.num_classes.saturating_sub(1).to_string(),
            ));
        }
        if caps.smba.is_present() {
            labels.push(("RDTSMBA", "true".to_owned()));
        }
        Self { labels }
    }

    /// The features of the platform `opts` names, read as [`OpenOptions::capabilities`]
    /// reads them (nothing is written); [`NodeFeatures::none`] for a CPU without RDT / PQoS
    /// ([`OpenError::NoRdt`]: with [`crate::Iface::Auto`] on a host without resctrl, or
    /// [`crate::Iface::Msr`]).
    ///
    /// # Errors
    /// [`OpenOptions::capabilities`]'s other errors (resctrl not mounted with
    /// [`crate::Iface::Os`], no `msr` module with [`crate::Iface::Msr`] on an RDT CPU).
    pub fn discover(opts: &OpenOptions) -> Result<Self, OpenError> {
        match opts.capabilities() {
            Ok(p) => Ok(Self::from_capabilities(&p.capabilities)),
            Err(OpenError::NoRdt(why)) => {
                log::info!("no RDT / PQoS feature to label: {why}");
                Ok(Self::none())
            }
            Err(e) => Err(e),
        }
    }

    /// The labels: (name after [`LABEL_PREFIX`], value).
    pub fn labels(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.labels.iter().map(|(k, v)| (*k, v.as_str()))
    }

    /// The value of the label `name` (after [`LABEL_PREFIX`]: `RDTL3CA`), if present.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The feature file: a comment, then one `<key>=<value>` line per label.
    #[must_use]
    pub fn to_feature_file(&self) -> String {
        let mut s = String::from(
            "# The RDT / PQoS features of this node (rdt-agent --nfd), for Node Feature\n\
             # Discovery's local source; replaced whole when written again.\n",
        );
        for (k, v) in &self.labels {
            let _ = writeln!(s, "{LABEL_PREFIX}{k}={v}");
        }
        s
    }

    /// Writes [`NodeFeatures::to_feature_file`] to `path` (in NFD's `features.d`, a
    /// directory device plugins share), mode 0644, atomically and safely as
    /// [`rdt_host::file::replace_shared`] does: `.<name>.<pid>.tmp` first (NFD skips dot
    /// files), then renamed.
    ///
    /// # Errors
    /// [`rdt_host::file::replace_shared`]'s (the directory or an existing file refused, a
    /// dot name, the writes); `FileTooLarge` for a text over [`MAX_FILE_BYTES`].
    pub fn write(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let text = self.to_feature_file();
        if text.len() > MAX_FILE_BYTES {
            // NFD would ignore the whole file.
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "{} bytes, more than NFD reads ({MAX_FILE_BYTES})",
                    text.len()
                ),
            ));
        }
        rdt_host::file::replace_shared(path, text.as_bytes(), 0o644)
    }
}
