//! Allocation: CAT masks (IA32_L3_QOS_MASK_n, IA32_L2_QOS_MASK_n), the CDP enable bits
//! (IA32_L3_QOS_CFG / IA32_L2_QOS_CFG), MBA and SMBA limits (Intel delays, AMD bandwidth
//! units), and the allocation reset (pqos `alloc_reset`).

use rdt_core::{
    AllocReset, BackendExt, CacheBitmask, CacheDomain, Capabilities, CatCaps, CatClass, CatMask,
    CatResource, ClassId, FeatureSetting, Interface, LimitError, LogicalCpu, MbaClass, MbaKind,
    MbaLimit, MbaResource, PmuSource, RequestError, ThreadThrottle, intel_mba_delay,
    intel_mba_percent,
};

use crate::regs::{
    self, AMD_MBA_BW_0, AMD_SMBA_BW_0, IA32_L2_QOS_CFG, IA32_L2_QOS_MASK_0, IA32_L3_QOS_CFG,
    IA32_L3_QOS_MASK_0, IA32_MBA_THRTL_0, IA32_PQR_ASSOC,
};
use crate::{MsrAddr, MsrError, MsrIo};

use super::MsrBackend;

fn cat_name(resource: CatResource) -> &'static str {
    match resource {
        CatResource::L3 => "L3 CAT",
        CatResource::L2 => "L2 CAT",
    }
}

fn cat_mut(caps: &mut Capabilities, resource: CatResource) -> Option<&mut CatCaps> {
    match resource {
        CatResource::L3 => caps.l3_cat.get_mut(),
        CatResource::L2 => caps.l2_cat.get_mut(),
    }
}

/// The index of a CAT resource in per-resource arrays.
const fn cdp_index(resource: CatResource) -> usize {
    match resource {
        CatResource::L3 => 0,
        CatResource::L2 => 1,
    }
}

/// (first mask register, QOS_CFG register) of a CAT resource.
const fn cat_regs(resource: CatResource) -> (MsrAddr, MsrAddr) {
    match resource {
        CatResource::L3 => (IA32_L3_QOS_MASK_0, IA32_L3_QOS_CFG),
        CatResource::L2 => (IA32_L2_QOS_MASK_0, IA32_L2_QOS_CFG),
    }
}

/// Mask registers in use: every class's one register, or two per usable class with CDP on.
const fn mask_registers(cat: &CatCaps) -> u32 {
    if cat.cdp_enabled {
        cat.usable_classes() * 2
    } else {
        cat.num_classes
    }
}

/// The value pqos's reset writes to every AMD MBA and SMBA class register: `0x800`
/// (`PQOS_MBA_MAX_AMD`, lib/cpu_registers.h, the AMD `cpuinfo_config`'s `mba_default_val`
/// that lib/allocation.c `hw_alloc_reset` writes for both), whatever the part's bandwidth
/// width. That is the "unlimited" bit of an 11-bit part (Milan, Genoa); on a part whose
/// width is 12 (the `turin` model: 2^12 = 4096) it is a limit of 2048 units (256 GB/s),
/// which pqos leaves there too.
const AMD_RESET_UNITS: u64 = 0x800;

/// The first AMD bandwidth-limit register of `resource` (one per class, 1/8 GB/s units):
/// `MSR_IA32_MBA_BW_BASE` 0xC000_0200 for MBA, `MSR_IA32_SMBA_BW_BASE` 0xC000_0280 for
/// SMBA (Linux `arch/x86/include/asm/msr-index.h`; AMD pub. 56375). SMBA is AMD's only, so
/// Intel's delay registers never need a resource.
const fn amd_bw_base(resource: MbaResource) -> MsrAddr {
    match resource {
        MbaResource::Mba => AMD_MBA_BW_0,
        MbaResource::Smba => AMD_SMBA_BW_0,
    }
}

