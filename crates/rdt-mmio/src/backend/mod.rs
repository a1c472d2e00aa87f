//! The MMIO interface as an `rdt_core::Backend` (pqos v26.03 `--iface=mmio`), laid out by
//! concern like the MSR backend: [`alloc`] (region-aware MBA through the MARC registers),
//! [`monitoring`] (region-aware MBM through MMRC, LLC occupancy through CMRC). Association
//! of cores to a class and an RMID stays IA32_PQR_ASSOC, and L3 CAT stays
//! IA32_L3_QOS_MASK_n, on RDT 1.3 as before: pqos v26.03 keeps `hw_alloc_assoc_*` and
//! `hw_l3ca_*` for cores under the MMIO interface (`lib/mmio_allocation.c` covers MBA and
//! the I/O agents' CAT only), so [`MmioBackend`] is the MSR backend for those, with the
//! RDT 1.3 registers beside it.
//!
//! Domains: every L3 domain of the topology is mapped to the ERDT resource management
//! domain whose CPU agents (x2APIC ids, CACD) hold its CPUs; each CPU's x2APIC id is read
//! from IA32_X2APIC_APICID. A topology the ERDT does not cover, or an L3 split across
//! ERDT domains, is refused at open ([`MmioError::Topology`]).
//!
//! # References
//! Intel RDT Architecture Specification rev 1.3, ch. 3-4; intel-cmt-cat v26.03
//! `lib/mmio_allocation.c`, `lib/mmio_monitoring.c`, `lib/mmio.c` (read for facts).

pub mod alloc;
pub mod monitoring;

use std::collections::BTreeMap;
use std::io;

use rdt_core::{
    Backend, BackendError, CacheDomain, Capabilities, CatClass, CatResource, ClassId, CpuSet,
    GroupStartError, Interface, LogicalCpu, MbaClass, MbaResource, MonEvents, MonGroupId,
    MonValues, MsrOps, NamedClasses, PmuSource, RegionInfo, RegionOps, RequestError, Reset, Rmid,
    Topology, Writers,
};
use rdt_msr::regs::IA32_X2APIC_APICID;
use rdt_msr::{MsrBackend, MsrError, MsrIo};

use crate::erdt::{Domain, Erdt};
use crate::io::MmioIo;
use crate::tables::AcpiTables;

use self::monitoring::RegionGroup;

/// An error of the MMIO interface.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MmioError {
    /// A request the platform cannot carry out (invalid class, domain, value, ...).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The MSR side (association, L3 CAT, legacy counters) failed.
    #[error(transparent)]
    Msr(#[from] MsrError),
    /// A register access failed.
    #[error("MMIO {op} of register {addr:#x} ({what}) failed")]
    Register {
        /// `read` or `write`.
        op: &'static str,
        /// The physical address.
        addr: u64,
        /// Which register: `MARC max COS1 regions 0-3 of domain 0`.
        what: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The firmware's tables do not describe an MMIO interface for this host.
    #[error("the MMIO interface (RDT 1.3) is not available: {0}")]
    NotAvailable(String),
    /// The ERDT's domains do not match the CPU topology.
    #[error("the ACPI ERDT table does not match the CPU topology: {0}")]
    Topology(String),
}

impl BackendError for MmioError {
    fn request(&self) -> Option<&RequestError> {
        match self {
            Self::Request(r) => Some(r),
            Self::Msr(m) => m.request(),
            _ => None,
        }
    }
}

impl From<rdt_core::LimitError> for MmioError {
    fn from(e: rdt_core::LimitError) -> Self {
        Self::Request(e.into())
    }
}

/// One L3 domain's ERDT resource management domain.
#[derive(Clone, Debug)]
pub(crate) struct DomainMap {
    pub(crate) l3: CacheDomain,
    pub(crate) erdt: Domain,
}

/// The MMIO interface: the MSR backend (cores, L3 CAT, legacy MBA and counters) with the
/// RDT 1.3 registers the ERDT locates, reached through `D` (module docs).
pub struct MmioBackend<M: MsrIo, P: PmuSource, D: MmioIo> {
    msr: MsrBackend<M, P>,
    mem: D,
    erdt: Erdt,
    regions: Vec<RegionInfo>,
    domains: Vec<DomainMap>,
    groups: BTreeMap<MonGroupId, RegionGroup>,
}

impl<M: MsrIo, P: PmuSource, D: MmioIo> std::fmt::Debug for MmioBackend<M, P, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MmioBackend")
            .field("msr", &self.msr)
            .field("domains", &self.domains.len())
            .field("regions", &self.regions)
            .finish_non_exhaustive()
    }
}

