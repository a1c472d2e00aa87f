//! The built-in platform models (real CPUID dumps embedded in the crate) and loading a dump.

use std::sync::Arc;

use rdt_core::{Capabilities, CpuidDump, Topology};

use crate::cpuid::SimCpuid;
use crate::{SimError, SimPlatform};

/// Names of the built-in models, the default first.
///
/// | name | machine (dump in `crates/rdt-sim/models/`) | what it exercises |
/// |---|---|---|
/// | `broadwell-ep` | 2 × Xeon E5-2650L v4, 56 CPUs: 20-bit CBM, 16 COS, CDP, CMT + MBM, 24-bit counters, 35 MiB L3 per socket | the seed paper's commands |
/// | `skylake-sp` | 2 × Xeon Gold 6140, 72 CPUs: 11-bit CBM, CDP, MBA (subleaf patched, see [`crate::cpuid`]) | MBA |
/// | `milan` | 2 × EPYC 7763, 128 CPUs, SMT off: one 32 MiB L3 per 8-core CCX, 16-bit CBM, AMD MBA (11-bit units) | per-CCX domains, AMD |
/// | `sapphire-rapids` | Xeon Max 9460, 160 CPUs: 15-bit L3 CBM, L2 CAT (16 bits, 8 COS, CDP), MBA (max 90, 15 COS), 32-bit counters | L2 CAT |
pub const BUILTIN_MODELS: &[&str] = &["broadwell-ep", "skylake-sp", "milan", "sapphire-rapids"];

/// The model `--sim` selects without a name.
pub const DEFAULT_MODEL: &str = "broadwell-ep";

struct Builtin {
    name: &'static str,
    text: &'static str,
    /// Base frequency in MHz where the dump records none (no leaf 16H, none in the brand).
    base_mhz: Option<u32>,
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "broadwell-ep",
        text: include_str!("../models/intel-xeon-e5-2650lv4_broadwell-ep__hwloc.all.txt"),
        base_mhz: None, // brand string: "@ 1.70GHz"
    },
    Builtin {
        name: "skylake-sp",
        text: include_str!("../models/intel-xeon-gold-6140_skylake-sp__hwloc.all.txt"),
        base_mhz: None, // CPUID.16H:EAX = 2300
    },
    Builtin {
        name: "milan",
        text: include_str!("../models/amd-epyc-7763_milan__hwloc.all.txt"),
        base_mhz: Some(2450), // EPYC 7763 base clock (AMD product page); the brand has none
    },
    Builtin {
        name: "sapphire-rapids",
        text: include_str!("../models/intel-xeon-max-9460_sapphire-rapids__hwloc.all.txt"),
        base_mhz: None, // CPUID.16H:EAX = 2200
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

fn build(model: &str, identity: &str, text: &str) -> Result<SimPlatform, SimError> {
    let dump = CpuidDump::parse(text).map_err(|source| SimError::Dump {
        model: model.into(),
        source,
    })?;
    let topology = Topology::from_cpuid_dump(&dump).map_err(|source| SimError::Topology {
        model: model.into(),
        source,
    })?;
    let cpuid = SimCpuid::from_dump(Arc::new(dump));
    let caps = Capabilities::detect(&cpuid);
    let name = if model == "dump" {
        caps.brand.clone().unwrap_or_else(|| model.into())
    } else {
        model.into()
    };
    SimPlatform::from_parts(&name, identity, cpuid, caps, topology)
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
        let b = BUILTINS
            .iter()
            .find(|b| b.name == base)
            .ok_or_else(|| SimError::UnknownModel { name: name.into() })?;
        let mut p = build(b.name, &format!("builtin:{}", b.name), b.text)?;
        p.set_rdt_boot_options(rdt);
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
            text,
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