impl<M: MsrIo, P: PmuSource> MsrBackend<M, P> {
    /// MBA 4.0 as pqos v23.11+ finds it (`lib/hw_cap.c` `detect_mba40`,
    /// `hw_cap_mba_discover`), for [`Capabilities::mba40`](rdt_core::Capabilities::mba40):
    /// on an Intel part with MBA, IA32_CORE_CAPABILITIES (0xCF) bit 10 of a CPU of each MBA
    /// domain (pqos reads every CPU of each; the parts are uniform, so the first of each
    /// domain is read here, which finds the same), a register the CPU lacks (EIO, where
    /// CPUID.(7,0):EDX\[30\] is clear) counting as no; then IA32_MBA_CFG (0xC84) bit 2 of one
    /// CPU per domain, the last domain's kept as pqos keeps it. `None` elsewhere.
    pub(super) fn read_mba40(&mut self) -> Option<bool> {
        if !matches!(
            self.caps.mba.get().map(|m| m.kind),
            Some(MbaKind::IntelDelay { .. })
        ) {
            return None;
        }
        let cpus: Vec<LogicalCpu> = self.l3.iter().map(|d| d.cpu).collect();
        let supported = cpus.iter().any(|&cpu| {
            self.io
                .read(cpu, regs::IA32_CORE_CAPABILITIES)
                .is_ok_and(|v| v & regs::CORE_CAPABILITIES_MBA40 != 0)
        });
        if !supported {
            return None;
        }
        let mut on = false;
        for &cpu in &cpus {
            on = self
                .io
                .read(cpu, regs::IA32_MBA_CFG)
                .is_ok_and(|v| v & regs::MBA_CFG_MBA40 != 0);
        }
        Some(on)
    }

    /// `-R mba40-on|off` (lib/allocation.c `hw_alloc_reset_mba40`): IA32_MBA_CFG bit 2 set
    /// or cleared, read-modify-write, on one CPU per MBA domain, where the extensions are
    /// not already so ([`Capabilities::mba40`](rdt_core::Capabilities::mba40)).
    fn set_mba40(&mut self, on: bool) -> Result<(), MsrError> {
        if self.caps.mba40 == Some(on) || self.caps.mba40.is_none() {
            return Ok(());
        }
        let cpus: Vec<LogicalCpu> = self.l3.iter().map(|d| d.cpu).collect();
        for cpu in cpus {
            let v = self.io.read(cpu, regs::IA32_MBA_CFG)?;
            let new = if on {
                v | regs::MBA_CFG_MBA40
            } else {
                v & !regs::MBA_CFG_MBA40
            };
            self.io.write(cpu, regs::IA32_MBA_CFG, new)?;
        }
        self.caps.mba40 = Some(on);
        Ok(())
    }

    /// L3 I/O RDT allocation as pqos v23.11+ finds it (`lib/hw_cap.c` `hw_cap_l3ca_iordt`),
    /// for [`Capabilities::l3_iordt`](rdt_core::Capabilities::l3_iordt): where the L3 CAT
    /// enumerates non-CPU agent allocation (CPUID.(10H,1):ECX\[1\]), IA32_L3_IO_QOS_CFG
    /// (0xC83) bit 0 of one CPU per L3 domain; on only if set in every domain (a register
    /// that cannot be read counts as clear; pqos refuses a mix, which a reset with
    /// `l3iordt-on|off` repairs). `None` elsewhere.
    pub(super) fn read_l3_iordt(&mut self) -> Option<bool> {
        if !self.caps.l3_cat.get().is_some_and(|c| c.io_rdt) {
            return None;
        }
        let cpus: Vec<LogicalCpu> = self.l3.iter().map(|d| d.cpu).collect();
        let on = cpus.iter().all(|&cpu| {
            self.io
                .read(cpu, regs::IA32_L3_IO_QOS_CFG)
                .is_ok_and(|v| v & regs::L3_IO_QOS_CA_EN != 0)
        });
        Some(on)
    }

