//! The built-in platform models (real CPUID dumps embedded in the crate) and loading a dump.

use std::sync::{Arc, OnceLock};

use rdt_core::{Capabilities, CpuidDump, Topology};

use crate::cpuid::SimCpuid;
use crate::mmio::{Generation, MmioModel};
use crate::synth::{self, Layout};
use crate::{SimError, SimPlatform};

/// Names of the built-in models, the default first.
///
/// | name | machine (dump in `crates/rdt-sim/models/`) | what it exercises |
/// |---|---|---|
/// | `broadwell-ep` | 2 × Xeon E5-2650L v4, 56 CPUs: 20-bit CBM, 16 COS, CDP, CMT + MBM, 24-bit counters, 35 MiB L3 per socket | the seed paper's commands |
/// | `skylake-sp` | 2 × Xeon Gold 6140, 72 CPUs: 11-bit CBM, CDP, MBA (subleaf patched, see [`crate::cpuid`]) | MBA |
/// | `milan` | 2 × EPYC 7763, 128 CPUs, SMT off: one 32 MiB L3 per 8-core CCX, 16-bit CBM, AMD MBA (11-bit units) | per-CCX domains, AMD |
/// | `sapphire-rapids` | Xeon Max 9460, 160 CPUs: 15-bit L3 CBM, L2 CAT (16 bits, 8 COS, CDP), MBA (max 90, 15 COS), 32-bit counters | L2 CAT |
/// | `sapphire-rapids-snc2` | the same machine with Sub-NUMA Clustering 2: 4 NUMA nodes; resctrl monitors per node (`mon_L3_XX/mon_sub_L3_YY`, `mon_L3_XX` files sum them, `num_rmids` halved) | SNC |
/// | `genoa` | 2 × EPYC 9654, 384 CPUs (every CPU captured, in the firmware's order: CPUs 0-7 on CCD 0, 8-15 on CCD 4, 16-23 on CCD 8, ...): 24 CCX L3 domains of 32 MiB, 16-bit CBM, MBA + SMBA, BMEC (`mbm_*_bytes_config`), no ABMC | scale, BMEC, SMBA |
/// | `turin` | stock EPYC 9655: 192 CPUs (96 cores, SMT on), 12 CCDs of 8 cores, one package (CPU 0 dumped with 64 cores and SMT off, the stock part synthesized): MBA + SMBA, BMEC, ABMC (32 assignable counters per domain), io_alloc (SDCIAE) | ABMC, io_alloc |
/// | `xeon-rdt13` | an RDT 1.3 Xeon: the `skylake-sp` CPUID (2 sockets, 72 CPUs) with the ACPI ERDT, MRRM and IRDT tables and the MMIO registers of RDT 1.3 synthesized: a CPU domain per socket, DDR (region 0) and CXL (region 1) memory, two I/O devices per socket | the MMIO interface, region-aware MBM/MBA, I/O RDT (its L3 CAT enumerates I/O RDT allocation: `-R l3iordt-on`, `-a channel:`/`dev:`) |
/// | `turin-dump` | EPYC 9655 as dumped: 64 CPUs (SMT off, 8 CCDs), one package (CPU 0 dumped, the others synthesized); RDT features as `turin` | ABMC, io_alloc on a smaller machine |
///
/// `milan`'s dump does not record leaf 0BH; the model synthesizes it per CPU. What every model
/// adds to its dump is in `crates/rdt-sim/models/PROVENANCE.md` and [`SimPlatform::notes`].
pub const BUILTIN_MODELS: &[&str] = &[
    "broadwell-ep",
    "skylake-sp",
    "milan",
    "sapphire-rapids",
    "sapphire-rapids-snc2",
    "genoa",
    "turin",
    "turin-dump",
    "xeon-rdt13",
];

/// The model `--sim` selects without a name.
pub const DEFAULT_MODEL: &str = "broadwell-ep";

struct Builtin {
    name: &'static str,
    text: &'static str,
    /// Base frequency in MHz where the dump records none (no leaf 16H, none in the brand).
    base_mhz: Option<u32>,
    /// The machine a single-CPU dump stands for ([`crate::synth::expand`]).
    layout: Option<Layout>,
    /// Sub-NUMA Clustering nodes per package (1: off).
    snc: u32,
    /// The RDT 1.3 parts the model carries ([`crate::mmio`]).
    mmio: Generation,
}

/// The Xeon Max 9460 dump, shared by `sapphire-rapids` and `sapphire-rapids-snc2`.
const SAPPHIRE_RAPIDS: &str =
    include_str!("../models/intel-xeon-max-9460_sapphire-rapids__hwloc.all.txt");

