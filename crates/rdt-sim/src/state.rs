//! Saving and restoring the simulator's state, so that separate `pqos` runs act on one machine.
//!
//! The state is JSON: the model identity, the clock, every register (hex strings, `"0xffe00"`),
//! the MBM counters of every (domain, RMID) that has counted anything, the PMU counters and the
//! scenario (in the scenario file format). Capabilities and topology are not saved: they are
//! derived again from the dump, and the identity check makes sure it is the same dump.
//! The [`SimPlatform::inject_unavailable`] test hook is not saved.
//!
//! This is the machine's state only. A session's state file ([`crate::session::Saved`]) is
//! the same JSON object with the kernel's state beside it (the resctrl mount, a `resctrl`
//! field): the hardware model knows nothing of the kernel model's.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use rdt_core::{CacheDomain, LogicalCpu, MbaKind};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::num::Accum;
use crate::platform::{CatRegs, PmuAccum, RmidCounters};
use crate::{Scenario, SimError, SimPlatform};

/// The `format` field of a state.
const FORMAT: &str = "rdt-sim-state/1";

/// A register value, written as `"0x..."` (Firecracker's register serialisation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hex(u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{:#x}", self.0))
    }
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let digits = s.strip_prefix("0x").unwrap_or(&s);
        u64::from_str_radix(digits, 16)
            .map(Hex)
            .map_err(|_| serde::de::Error::custom(format!("`{s}` is not a hex register value")))
    }
}

/// An [`Accum`] as `[whole, fraction]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
struct AccumState(u64, f64);

impl From<Accum> for AccumState {
    fn from(a: Accum) -> Self {
        Self(a.whole, a.frac)
    }
}