    /// L3 I/O RDT monitoring as pqos v23.11+ finds it, for
    /// [`Capabilities::mon_iordt`](rdt_core::Capabilities::mon_iordt): where L3 monitoring
    /// enumerates non-CPU agents (CPUID.(0FH,1):EAX\[9\]/\[10\]), IA32_L3_IO_QOS_CFG
    /// (0xC83) bit 1 of the lowest CPU of every package; on only if set on every one (a
    /// register that cannot be read counts as clear). `None` elsewhere.
    pub(super) fn read_mon_iordt(&mut self) -> Option<bool> {
        if !self.caps.monitoring.get().is_some_and(|m| m.io_rdt) {
            return None;
        }
        let cpus = self.package_firsts();
        let on = cpus.iter().all(|&cpu| {
            self.io
                .read(cpu, regs::IA32_L3_IO_QOS_CFG)
                .is_ok_and(|v| v & regs::L3_IO_QOS_MON_EN != 0)
        });
        Some(on)
    }

    /// `-R l3iordt-on|off` (lib/allocation.c `hw_alloc_reset_l3iordt`):
    /// IA32_L3_IO_QOS_CFG bit 0 set or cleared, read-modify-write (the monitoring bit
    /// kept), on one CPU per L3 domain whose bit differs.
    fn set_l3_iordt(&mut self, on: bool) -> Result<(), MsrError> {
        if self.caps.l3_iordt.is_none() {
            return Ok(());
        }
        let cpus: Vec<LogicalCpu> = self.l3.iter().map(|d| d.cpu).collect();
        for cpu in cpus {
            let v = self.io.read(cpu, regs::IA32_L3_IO_QOS_CFG)?;
            let new = if on {
                v | regs::L3_IO_QOS_CA_EN
            } else {
                v & !regs::L3_IO_QOS_CA_EN
            };
            if new != v {
                self.io.write(cpu, regs::IA32_L3_IO_QOS_CFG, new)?;
            }
        }
        self.caps.l3_iordt = Some(on);
        Ok(())
    }

    /// Reads the CDP enable bit of `resource` in every domain into the capabilities and
    /// the split state. CDP on in some domains and off in others (a reset killed half-way)
    /// still opens: reads follow each domain's layout, mask writes are refused, and a reset
    /// that sets CDP on or off everywhere repairs it.
    pub(super) fn read_cdp(&mut self, resource: CatResource) -> Result<(), MsrError> {
        if !self.caps.cat(resource).is_some_and(|c| c.cdp_supported) {
            return Ok(());
        }
        let (_, cfg) = cat_regs(resource);
        let (mut on, mut off) = (Vec::new(), Vec::new());
        let list = match resource {
            CatResource::L3 => &self.l3,
            CatResource::L2 => &self.l2,
        };
        for d in list {
            let v = self.io.read(d.cpu, cfg)?; // QOS_CFG bit 0: CDP enabled
            if v & regs::QOS_CFG_CDP_ENABLE != 0 {
                on.push(d.id);
            } else {
                off.push(d.id);
            }
        }
        let split = !on.is_empty() && !off.is_empty();
        if let Some(cat) = cat_mut(&mut self.caps, resource) {
            cat.cdp_enabled = !on.is_empty() && !split;
        }
        self.cdp_split[cdp_index(resource)] = split.then_some(on);
        Ok(())
    }

    /// The CDP inconsistency this backend was opened with, if any: a message naming the
    /// domains with CDP on and off and the reset that repairs it. Until then the resource's
    /// masks are read per domain and cannot be written.
    #[must_use]
    pub fn cdp_inconsistency(&self) -> Option<String> {
        [CatResource::L3, CatResource::L2]
            .into_iter()
            .find_map(|r| self.cdp_split_error(r).map(|e| e.to_string()))
    }