/// The EPYC 9655 InstLatx64 dump (CPU 0), shared by `turin` and `turin-dump`.
const TURIN: &str = include_str!("../models/amd-epyc-9655_turin__instlatx64.txt");

/// The 2 x Xeon Gold 6140 dump, shared by `skylake-sp` and `xeon-rdt13`.
const SKYLAKE_SP: &str = include_str!("../models/intel-xeon-gold-6140_skylake-sp__hwloc.all.txt");

const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "broadwell-ep",
        text: include_str!("../models/intel-xeon-e5-2650lv4_broadwell-ep__hwloc.all.txt"),
        base_mhz: None, // brand string: "@ 1.70GHz"
        layout: None,
        snc: 1,
        mmio: Generation::None,
    },
    Builtin {
        name: "skylake-sp",
        text: SKYLAKE_SP,
        base_mhz: None, // CPUID.16H:EAX = 2300
        layout: None,
        snc: 1,
        mmio: Generation::None,
    },
    Builtin {
        name: "milan",
        text: include_str!("../models/amd-epyc-7763_milan__hwloc.all.txt"),
        base_mhz: Some(2450), // EPYC 7763 base clock (AMD product page); the brand has none
        layout: None,
        snc: 1,
        mmio: Generation::None,
    },
    Builtin {
        name: "sapphire-rapids",
        text: SAPPHIRE_RAPIDS,
        base_mhz: None, // CPUID.16H:EAX = 2200
        layout: None,
        snc: 1,
        mmio: Generation::IrdtOnly,
    },
    Builtin {
        name: "sapphire-rapids-snc2",
        text: SAPPHIRE_RAPIDS,
        base_mhz: None,
        layout: None,
        snc: 2,
        mmio: Generation::None,
    },
    Builtin {
        name: "genoa",
        // every CPU of hwloc's AMD-19h-Zen4-2xEpyc-9654 (2 x 96 cores, SMT on), in the
        // firmware's CPU order
        text: include_str!("../models/amd-epyc-9654_genoa__hwloc.all.txt"),
        base_mhz: Some(2400), // EPYC 9654 base clock (AMD product page); the brand has none
        layout: None,
        snc: 1,
        mmio: Generation::None,
    },
    Builtin {
        name: "turin",
        text: TURIN,
        base_mhz: Some(2600), // EPYC 9655 base clock (AMD product page); the brand has none
        // The stock part (AMD product page: 96 cores, 192 threads, 384 MB L3; 12 CCDs of 8
        // cores with 32 MiB L3 each, one package), its CPUs numbered in the CCD order of the
        // EPYC 9654 capture (the same SP5 platform).
        layout: Some(Layout {
            packages: 1,
            ccx_per_package: 12,
            cores_per_ccx: 8,
            ccx_order: Some(synth::SP5_CCD_ORDER),
            stock_threads: Some(2),
        }),
        snc: 1,
        mmio: Generation::None,
    },
    Builtin {
        name: "turin-dump",
        text: TURIN,
        base_mhz: Some(2600),
        // What the dump's CPUID describes: 64 threads per package (8000_0008H:ECX[7:0] = 63),
        // SMT off (0BH.0:EBX = 1), 8 per L3 (8000_001DH.3): 8 CCDs of 8 cores, one package.
        layout: Some(Layout {
            packages: 1,
            ccx_per_package: 8,
            cores_per_ccx: 8,
            ccx_order: None,
            stock_threads: None,
        }),
        snc: 1,
        mmio: Generation::None,
    },
    Builtin {
        name: "xeon-rdt13",
        // No RDT 1.3 part has been captured: the CPUID (and so topology, CAT, MBA, RMIDs) of
        // the 2 x Xeon Gold 6140, with the RDT 1.3 tables and MMIO registers synthesized from
        // the specification (crate::mmio, models/PROVENANCE.md).
        text: SKYLAKE_SP,
        base_mhz: None,
        layout: None,
        snc: 1,
        mmio: Generation::Rdt13,
    },
];