impl<M: MsrIo, P: PmuSource, D: MmioIo> MmioBackend<M, P, D> {
    /// The MMIO interface over an opened MSR backend, the host's tables and its registers:
    /// checks that the ERDT and MRRM are there, that every CPU L3 domain has a resource
    /// management domain with MMRC, MARC and CMRC blocks, and maps the topology's L3
    /// domains to them (one IA32_X2APIC_APICID read per CPU). Writes nothing.
    ///
    /// # Errors
    /// [`MmioError::NotAvailable`] without ERDT or MRRM, or a domain without its register
    /// blocks; [`MmioError::Topology`] when a CPU is in no ERDT domain or an L3 spans two;
    /// [`MmioError::Msr`] when an x2APIC id cannot be read.
    pub fn new(msr: MsrBackend<M, P>, tables: &AcpiTables, mem: D) -> Result<Self, MmioError> {
        Self::with_x2apic_ids(msr, tables, mem, &BTreeMap::new())
    }

    /// As [`MmioBackend::new`], with the x2APIC ids the caller already read (by CPU, e.g.
    /// while building the topology from them): IA32_X2APIC_APICID is read only for the
    /// CPUs `known` lacks (on the 72-CPU `xeon-rdt13`, 72 reads fewer at start-up).
    ///
    /// # Errors
    /// As [`MmioBackend::new`].
    pub fn with_x2apic_ids(
        mut msr: MsrBackend<M, P>,
        tables: &AcpiTables,
        mem: D,
        known: &BTreeMap<LogicalCpu, u32>,
    ) -> Result<Self, MmioError> {
        let (Some(erdt), Some(_)) = (&tables.erdt, &tables.mrrm) else {
            return Err(MmioError::NotAvailable(
                "the firmware has no ACPI ERDT and MRRM tables \
                 (sys/firmware/acpi/tables/ERDT, MRRM)"
                    .into(),
            ));
        };
        let regions = tables
            .regions()
            .into_iter()
            .map(|r| RegionInfo {
                region: rdt_core::MemRegion(r.id.get()),
                memory: r.kind,
                bytes: r.ranges.iter().map(|(_, len)| *len).sum(),
            })
            .collect::<Vec<_>>();
        let mut of_l3: BTreeMap<CacheDomain, u16> = BTreeMap::new();
        let placements: Vec<_> = msr.topology().cpus().to_vec();
        for p in &placements {
            let Some(l3) = p.l3 else { continue };
            let apic = if let Some(&id) = known.get(&p.cpu) {
                id
            } else {
                let apic = msr.io_mut().read(p.cpu, IA32_X2APIC_APICID)?;
                u32::try_from(apic & 0xffff_ffff).unwrap_or(u32::MAX)
            };
            let d = erdt.domain_of_cpu(apic).ok_or_else(|| {
                MmioError::Topology(format!(
                    "CPU {} (x2APIC id {apic:#x}) is in no resource management domain",
                    p.cpu
                ))
            })?;
            match of_l3.insert(l3, d.id) {
                Some(other) if other != d.id => {
                    return Err(MmioError::Topology(format!(
                        "L3 domain {l3} has CPUs in ERDT domains {other} and {}",
                        d.id
                    )));
                }
                _ => {}
            }
        }
        let mut domains = Vec::with_capacity(of_l3.len());
        for (l3, id) in of_l3 {
            let d = erdt
                .domain(id)
                .ok_or_else(|| MmioError::Topology(format!("ERDT domain {id} vanished")))?;
            if d.mmrc.is_none() || d.marc.is_none() || d.cmrc.is_none() {
                return Err(MmioError::NotAvailable(format!(
                    "ERDT domain {id} (L3 {l3}) has no CMRC, MMRC or MARC register block"
                )));
            }
            domains.push(DomainMap {
                l3,
                erdt: d.clone(),
            });
        }
        Ok(Self {
            msr,
            mem,
            erdt: erdt.clone(),
            regions,
            domains,
            groups: BTreeMap::new(),
        })
    }

    /// The MSR backend inside (cores, L3 CAT, legacy MBA and counters).
    pub const fn msr_backend(&mut self) -> &mut MsrBackend<M, P> {
        &mut self.msr
    }

    /// The register access.
    pub const fn mem(&self) -> &D {
        &self.mem
    }

    /// The ERDT in use.
    pub const fn erdt(&self) -> &Erdt {
        &self.erdt
    }

    /// The ERDT domain of L3 `domain`, or the request error naming the domains there are.
    pub(crate) fn domain_of(&self, domain: CacheDomain) -> Result<&DomainMap, MmioError> {
        self.domains.iter().find(|d| d.l3 == domain).ok_or_else(|| {
            let known: Vec<String> = self.domains.iter().map(|d| d.l3.to_string()).collect();
            RequestError::Unsupported(format!(
                "L3 domain {domain} has no MMIO registers (domains: {})",
                known.join(",")
            ))
            .into()
        })
    }