    /// [`MsrError::Inconsistent`] for `resource` while its CDP state is split.
    fn cdp_split_error(&self, resource: CatResource) -> Option<MsrError> {
        let on = self.cdp_split[cdp_index(resource)].as_ref()?;
        let list = |v: &[CacheDomain]| {
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let off: Vec<CacheDomain> = self
            .domains(resource)
            .iter()
            .map(|d| d.id)
            .filter(|d| !on.contains(d))
            .collect();
        let r = resource.to_string().to_lowercase();
        Some(MsrError::Inconsistent(format!(
            "{resource} CDP is enabled in {resource} domains {} but disabled in {} (a reset \
             stopped half-way); reset allocation with -R {r}cdp-on or -R {r}cdp-off",
            list(on),
            list(&off),
        )))
    }

    fn cat_domain(&self, resource: CatResource, id: CacheDomain) -> Result<LogicalCpu, MsrError> {
        let which = match resource {
            CatResource::L3 => "L3",
            CatResource::L2 => "L2",
        };
        Self::domain(which, self.domains(resource), id)
    }

    fn read_mask(&mut self, cpu: LogicalCpu, addr: MsrAddr) -> Result<CacheBitmask, MsrError> {
        let value = self.io.read(cpu, addr)?;
        CacheBitmask::new(value).map_err(|_| MsrError::BadRegister {
            cpu,
            addr,
            value,
            what: "cache bitmask",
        })
    }

    /// Writes the full mask to every mask register of `resource` in use, in every domain.
    fn reset_masks(&mut self, resource: CatResource) -> Result<(), MsrError> {
        let Some(cat) = self.caps.cat(resource) else {
            return Ok(());
        };
        let (n, full) = (mask_registers(cat), cat.full_mask().bits());
        let (base, _) = cat_regs(resource);
        let cpus: Vec<LogicalCpu> = self.domains(resource).iter().map(|d| d.cpu).collect();
        for cpu in cpus {
            for i in 0..n {
                self.io.write(cpu, base.offset(i), full)?;
            }
        }
        Ok(())
    }

    /// Which CDP state `setting` asks for: `None` to leave the bit alone.
    fn cdp_target(
        &self,
        resource: CatResource,
        setting: FeatureSetting,
    ) -> Result<Option<bool>, MsrError> {
        if setting == FeatureSetting::Any {
            // a split CDP state has no "as is" to keep: the reset must choose
            return self.cdp_split_error(resource).map_or(Ok(None), Err);
        }
        let Some(cat) = self.caps.cat(resource) else {
            return Err(RequestError::Unsupported(format!(
                "{resource} CDP setting requested but {resource} CAT is not supported on this platform"
            )).into());
        };
        match (setting, cat.cdp_supported) {
            (FeatureSetting::On, false) => Err(RequestError::Unsupported(format!(
                "{resource} CDP requested but not supported by the platform"
            ))
            .into()),
            (_, false) => Ok(None), // off, and it cannot be on
            (s, true) => Ok(Some(s == FeatureSetting::On)),
        }
    }

    /// Sets or clears QOS_CFG bit 0 of `resource` in every domain; whether any bit changed.
    fn set_cdp(&mut self, resource: CatResource, on: bool) -> Result<bool, MsrError> {
        let (_, cfg) = cat_regs(resource);
        let cpus: Vec<LogicalCpu> = self.domains(resource).iter().map(|d| d.cpu).collect();
        let mut changed = false;
        for cpu in cpus {
            let old = self.io.read(cpu, cfg)?;
            // IA32_L3_QOS_CFG / IA32_L2_QOS_CFG bit 0: CDP enable; other bits kept.
            let new = if on {
                old | regs::QOS_CFG_CDP_ENABLE
            } else {
                old & !regs::QOS_CFG_CDP_ENABLE
            };
            if new != old {
                if let Err(e) = self.io.write(cpu, cfg, new) {
                    // Some domains may have switched: know which (best effort), so that
                    // reads follow them and a reset can repair the split.
                    let _ = self.read_cdp(resource);
                    return Err(e);
                }
                changed = true;
            }
        }
        if let Some(cat) = cat_mut(&mut self.caps, resource) {
            cat.cdp_enabled = on;
        }
        self.cdp_split[cdp_index(resource)] = None;
        Ok(changed)
    }

    /// Reads IA32_L3_QOS_MASK_n (0xC90 + n) or IA32_L2_QOS_MASK_n (0xD10 + n) on the lowest
    /// CPU of `domain`: one register per class with CDP off, data (2n) and code (2n + 1)
    /// with CDP on.
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) ([`LimitError::Unsupported`]) without that CAT,
    /// [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain), a read error, or [`MsrError::BadRegister`] for a zero mask.
    pub(super) fn read_cat_domain(
        &mut self,
        resource: CatResource,
        domain: CacheDomain,
    ) -> Result<Vec<CatClass>, MsrError> {
        let cat = self
            .caps
            .cat(resource)
            .ok_or(LimitError::Unsupported(cat_name(resource)))?;
        let cpu = self.cat_domain(resource, domain)?;
        let (n, cdp) = match &self.cdp_split[cdp_index(resource)] {
            // a split CDP state: this domain's own layout
            Some(on) if on.contains(&domain) => (cat.num_classes / 2, true),
            Some(_) => (cat.num_classes, false),
            None => (cat.usable_classes(), cat.cdp_enabled),
        };
        let (base, _) = cat_regs(resource);
        let mut out = Vec::with_capacity(n as usize);
        for class in 0..n {
            let mask = if cdp {
                let data = self.read_mask(cpu, base.offset(2 * class))?;
                let code = self.read_mask(cpu, base.offset(2 * class + 1))?;
                CatMask::Cdp { data, code }
            } else {
                CatMask::Unified(self.read_mask(cpu, base.offset(class))?)
            };
            out.push(CatClass {
                class: ClassId::new(class),
                mask,
            });
        }
        Ok(out)
    }