/// FNV-1a, 64 bits: a stable identity for a dump's text in saved states.
fn fnv1a64(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A model's per-CPU CPUID: the dump with what [`synth`] completes, and the notes saying what
/// that was.
type Completed = (Arc<CpuidDump>, Vec<String>);

fn complete(model: &str, text: &str, layout: Option<Layout>) -> Result<Completed, SimError> {
    let mut dump = CpuidDump::parse(text).map_err(|source| SimError::Dump {
        model: model.into(),
        source,
    })?;
    let mut notes = Vec::new();
    if let Some((big, note)) = layout.and_then(|l| synth::expand(&dump, l)) {
        dump = big;
        notes.push(note);
    }
    if let Some((filled, note)) = synth::fill_leaf_0b(&dump) {
        dump = filled;
        notes.push(note);
    }
    Ok((Arc::new(dump), notes))
}

/// Each built-in model's [`Completed`] CPUID, made once per process: parsing `genoa`'s 384
/// blocks (1.2 MB) is most of the time opening it takes, and tests open the models often.
static COMPLETED: [OnceLock<Completed>; BUILTINS.len()] =
    [const { OnceLock::new() }; BUILTINS.len()];

fn build(model: &str, identity: &str, (dump, notes): Completed) -> Result<SimPlatform, SimError> {
    let topology = Topology::from_cpuid_dump(&dump).map_err(|source| SimError::Topology {
        model: model.into(),
        source,
    })?;
    let cpuid = SimCpuid::from_dump(dump);
    let caps = Capabilities::detect(&cpuid);
    let name = if model == "dump" {
        caps.brand.clone().unwrap_or_else(|| model.into())
    } else {
        model.into()
    };
    let mut p = SimPlatform::from_parts(&name, identity, cpuid, caps, topology)?;
    p.notes.extend(notes);
    Ok(p)
}

impl SimPlatform {
    /// A built-in model by name (one of [`BUILTIN_MODELS`]), running [`crate::Scenario::default`].
    /// The name may carry the `rdt=` boot parameter the kernel of the model boots with,
    /// `NAME:rdt=LIST` ([`crate::quirks::split_model_spec`]).
    ///
    /// # Examples
    /// ```
    /// use rdt_sim::SimPlatform;
    /// let sim = SimPlatform::builtin("broadwell-ep").unwrap();
    /// assert_eq!(sim.topology().cpus().len(), 56);
    /// ```
    ///
    /// # Errors
    /// [`SimError::UnknownModel`] for another name, [`SimError::RdtOptions`] for an `rdt=`
    /// list naming an unknown flag. The embedded dumps parse, so the other
    /// errors of [`SimPlatform::from_dump`] do not happen for built-in names.
    pub fn builtin(name: &str) -> Result<Self, SimError> {
        let (base, rdt) = crate::quirks::split_model_spec(name).map_err(SimError::RdtOptions)?;
        let (b, cell) = BUILTINS
            .iter()
            .zip(&COMPLETED)
            .find(|(b, _)| b.name == base)
            .ok_or_else(|| SimError::UnknownModel { name: name.into() })?;
        let completed = if let Some(done) = cell.get() {
            done.clone()
        } else {
            let done = complete(b.name, b.text, b.layout)?;
            // a thread that made it at the same time may have stored an equal one first
            let _ = cell.set(done.clone());
            done
        };
        let mut p = build(b.name, &format!("builtin:{}", b.name), completed)?;
        p.set_rdt_boot_options(rdt);
        if b.snc > 1 {
            p.enable_snc(b.snc);
            p.notes.push(format!(
                "Sub-NUMA Clustering (SNC{0}) as the BIOS option sets it, not in CPUID: {0} NUMA \
                 nodes per package (the lower and upper halves of its cores by core id); the L3 \
                 counts each node's traffic under its own share of the RMIDs (RMID + node x \
                 RMIDs/{0})",
                b.snc
            ));
        }
        if let Some(m) = MmioModel::new(&p, b.mmio) {
            p.notes.push(
                match b.mmio {
                    Generation::Rdt13 => "RDT 1.3 generation synthesized (no part captured): ACPI ERDT, MRRM and IRDT tables at sys/firmware/acpi/tables, CXL regions at sys/bus/cxl, MMIO registers at dev/mem; 70 % of each CPU's memory traffic to DDR (region 0), 30 % to CXL (region 1); the L3 CAT enumerates I/O RDT allocation (CPUID.(10H,1):ECX[1], IA32_L3_IO_QOS_CFG) for its I/O devices",
                    _ => "an ACPI IRDT table synthesized (I/O RDT devices and channels; CPUID does not enumerate I/O RDT on this part)",
                }
                .into(),
            );
            p.mmio = Some(Box::new(m));
            // an RDT 1.3 part has I/O RDT: its L3 CAT enumerates the I/O agents' allocation
            if b.mmio == Generation::Rdt13 {
                p.set_io_rdt(true);
            }
        }
        if let Some(mhz) = b.base_mhz {
            p.freq_hz = f64::from(mhz) * 1e6;
            p.notes.retain(|n| !n.contains("base frequency"));
            p.recompute();
        }
        Ok(p)
    }

    /// A model of the machine a canonical CPUID dump describes (format: the project's
    /// `tests/data/cpuid` README; a `.all.txt` dump gives every CPU and so the topology; a
    /// single-CPU dump gives a one-CPU platform). Its name is the dump's brand string.
    ///
    /// # Errors
    /// [`SimError::Dump`] when the text does not parse, [`SimError::Topology`] when the
    /// per-CPU leaves do not give a topology, [`SimError::NoRdt`] when the dump enumerates no
    /// simulable RDT/PQoS feature, [`SimError::Implausible`] when it claims absurd table
    /// sizes (2^31 RMIDs, thousands of classes).
    pub fn from_dump(text: &str) -> Result<Self, SimError> {
        build(
            "dump",
            &format!("dump:fnv1a64:{:016x}", fnv1a64(text)),
            complete("dump", text, None)?,
        )
    }
}

impl SimPlatform {
    /// Boots the model's kernel with the `rdt=` boot parameter `options` ([`crate::quirks`]):
    /// what resctrl shows from its next mount. The identity (saved states) gains
    /// `:rdt=LIST`, so a state saved under one boot does not load into another.
    pub fn set_rdt_boot_options(&mut self, options: crate::quirks::RdtOptions) {
        let base = self
            .identity
            .split_once(":rdt=")
            .map_or(self.identity.as_str(), |(b, _)| b)
            .to_owned();
        self.identity = crate::quirks::model_spec(&base, &options);
        self.rdt_boot = options;
    }

    /// The `rdt=` boot parameter of the model ([`SimPlatform::set_rdt_boot_options`]).
    #[must_use]
    pub const fn rdt_boot_options(&self) -> &crate::quirks::RdtOptions {
        &self.rdt_boot
    }

    /// The options the model's kernel applies: the boot parameter with the quirks of
    /// `__check_quirks_intel` set on top ([`crate::quirks::quirk_options`]).
    #[must_use]
    pub fn kernel_rdt_options(&self) -> crate::quirks::RdtOptions {
        self.rdt_boot
            .merged(&crate::quirks::quirk_options(self.capabilities()))
    }
}

#[cfg(test)]
mod tests {
    use rdt_core::{CpuidSource, LogicalCpu};

    use super::*;
    use crate::fs::SysfsTree;
    use crate::vfs::Tree;

    fn sysfs(t: &mut SysfsTree, path: &str) -> String {
        let text = String::from_utf8(t.read(path, 0, 4096).unwrap()).unwrap();
        text.trim_end().to_owned()
    }

    /// The capture's `(x2APIC id, 8000_001EH:EBX[7:0])` per logical CPU, read from its
    /// `# logical-cpu N` blocks (rows `0000000b 00000000 ...` and `8000001e 00000000 ...`).
    fn captured_ids(text: &str) -> Vec<(u32, u32)> {
        let mut ids = Vec::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let hex = |i: usize| u32::from_str_radix(f[i], 16).unwrap();
            if line.starts_with("# logical-cpu ") {
                assert_eq!(
                    f[2].parse::<usize>().unwrap(),
                    ids.len(),
                    "blocks in CPU order"
                );
                ids.push((u32::MAX, u32::MAX));
            } else if line.starts_with("0000000b 00000000 ") {
                ids.last_mut().unwrap().0 = hex(5);
            } else if line.starts_with("8000001e 00000000 ") {
                ids.last_mut().unwrap().1 = hex(3) & 0xff;
            }
        }
        ids
    }

    #[test]
    fn genoa_numbers_its_cpus_as_the_captured_machine_does() {
        // arrange
        let p = SimPlatform::builtin("genoa").unwrap();
        let mut t = SysfsTree::new(&p);
        let captured = captured_ids(include_str!("../models/amd-epyc-9654_genoa__hwloc.all.txt"));
        // act / assert: the capture's block of cpu8 reads
        // `0000000b 00000000 00000001 00000002 00000100 00000040` (x2APIC id 0x40) and
        // `8000001e 00000000 00000040 00000120 ...` (core id 0x20): CCD 4, core 32.
        assert_eq!(sysfs(&mut t, "cpu/cpu8/cache/index3/id"), "4");
        assert_eq!(sysfs(&mut t, "cpu/cpu8/topology/core_id"), "32");
        assert_eq!(
            sysfs(&mut t, "cpu/cpu8/cache/index3/shared_cpu_list"),
            "8-15,200-207"
        );
        // cpu95's block: `0000000b 00000000 ... 0000009e`, x2APIC id 158
        let apic = |n| p.cpuid().cpuid_on(LogicalCpu::new(n), 0xb, 0).unwrap().edx;
        assert_eq!(apic(95), 158);
        // CPUs 0-23: CCDs 0, 4 and 8, eight CPUs each (the firmware's interleave)
        for n in 0..24 {
            let l3 = sysfs(&mut t, &format!("cpu/cpu{n}/cache/index3/id"));
            assert_eq!(l3, ["0", "4", "8"][n / 8], "cpu{n}");
        }
        // every CPU: the capture's own core id (8000_001EH:EBX[7:0], the id the kernel took on
        // AMD before its x2APIC topology rework) and its x2APIC id
        assert_eq!(captured.len(), 384);
        for (n, &(x2apic, core)) in captured.iter().enumerate() {
            let cpu = u32::try_from(n).unwrap();
            let core_id = sysfs(&mut t, &format!("cpu/cpu{n}/topology/core_id"));
            assert_eq!(core_id, core.to_string(), "cpu{n}");
            assert_eq!(apic(cpu), x2apic, "cpu{n}");
        }
        assert_eq!(p.topology().l3_domains().len(), 24);
        assert_eq!(p.topology().packages(), [0, 1]);
    }

    #[test]
    fn sp5_ccd_order_is_the_order_of_the_genoa_capture() {
        // arrange
        let p = SimPlatform::builtin("genoa").unwrap();
        let l3 = |n: u32| {
            p.topology()
                .get(LogicalCpu::new(n))
                .unwrap()
                .l3
                .unwrap()
                .get()
        };
        // act: the L3 of the first CPU of each group of eight, package 0 and package 1
        let pkg0: Vec<u32> = (0..12).map(|k| l3(8 * k)).collect();
        let pkg1: Vec<u32> = (0..12).map(|k| l3(96 + 8 * k) - 16).collect();
        // assert
        assert_eq!(pkg0, synth::SP5_CCD_ORDER);
        assert_eq!(pkg1, synth::SP5_CCD_ORDER);
    }

    #[test]
    fn stock_turin_is_96_cores_in_12_ccds_and_the_dump_model_is_64_cpus() {
        // arrange / act
        let stock = SimPlatform::builtin("turin").unwrap();
        let dump = SimPlatform::builtin("turin-dump").unwrap();
        // assert: 192 CPUs, 12 L3 domains of 16 CPUs (8 cores x 2 threads), one package
        let topo = stock.topology();
        assert_eq!(topo.cpus().len(), 192);
        assert_eq!(topo.packages(), [0]);
        let domains = topo.l3_domains();
        assert_eq!(domains.len(), 12);
        for d in &domains {
            let sharing = topo.cpus().iter().filter(|c| c.l3 == Some(*d)).count();
            assert_eq!(sharing, 16, "L3 {d}");
        }
        let mut t = SysfsTree::new(&stock);
        assert_eq!(
            sysfs(&mut t, "cpu/cpu0/topology/thread_siblings_list"),
            "0,96"
        );
        assert_eq!(
            sysfs(&mut t, "cpu/cpu8/cache/index3/shared_cpu_list"),
            "8-15,104-111"
        );
        assert_eq!(sysfs(&mut t, "cpu/cpu8/cache/index3/id"), "4");
        assert_eq!(sysfs(&mut t, "cpu/cpu8/cache/index3/size"), "32768K");
        // the dump-faithful model: 64 CPUs, 8 L3 domains of 8
        assert_eq!(dump.topology().cpus().len(), 64);
        assert_eq!(dump.topology().l3_domains().len(), 8);
        // the same RDT features (ABMC with 32 counters, io_alloc, BMEC, SMBA) on both; only
        // the caches' sharing differs (SMT)
        let (s, d) = (stock.capabilities(), dump.capabilities());
        assert_eq!(
            (&s.monitoring, &s.l3_cat, &s.mba, &s.smba),
            (&d.monitoring, &d.l3_cat, &d.mba, &d.smba)
        );
        for sub in 0..=5 {
            let leaf = |p: &SimPlatform| p.cpuid().cpuid(0x8000_0020, sub);
            assert_eq!(leaf(&stock), leaf(&dump), "8000_0020H subleaf {sub}");
        }
    }
}