    pub(crate) fn read_reg(
        &mut self,
        addr: u64,
        what: impl FnOnce() -> String,
    ) -> Result<u64, MmioError> {
        self.mem.read(addr).map_err(|source| MmioError::Register {
            op: "read",
            addr,
            what: what(),
            source,
        })
    }

    pub(crate) fn write_reg(
        &mut self,
        addr: u64,
        value: u64,
        what: impl FnOnce() -> String,
    ) -> Result<(), MmioError> {
        self.mem
            .write(addr, value)
            .map_err(|source| MmioError::Register {
                op: "write",
                addr,
                what: what(),
                source,
            })
    }
}

fn start_error(e: GroupStartError<MsrError>) -> GroupStartError<MmioError> {
    e.map(MmioError::from)
}

impl<M: MsrIo, P: PmuSource, D: MmioIo> Backend for MmioBackend<M, P, D> {
    type Error = MmioError;

    fn interface(&self) -> Interface {
        Interface::Mmio
    }

    fn capabilities(&self) -> &Capabilities {
        self.msr.capabilities()
    }

    fn topology(&self) -> &Topology {
        self.msr.topology()
    }

    fn cat_classes_in(
        &mut self,
        resource: CatResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<CatClass>>, MmioError> {
        Ok(self.msr.cat_classes_in(resource, domains)?)
    }

    fn set_cat_masks(
        &mut self,
        resource: CatResource,
        masks: &[(CacheDomain, CatClass)],
    ) -> Result<(), MmioError> {
        Ok(self.msr.set_cat_masks(resource, masks)?)
    }

    fn bandwidth_classes_in(
        &mut self,
        resource: MbaResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<MbaClass>>, MmioError> {
        Ok(self.msr.bandwidth_classes_in(resource, domains)?)
    }

    fn set_bandwidth_limits(
        &mut self,
        resource: MbaResource,
        limits: &[(CacheDomain, MbaClass)],
    ) -> Result<Vec<(CacheDomain, MbaClass)>, MmioError> {
        Ok(self.msr.set_bandwidth_limits(resource, limits)?)
    }

    fn associations_in(
        &mut self,
        cpus: &CpuSet,
    ) -> Result<Vec<(LogicalCpu, Result<(ClassId, Option<Rmid>), MmioError>)>, MmioError> {
        Ok(self
            .msr
            .associations_in(cpus)?
            .into_iter()
            .map(|(cpu, r)| (cpu, r.map_err(MmioError::from)))
            .collect())
    }

    fn associate_cpus(&mut self, cpus: &CpuSet, class: ClassId) -> Result<(), MmioError> {
        Ok(self.msr.associate_cpus(cpus, class)?)
    }

    /// Allocation: the MSR backend's reset, then every region MBA control of every class
    /// in every domain to the control window (pqos v26.03 `mmio_alloc_reset_mba`: optimal,
    /// minimum and maximum all to the full bandwidth). Monitoring: the MSR backend's.
    fn reset(&mut self, what: &Reset) -> Result<(), MmioError> {
        self.msr.reset(what)?;
        if matches!(what, Reset::Allocation(_)) {
            self.reset_region_mba()?;
        }
        Ok(())
    }

    fn start_monitoring_many(
        &mut self,
        groups: &[(CpuSet, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<MmioError>> {
        let ids = self
            .msr
            .start_monitoring_many(groups)
            .map_err(start_error)?;
        for (index, (id, (_, events))) in ids.iter().zip(groups).enumerate() {
            if let Err(error) = self.start_regions(*id, *events) {
                for id in &ids {
                    let _ = self.stop_monitoring(*id);
                }
                return Err(GroupStartError {
                    index,
                    of: groups.len(),
                    error,
                });
            }
        }
        Ok(ids)
    }

    fn poll(&mut self) -> Result<(), MmioError> {
        self.msr.poll()?;
        self.poll_regions()
    }

    fn values(&self, group: MonGroupId) -> Option<&MonValues> {
        match self.groups.get(&group) {
            Some(g) if g.values.is_some() => g.values.as_ref(),
            _ => self.msr.values(group),
        }
    }

    fn stop_monitoring(&mut self, group: MonGroupId) -> Result<(), MmioError> {
        self.groups.remove(&group);
        Ok(self.msr.stop_monitoring(group)?)
    }

    fn writers(&mut self) -> Option<&mut dyn Writers<MmioError>> {
        Some(&mut self.msr)
    }

    fn names(&mut self) -> Option<&mut dyn NamedClasses<MmioError>> {
        Some(&mut self.msr)
    }

    fn msr(&mut self) -> Option<&mut dyn MsrOps<MmioError>> {
        Some(&mut self.msr)
    }

    fn regions(&mut self) -> Option<&mut dyn RegionOps<MmioError>> {
        Some(self)
    }
}