    /// Validates every class first ([`Capabilities::check_cat`]: class range, mask limits,
    /// mask kind against the CDP state) and domain, then writes the mask registers on the
    /// lowest CPU of each domain, in the order given.
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) for an unsupported resource, a class out of range or a mask the
    /// platform does not accept; [`RequestError::CdpMismatch`](rdt_core::RequestError::CdpMismatch); [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain);
    /// nothing is written in these cases. A write error ([`MsrError::Write`]) may leave
    /// earlier classes written.
    pub(super) fn write_cat_masks(
        &mut self,
        resource: CatResource,
        masks: &[(CacheDomain, CatClass)],
    ) -> Result<(), MsrError> {
        if self.caps.cat(resource).is_none() {
            return Err(LimitError::Unsupported(cat_name(resource)).into());
        }
        if let Some(e) = self.cdp_split_error(resource) {
            return Err(e);
        }
        let mut writes = Vec::with_capacity(masks.len());
        for (domain, c) in masks {
            let cpu = self.cat_domain(resource, *domain)?;
            self.caps.check_cat(resource, c)?;
            writes.push((cpu, c));
        }
        let (base, _) = cat_regs(resource);
        for (cpu, c) in writes {
            let n = c.class.get();
            match c.mask {
                CatMask::Unified(m) => self.io.write(cpu, base.offset(n), m.bits())?,
                CatMask::Cdp { data, code } => {
                    self.io.write(cpu, base.offset(2 * n), data.bits())?; // data: 2n
                    self.io.write(cpu, base.offset(2 * n + 1), code.bits())?; // code: 2n + 1
                }
            }
        }
        Ok(())
    }

    /// How the MBA limits of a core's threads combine in L3 `domain`, as the registers say:
    /// per thread on MBA 3.0; on per-core MBA 2.0 (more than 8 classes: the parts with
    /// IA32_MBA_CFG, as pqos `hw_cap_mba_discover` reads it) bit 0 of IA32_MBA_CFG on the
    /// lowest CPU of `domain`: set, the smaller delay; else (and on MBA 1.0) the larger.
    ///
    /// # Errors
    /// [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain); a read error.
    pub fn mba_thread_throttle(
        &mut self,
        domain: CacheDomain,
    ) -> Result<Option<ThreadThrottle>, MsrError> {
        let Some(m) = self.caps.mba.get() else {
            return Ok(None);
        };
        let from_cpuid = m.thread_throttle();
        if from_cpuid != Some(ThreadThrottle::Max) || m.num_classes <= 8 {
            return Ok(from_cpuid);
        }
        // per-core MBA 2.0: IA32_MBA_CFG bit 0 may select the smaller delay
        let cpu = Self::domain("MBA", &self.l3, domain)?;
        let cfg = self.io.read(cpu, regs::IA32_MBA_CFG)?;
        Ok(Some(if cfg & regs::MBA_CFG_MIN_DELAY == 0 {
            ThreadThrottle::Max
        } else {
            ThreadThrottle::Min
        }))
    }

    /// Intel MBA: reads the delay at 0xD50 + n and reports `100 - delay` percent. AMD:
    /// reads the bandwidth limit at 0xC000_0200 + n (MBA) or 0xC000_0280 + n (SMBA) in
    /// 1/8 GB/s units.
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) without the resource, [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain), or a read error.
    pub(super) fn read_bandwidth_domain(
        &mut self,
        resource: MbaResource,
        domain: CacheDomain,
    ) -> Result<Vec<MbaClass>, MsrError> {
        let name = resource.name();
        let mba = self
            .caps
            .bandwidth(resource)
            .get()
            .ok_or(LimitError::Unsupported(name))?;
        let (n, kind) = (mba.num_classes, mba.kind);
        let amd_base = amd_bw_base(resource);
        let cpu = Self::domain(name, &self.l3, domain)?;
        let mut out = Vec::with_capacity(n as usize);
        for class in 0..n {
            let limit = match kind {
                MbaKind::IntelDelay { .. } => {
                    let delay = self.io.read(cpu, IA32_MBA_THRTL_0.offset(class))?;
                    MbaLimit::Percent(u8::try_from(intel_mba_percent(delay)).unwrap_or(0))
                }
                MbaKind::AmdBandwidth { .. } => {
                    let raw = self.io.read(cpu, amd_base.offset(class))?;
                    MbaLimit::AmdUnits(u32::try_from(raw).unwrap_or(u32::MAX))
                }
            };
            out.push(MbaClass {
                class: ClassId::new(class),
                limit,
            });
        }
        Ok(out)
    }

    /// Intel: writes delay `100 - round(pct)` (rounded half up to the granularity, clipped
    /// to the maximum delay; pqos `hw_mba_set`) and returns `100 - readback`, e.g. with
    /// granularity 10: 75% -> delay 20 -> 80% applied, 5% -> delay 90 -> 10% applied.
    /// AMD: writes the units as given (1..=2^width) to 0xC000_0200 + n (MBA) or
    /// 0xC000_0280 + n (SMBA) and returns the readback.
    ///
    /// # Errors
    /// [`RequestError::Limit`](rdt_core::RequestError::Limit) for missing MBA, a class out of range or a value out of range
    /// (percent 0 or above 100; AMD units 0 or above 2^width); [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) for
    /// MiB/s limits (the kernel's `mba_MBps` controller, OS interface only), non-linear
    /// Intel MBA, or a limit of the other vendor's kind; [`RequestError::NoSuchDomain`](rdt_core::RequestError::NoSuchDomain). Nothing
    /// is written in these cases. A write or read error may leave earlier classes written.
    pub(super) fn write_bandwidth_limits(
        &mut self,
        resource: MbaResource,
        limits: &[(CacheDomain, MbaClass)],
    ) -> Result<Vec<(CacheDomain, MbaClass)>, MsrError> {
        let name = resource.name();
        let mba = self
            .caps
            .bandwidth(resource)
            .get()
            .ok_or(LimitError::Unsupported(name))?;
        let kind = mba.kind;
        let amd_base = amd_bw_base(resource);
        let mut writes = Vec::with_capacity(limits.len());
        for (domain, c) in limits {
            let cpu = Self::domain(name, &self.l3, *domain)?;
            self.caps
                .check_bandwidth_limit(Interface::Msr, resource, c.class, c.limit)?;
            // The unit and range are checked (check_mba_limit); what is left is the encoding.
            let (addr, value) = match (kind, c.limit) {
                (MbaKind::IntelDelay { linear: false, .. }, _) => {
                    return Err(RequestError::Unsupported(
                        "non-linear Intel MBA is not supported".into(),
                    )
                    .into());
                }
                (MbaKind::IntelDelay { max_delay, .. }, limit @ MbaLimit::Percent(_)) => {
                    // half up to the granularity, at most max_delay (MbaCaps::stored_limit)
                    let stored = mba.stored_limit(Interface::Msr, limit).value();
                    let delay = intel_mba_delay(stored).min(max_delay);
                    (IA32_MBA_THRTL_0.offset(c.class.get()), u64::from(delay))
                }
                (MbaKind::AmdBandwidth { .. }, MbaLimit::AmdUnits(u)) => {
                    (amd_base.offset(c.class.get()), u64::from(u))
                }
                (_, limit) => {
                    return Err(RequestError::Unsupported(format!(
                        "{name} limit {limit:#} has no encoding on this platform"
                    ))
                    .into());
                }
            };
            writes.push((*domain, cpu, c.class, addr, value));
        }
        let mut applied = Vec::with_capacity(writes.len());
        for (domain, cpu, class, addr, value) in writes {
            self.io.write(cpu, addr, value)?;
            let back = self.io.read(cpu, addr)?;
            let limit = match kind {
                MbaKind::IntelDelay { .. } => {
                    MbaLimit::Percent(u8::try_from(intel_mba_percent(back)).unwrap_or(0))
                }
                MbaKind::AmdBandwidth { .. } => {
                    MbaLimit::AmdUnits(u32::try_from(back).unwrap_or(u32::MAX))
                }
            };
            applied.push((domain, MbaClass { class, limit }));
        }
        Ok(applied)
    }

    /// pqos `alloc_reset`: every L3 and L2 mask register in use (two per class with CDP on)
    /// := all ways in every domain; every MBA class := no limit (Intel delay 0, AMD
    /// pqos's `0x800`, [`AMD_RESET_UNITS`]; AMD SMBA likewise); every CPU -> COS 0, RMIDs kept; then IA32_L3_QOS_CFG /
    /// IA32_L2_QOS_CFG bit 0 set or cleared on one CPU per domain as `cfg` asks, and if that
    /// changed CDP, the masks are set to all ways again for the new layout. Last, the record
    /// of named classes (`msr-classes`) is cut down to the names this process read from it
    /// ([`BackendExt::own_class_names`], which a reset's plan gives up): so after `pqos -R` no
    /// name holds a class of service.
    ///
    /// # Errors
    /// [`RequestError::Unsupported`](rdt_core::RequestError::Unsupported) before any write when CDP is requested on where it is not
    /// supported, a CDP setting is given without that CAT, or `mba_ctrl` is on (the kernel's
    /// software controller; OS interface only). A read or write error stops the reset
    /// part-way; [`MsrError::Names`] when the record cannot be written.
    pub(super) fn reset_alloc(&mut self, cfg: AllocReset) -> Result<(), MsrError> {
        if cfg.mba_ctrl == FeatureSetting::On {
            return Err(RequestError::Unsupported(
                "MBA CTRL requested but not supported by the MSR interface: the MBps controller \
                 (mba_MBps) needs the OS interface"
                    .into(),
            )
            .into());
        }
        let l3_cdp = self.cdp_target(CatResource::L3, cfg.l3_cdp)?;
        let l2_cdp = self.cdp_target(CatResource::L2, cfg.l2_cdp)?;
        if cfg.mba40 != FeatureSetting::Any && !self.caps.mba.is_present() {
            return Err(RequestError::Unsupported(
                "MBA 4.0 setting requested but no MBA present!".into(),
            )
            .into());
        }
        if cfg.l3_iordt != FeatureSetting::Any && !self.caps.l3_cat.is_present() {
            return Err(RequestError::Unsupported(
                "L3 I/O RDT setting requested but no L3 CAT present!".into(),
            )
            .into());
        }
        if cfg.l3_iordt == FeatureSetting::On && self.caps.l3_iordt.is_none() {
            return Err(RequestError::Unsupported(
                "L3 I/O RDT requested but not supported by the platform! \
                 (CPUID.(10H,1):ECX[1] clear)"
                    .into(),
            )
            .into());
        }
        if cfg.mba40 == FeatureSetting::On && self.caps.mba40.is_none() {
            return Err(RequestError::Unsupported(
                "MBA 4.0 extensions requested but not supported by the platform! \
                 (IA32_CORE_CAPABILITIES bit 10 clear on every CPU)"
                    .into(),
            )
            .into());
        }

        self.reset_masks(CatResource::L3)?;
        self.reset_masks(CatResource::L2)?;
        let mba_cpus: Vec<LogicalCpu> = self.l3.iter().map(|d| d.cpu).collect();
        for resource in MbaResource::ALL {
            let Some(mba) = self.caps.bandwidth(resource).get() else {
                continue;
            };
            let (base, value) = match (mba.kind, resource) {
                (MbaKind::IntelDelay { .. }, MbaResource::Mba) => (IA32_MBA_THRTL_0, 0), // delay 0: no throttling
                (MbaKind::IntelDelay { .. }, MbaResource::Smba) => continue, // SMBA is AMD only
                (MbaKind::AmdBandwidth { .. }, r) => (amd_bw_base(r), AMD_RESET_UNITS),
            };
            for &cpu in &mba_cpus {
                for i in 0..mba.num_classes {
                    self.io.write(cpu, base.offset(i), value)?;
                }
            }
        }
        let all: Vec<LogicalCpu> = self.topology.cpus().iter().map(|c| c.cpu).collect();
        for cpu in all {
            let old = self.io.read(cpu, IA32_PQR_ASSOC)?;
            if regs::pqr_cos(old) != 0 {
                self.io
                    .write(cpu, IA32_PQR_ASSOC, regs::pqr_with_cos(old, 0))?;
            }
        }
        for (resource, target) in [(CatResource::L3, l3_cdp), (CatResource::L2, l2_cdp)] {
            if let Some(on) = target
                && self.set_cdp(resource, on)?
            {
                self.reset_masks(resource)?;
            }
        }
        // last, as pqos's hw_alloc_reset toggles the extensions after CDP
        match cfg.mba40 {
            FeatureSetting::On => self.set_mba40(true)?,
            FeatureSetting::Off => self.set_mba40(false)?,
            FeatureSetting::Any => {}
        }
        // pqos's hw_alloc_reset switches L3 I/O RDT with the other L3 settings
        match cfg.l3_iordt {
            FeatureSetting::On => self.set_l3_iordt(true)?,
            FeatureSetting::Off => self.set_l3_iordt(false)?,
            FeatureSetting::Any => {}
        }
        // The record keeps only the names this process took from it, which the reset's
        // plan gives up next (Step::Release): a line it left out (a second name of one
        // class, a class beyond the class count) would otherwise hold its class of service
        // for the next process.
        let own = self.own_class_names();
        self.update_names(|v| v.retain(|entry| own.contains(entry)))
    }

    /// Why allocation can only be reset ([`MsrBackend::cdp_inconsistency`]), if it can.
    pub fn needs_reset(&self) -> Option<String> {
        self.cdp_inconsistency()
    }
}

#[cfg(test)]
mod tests;