impl From<AccumState> for Accum {
    fn from(a: AccumState) -> Self {
        Self {
            whole: a.0,
            frac: if (0.0..1.0).contains(&a.1) { a.1 } else { 0.0 },
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CpuState {
    cpu: u32,
    pqr_assoc: Hex,
    evtsel: Hex,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatState {
    domain: u32,
    cfg: Hex,
    masks: Vec<Hex>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableState {
    domain: u32,
    values: Vec<Hex>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CounterState {
    domain: u32,
    rmid: u32,
    total: AccumState,
    local: AccumState,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PmuState {
    cpu: u32,
    instructions: AccumState,
    cycles: AccumState,
    llc_misses: AccumState,
    #[serde(default)]
    llc_references: AccumState,
}

/// The machine's saved state ([`SimPlatform::machine_state`]; module docs): what
/// [`SimPlatform::save_state`] writes as JSON. Opaque: restore it with
/// [`SimPlatform::restore_machine`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineState {
    format: String,
    model: String,
    now_ns: u64,
    /// When the scenario was installed (its times count from here); absent in states saved
    /// before scenarios had times: 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    scenario_epoch_ns: u64,
    cpus: Vec<CpuState>,
    l3: Vec<CatState>,
    l2: Vec<CatState>,
    mba: Vec<TableState>,
    smba: Vec<TableState>,
    counters: Vec<CounterState>,
    pmu: Vec<PmuState>,
    scenario: serde_json::Value,
    /// AMD's BMEC/ABMC registers per L3 domain where they differ from reset
    /// ([`crate::amdqos`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    amd: Vec<crate::amdqos::AmdQosSaved>,
    /// The RDT 1.3 MMIO registers and region counts ([`crate::mmio`]); absent on a model
    /// without them and in states saved before they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mmio: Option<crate::mmio::MmioSaved>,
    /// IA32_L3_IO_QOS_CFG per package where it is not 0 (a part with I/O RDT: `xeon-rdt13`);
    /// absent in states saved before it was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    l3_io_qos_cfg: Vec<(u32, u64)>,
    /// MSR_RMID_SNC_CONFIG per package where written (`pqos -r snc-local|snc-total`; a
    /// package absent reads its model's default); absent in states saved before it was
    /// kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rmid_snc_config: Vec<(u32, u64)>,
}

impl MachineState {
    /// What in this state differs from `reset` (the same model's state as built): one
    /// phrase per changed class of service, `COS1 (L3 CAT, MBA)` (its masks or limits in
    /// any domain), per class CPUs are associated with, `CPUs 2-7 in COS1`, and `L3 CDP on`,
    /// `L2 CDP on`, `AMD BMEC/ABMC configuration`, `a scenario`. Empty when the platform
    /// is as reset. The running counters and the clock are not changes.
    #[must_use]
    pub fn changes_from(&self, reset: &Self) -> Vec<String> {
        let mut by_cos: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
        let mut notes = Vec::new();
        let mut cat = |name: &'static str, now: &[CatState], was: &[CatState]| {
            for (a, b) in now.iter().zip(was) {
                for (cos, (x, y)) in a.masks.iter().zip(&b.masks).enumerate() {
                    if x != y && !by_cos.get(&cos).is_some_and(|v| v.contains(&name)) {
                        by_cos.entry(cos).or_default().push(name);
                    }
                }
            }
            if now.iter().zip(was).any(|(a, b)| a.cfg != b.cfg) {
                notes.push(format!("{} CDP on", &name[..2]));
            }
        };
        cat("L3 CAT", &self.l3, &reset.l3);
        cat("L2 CAT", &self.l2, &reset.l2);
        for (name, now, was) in [
            ("MBA", &self.mba, &reset.mba),
            ("SMBA", &self.smba, &reset.smba),
        ] {
            for (a, b) in now.iter().zip(was.iter()) {
                for (cos, (x, y)) in a.values.iter().zip(&b.values).enumerate() {
                    if x != y && !by_cos.get(&cos).is_some_and(|v| v.contains(&name)) {
                        by_cos.entry(cos).or_default().push(name);
                    }
                }
            }
        }
        let mut changes: Vec<String> = by_cos
            .into_iter()
            .map(|(cos, what)| format!("COS{cos} ({})", what.join(", ")))
            .collect();
        // IA32_PQR_ASSOC: the COS in bits 63:32 (SDM Vol. 3B 18.19.5).
        let mut cpus_by_cos: BTreeMap<u64, rdt_core::CpuSet> = BTreeMap::new();
        for (a, b) in self.cpus.iter().zip(&reset.cpus) {
            let cos = a.pqr_assoc.0 >> 32;
            if cos != b.pqr_assoc.0 >> 32 {
                cpus_by_cos
                    .entry(cos)
                    .or_default()
                    .extend([LogicalCpu::new(a.cpu)]);
            }
        }
        changes.extend(
            cpus_by_cos
                .into_iter()
                .map(|(cos, cpus)| format!("CPUs {cpus} in COS{cos}")),
        );
        changes.extend(notes);
        if self.amd != reset.amd {
            changes.push("AMD BMEC/ABMC configuration".into());
        }
        if self.scenario != reset.scenario {
            changes.push("a scenario".into());
        }
        changes
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if signature
const fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn cat_states(m: &BTreeMap<CacheDomain, CatRegs>) -> Vec<CatState> {
    m.iter()
        .map(|(d, r)| CatState {
            domain: d.get(),
            cfg: Hex(r.cfg),
            masks: r.masks.iter().copied().map(Hex).collect(),
        })
        .collect()
}

fn table_states(m: &BTreeMap<CacheDomain, Vec<u64>>) -> Vec<TableState> {
    m.iter()
        .map(|(d, v)| TableState {
            domain: d.get(),
            values: v.iter().copied().map(Hex).collect(),
        })
        .collect()
}

struct Invalid(String);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn restore_cat(
    into: &mut BTreeMap<CacheDomain, CatRegs>,
    from: Vec<CatState>,
    what: &str,
    accept: impl Fn(u64) -> bool,
    cfg_ok: bool,
) -> Result<(), Invalid> {
    for s in from {
        let d = CacheDomain::new(s.domain);
        let regs = into
            .get_mut(&d)
            .ok_or_else(|| Invalid(format!("{what} domain {} does not exist", s.domain)))?;
        if s.masks.len() != regs.masks.len() {
            return Err(Invalid(format!(
                "{what} domain {} has {} masks, the model has {}",
                s.domain,
                s.masks.len(),
                regs.masks.len()
            )));
        }
        if let Some(bad) = s.masks.iter().find(|m| !accept(m.0)) {
            return Err(Invalid(format!(
                "{what} mask {:#x} is not accepted by the CPU",
                bad.0
            )));
        }
        if s.cfg.0 & !1 != 0 || (s.cfg.0 != 0 && !cfg_ok) {
            return Err(Invalid(format!(
                "{what} QOS_CFG value {:#x} is not valid",
                s.cfg.0
            )));
        }
        regs.masks = s.masks.into_iter().map(|h| h.0).collect();
        regs.cfg = s.cfg.0;
    }
    Ok(())
}

fn restore_table(
    into: &mut BTreeMap<CacheDomain, Vec<u64>>,
    from: Vec<TableState>,
    what: &str,
    max: u64,
) -> Result<(), Invalid> {
    for s in from {
        let vals = into
            .get_mut(&CacheDomain::new(s.domain))
            .ok_or_else(|| Invalid(format!("{what} domain {} does not exist", s.domain)))?;
        if s.values.len() != vals.len() || s.values.iter().any(|v| v.0 > max) {
            return Err(Invalid(format!(
                "{what} values of domain {} do not fit",
                s.domain
            )));
        }
        *vals = s.values.into_iter().map(|h| h.0).collect();
    }
    Ok(())
}

fn mba_max(kind: MbaKind) -> u64 {
    match kind {
        MbaKind::IntelDelay { max_delay, .. } => u64::from(max_delay),
        MbaKind::AmdBandwidth { width } => 1u64 << width,
    }
}

impl SimPlatform {
    /// The whole mutable state as JSON (module docs of [`crate::state`]): the text of
    /// [`SimPlatform::machine_state`].
    #[must_use]
    pub fn save_state(&self) -> String {
        // Serialising plain structs of strings and numbers into a String cannot fail.
        serde_json::to_string_pretty(&self.machine_state()).unwrap_or_default()
    }

    /// The whole mutable state of the machine (module docs of [`crate::state`]).
    #[must_use]
    pub fn machine_state(&self) -> MachineState {
        let cpus = self
            .topology
            .cpus()
            .iter()
            .zip(&self.regs.cpus)
            .map(|(p, r)| CpuState {
                cpu: p.cpu.get(),
                pqr_assoc: Hex(r.pqr_assoc),
                evtsel: Hex(r.evtsel),
            })
            .collect();
        let mut counters = Vec::new();
        for (d, v) in &self.counters {
            for (rmid, c) in v.iter().enumerate() {
                if *c != RmidCounters::default() {
                    counters.push(CounterState {
                        domain: d.get(),
                        rmid: u32::try_from(rmid).unwrap_or(u32::MAX),
                        total: c.total.into(),
                        local: c.local.into(),
                    });
                }
            }
        }
        let pmu = self
            .topology
            .cpus()
            .iter()
            .zip(&self.pmu)
            .map(|(p, a)| PmuState {
                cpu: p.cpu.get(),
                instructions: a.instructions.into(),
                cycles: a.cycles.into(),
                llc_misses: a.llc_misses.into(),
                llc_references: a.llc_references.into(),
            })
            .collect();
        MachineState {
            format: FORMAT.into(),
            model: self.identity.clone(),
            now_ns: u64::try_from(self.now.as_nanos()).unwrap_or(u64::MAX),
            scenario_epoch_ns: u64::try_from(self.epoch.as_nanos()).unwrap_or(u64::MAX),
            cpus,
            l3: cat_states(&self.regs.l3),
            l2: cat_states(&self.regs.l2),
            mba: table_states(&self.regs.mba),
            smba: table_states(&self.regs.smba),
            counters,
            pmu,
            scenario: self.scenario.to_value(),
            amd: self.amd_qos_saved(),
            mmio: self.mmio.as_deref().map(crate::mmio::MmioModel::saved),
            l3_io_qos_cfg: self
                .l3_io_qos_cfg
                .iter()
                .filter(|(_, v)| **v != 0)
                .map(|(k, v)| (*k, *v))
                .collect(),
            rmid_snc_config: self.rmid_snc_config.iter().map(|(k, v)| (*k, *v)).collect(),
        }
    }

    /// Restores a state saved by [`Self::save_state`] of the same model. All or nothing: on
    /// error the platform is unchanged.
    ///
    /// # Errors
    /// [`SimError::StateFormat`] when the text is not a state, [`SimError::StateMismatch`]
    /// when it was saved by another model or dump, [`SimError::StateInvalid`] when a CPU,
    /// domain, register count or value does not fit this model, [`SimError::Scenario`] when
    /// its scenario does not.
    pub fn restore_state(&mut self, text: &str) -> Result<(), SimError> {
        let st: MachineState =
            serde_json::from_str(text).map_err(|source| SimError::StateFormat { source })?;
        self.restore_machine(st)
    }

    /// Restores a state taken by [`Self::machine_state`] of the same model. All or nothing:
    /// on error the platform is unchanged.
    ///
    /// # Errors
    /// As [`Self::restore_state`], but for [`SimError::StateFormat`].
    pub fn restore_machine(&mut self, st: MachineState) -> Result<(), SimError> {
        if st.model != self.identity {
            return Err(SimError::StateMismatch {
                expected: self.identity.clone(),
                found: st.model,
            });
        }
        let scenario = Scenario::from_value(&st.scenario)?;
        self.restore_checked(st, scenario)
            .map_err(|Invalid(problem)| SimError::StateInvalid {
                model: self.identity.clone(),
                problem,
            })
    }

    /// Saved IA32_L3_IO_QOS_CFG values fit this model: a part with I/O RDT, its packages,
    /// bits 0-1.
    fn check_l3_io_qos_cfg(&self, saved: &[(u32, u64)]) -> Result<(), Invalid> {
        let io_rdt = self.caps.l3_cat.get().is_some_and(|c| c.io_rdt);
        let packages = self.topology.packages();
        for &(package, v) in saved {
            if !io_rdt || !packages.contains(&package) || v & !0b11 != 0 {
                return Err(Invalid(format!(
                    "IA32_L3_IO_QOS_CFG {v:#x} of package {package} does not fit this model"
                )));
            }
        }
        Ok(())
    }

    /// Saved MSR_RMID_SNC_CONFIG values fit this model: a part with the register, its
    /// packages, bit 0 only.
    fn check_rmid_snc_config(&self, saved: &[(u32, u64)]) -> Result<(), Invalid> {
        let packages = self.topology.packages();
        for &(package, v) in saved {
            if !self.has_rmid_snc_config() || !packages.contains(&package) || v & !1 != 0 {
                return Err(Invalid(format!(
                    "MSR_RMID_SNC_CONFIG {v:#x} of package {package} does not fit this model"
                )));
            }
        }
        Ok(())
    }

    fn restore_checked(&mut self, st: MachineState, scenario: Scenario) -> Result<(), Invalid> {
        if st.format != FORMAT {
            return Err(Invalid(format!("format `{}` is not `{FORMAT}`", st.format)));
        }
        let index = |cpu: u32| {
            self.topology
                .cpus()
                .binary_search_by_key(&LogicalCpu::new(cpu), |c| c.cpu)
                .map_err(|_| Invalid(format!("CPU {cpu} does not exist")))
        };
        let mut regs = self.reset_registers();
        let num_rmids = self.caps.monitoring.get().map_or(1, |m| m.num_rmids);
        let max_cos = [
            self.caps.l3_cat.get().map(|c| c.num_classes),
            self.caps.l2_cat.get().map(|c| c.num_classes),
            self.caps.mba.get().map(|m| m.num_classes),
            self.caps.smba.get().map(|m| m.num_classes),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(1);
        for c in &st.cpus {
            let i = index(c.cpu)?;
            let v = c.pqr_assoc.0;
            if rdt_msr::regs::pqr_rmid(v) >= num_rmids || rdt_msr::regs::pqr_cos(v) >= max_cos {
                return Err(Invalid(format!(
                    "IA32_PQR_ASSOC {v:#x} of CPU {} is out of range",
                    c.cpu
                )));
            }
            regs.cpus[i].pqr_assoc = v;
            regs.cpus[i].evtsel = c.evtsel.0;
        }
        if let Some(cat) = self.caps.l3_cat.get() {
            let ok = |m| crate::platform::mask_accepted(cat, m);
            restore_cat(&mut regs.l3, st.l3, "L3", ok, cat.cdp_supported)?;
        } else if !st.l3.is_empty() {
            return Err(Invalid("the model has no L3 CAT".into()));
        }
        if let Some(cat) = self.caps.l2_cat.get() {
            let ok = |m| crate::platform::mask_accepted(cat, m);
            restore_cat(&mut regs.l2, st.l2, "L2", ok, cat.cdp_supported)?;
        } else if !st.l2.is_empty() {
            return Err(Invalid("the model has no L2 CAT".into()));
        }
        let mba_max_v = self.caps.mba.get().map_or(0, |m| mba_max(m.kind));
        restore_table(&mut regs.mba, st.mba, "MBA", mba_max_v)?;
        let smba_max_v = self.caps.smba.get().map_or(0, |m| mba_max(m.kind));
        restore_table(&mut regs.smba, st.smba, "SMBA", smba_max_v)?;
        let mut counters = self.zero_counters();
        for c in st.counters {
            let slot = counters
                .get_mut(&CacheDomain::new(c.domain))
                .and_then(|v| v.get_mut(c.rmid as usize))
                .ok_or_else(|| {
                    Invalid(format!(
                        "counter of RMID {} in L3 domain {} does not exist",
                        c.rmid, c.domain
                    ))
                })?;
            *slot = RmidCounters {
                total: c.total.into(),
                local: c.local.into(),
            };
        }
        let mut pmu = vec![PmuAccum::default(); self.topology.cpus().len()];
        for p in st.pmu {
            pmu[index(p.cpu)?] = PmuAccum {
                instructions: p.instructions.into(),
                cycles: p.cycles.into(),
                llc_misses: p.llc_misses.into(),
                llc_references: p.llc_references.into(),
            };
        }
        if let Some((i, cpu)) = scenario.workloads.iter().enumerate().find_map(|(i, a)| {
            a.cpus
                .iter()
                .find(|c| self.topology.get(*c).is_none())
                .map(|c| (i, c))
        }) {
            return Err(Invalid(format!(
                "scenario workload {i} names CPU {cpu}, which does not exist"
            )));
        }
        self.check_l3_io_qos_cfg(&st.l3_io_qos_cfg)?;
        self.check_rmid_snc_config(&st.rmid_snc_config)?;
        self.amd_qos_load(&mut regs.amd, &st.amd).map_err(Invalid)?;
        self.mmio = self.restored_mmio(st.mmio.as_ref())?;
        self.l3_io_qos_cfg = st.l3_io_qos_cfg.iter().copied().collect();
        self.rmid_snc_config = st.rmid_snc_config.iter().copied().collect();
        self.regs = regs;
        self.counters = counters;
        self.pmu = pmu;
        self.scenario = scenario;
        self.now = Duration::from_nanos(st.now_ns);
        self.epoch = Duration::from_nanos(st.scenario_epoch_ns.min(st.now_ns));
        self.recompute();
        Ok(())
    }

    /// The MMIO model with `saved` restored (power-on registers without it: a state saved
    /// before MMIO registers were kept).
    fn restored_mmio(
        &self,
        saved: Option<&crate::mmio::MmioSaved>,
    ) -> Result<Option<Box<crate::mmio::MmioModel>>, Invalid> {
        Ok(match (self.mmio.as_deref(), saved) {
            (Some(m), Some(saved)) => Some(Box::new(m.restored(saved).map_err(Invalid)?)),
            (Some(m), None) => {
                let mut m = m.clone();
                m.reset_registers();
                Some(Box::new(m))
            }
            (None, Some(_)) => return Err(Invalid("the model has no MMIO registers".into())),
            (None, None) => None,
        })
    }

    /// Saves [`Self::save_state`] to `path` atomically: written to a temporary file in the
    /// same directory, then renamed over `path`.
    ///
    /// # Errors
    /// [`SimError::Io`] naming the file that could not be written or renamed.
    pub fn save_to(&self, path: impl AsRef<Path>) -> Result<(), SimError> {
        write_state(path.as_ref(), &self.save_state())
    }

    /// Restores the state saved in `path` by [`Self::save_to`].
    ///
    /// # Errors
    /// [`SimError::Io`] when the file cannot be read; otherwise as [`Self::restore_state`].
    pub fn load_from(&mut self, path: impl AsRef<Path>) -> Result<(), SimError> {
        let path = path.as_ref();
        self.restore_state(&read_state(path)?)
    }
}

/// The largest state file read, in bytes (64 MiB): the largest built-in model's state
/// (sapphire-rapids, 160 CPUs) is about 70 KiB.
pub const MAX_STATE_BYTES: u64 = 64 << 20;

/// The text of the state file at `path`, read with the bounded reader
/// ([`rdt_host::file::read_text`]): a regular file of at most [`MAX_STATE_BYTES`].
pub(crate) fn read_state(path: &Path) -> Result<String, SimError> {
    rdt_host::file::read_text(path, MAX_STATE_BYTES).map_err(|source| SimError::Io {
        op: "read",
        path: path.to_owned(),
        source,
    })
}

/// Writes `text` to `path` atomically: to `<path>.<pid>.tmp`, created anew (`O_EXCL`, so a
/// symlink planted at that name is not followed), then renamed over `path`.
pub(crate) fn write_state(path: &Path, text: &str) -> Result<(), SimError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let mut created = false;
    let mut write = || -> std::io::Result<()> {
        // A stale temporary file of a dead process with our pid: a regular file only.
        if std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.is_file()) {
            std::fs::remove_file(&tmp)?;
        }
        let mut f = std::fs::File::create_new(&tmp)?;
        created = true;
        f.write_all(text.as_bytes())?;
        f.sync_all()
    };
    if let Err(source) = write() {
        if created {
            let _ = std::fs::remove_file(&tmp);
        }
        return Err(SimError::Io {
            op: "write",
            path: tmp,
            source,
        });
    }
    std::fs::rename(&tmp, path).map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        SimError::Io {
            op: "rename to",
            path: path.to_owned(),
            source,
        }
    })
}
