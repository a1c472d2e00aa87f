//! libpqos's public types (intel-cmt-cat v26.03, `lib/pqos.h`, `PQOS_VERSION` 70000): the
//! structures with their fields in pqos.h's order and C types, the enums with pqos.h's
//! values, and the `#define`s. `include/pqos.h` is generated from this file (cbindgen,
//! `tests/header.rs` keeps it current); `tests/abi.rs` checks every size and offset against
//! the numbers Intel's header gives on x86-64.
//!
//! Enums passed by C (fields a program fills, arguments) are read as plain integers
//! ([`EnumInterface`] and its siblings: `enum pqos_interface` in the header): a value outside
//! the enum is then a `PQOS_RETVAL_PARAM`, never undefined behaviour in Rust.
//!
//! Structures of the MMIO generation and of I/O RDT that no built function reads or fills
//! (`struct pqos_erdt_info`, `pqos_mrrm_info`, `pqos_mmio_dump`, `pqos_mmio_dump_rmids`,
//! `pqos_pci_info`) are declared opaque: their functions refuse with `PQOS_RETVAL_RESOURCE`
//! without touching the memory, and a pointer to an opaque structure is the same type in C.

use std::ffi::{c_char, c_int, c_uint, c_void};

use libc::pid_t;

/// Library version: 7.0.0.
pub const PQOS_VERSION: c_uint = 70000;
/// Classes of service the fixed-size tables of programs hold (`PQOS_MAX_COS`).
pub const PQOS_MAX_COS: c_uint = 16;
/// `PQOS_MAX_L3CA_COS`.
pub const PQOS_MAX_L3CA_COS: c_uint = PQOS_MAX_COS;
/// `PQOS_MAX_L2CA_COS`.
pub const PQOS_MAX_L2CA_COS: c_uint = PQOS_MAX_COS;
/// `PQOS_MAX_COS` under the name intel-cmt-cat's header has from 7.1.0 (master after the
/// COS to CLOS rename), for programs written against it.
pub const PQOS_MAX_CLOS: c_uint = PQOS_MAX_COS;
/// `PQOS_MAX_L3CA_COS` under its 7.1.0 name.
pub const PQOS_MAX_L3CA_CLOS: c_uint = PQOS_MAX_COS;
/// `PQOS_MAX_L2CA_COS` under its 7.1.0 name.
pub const PQOS_MAX_L2CA_CLOS: c_uint = PQOS_MAX_COS;
/// Memory regions of region-aware MBM and MBA (MMIO interface).
pub const PQOS_MAX_MEM_REGIONS: usize = 4;
/// Bandwidth control types per memory region (optimal, minimum, maximum).
pub const PQOS_BW_CTRL_TYPE_COUNT: usize = 3;
/// Index of the optimal bandwidth control value.
pub const PQOS_BW_CTRL_TYPE_OPT_IDX: c_uint = 0;
/// Index of the minimum bandwidth control value.
pub const PQOS_BW_CTRL_TYPE_MIN_IDX: c_uint = 1;
/// Index of the maximum bandwidth control value.
pub const PQOS_BW_CTRL_TYPE_MAX_IDX: c_uint = 2;
/// Channels of one I/O RDT device.
pub const PQOS_DEV_MAX_CHANNELS: usize = 8;

/// Everything OK.
pub const PQOS_RETVAL_OK: c_int = 0;
/// Generic error.
pub const PQOS_RETVAL_ERROR: c_int = 1;
/// Parameter error.
pub const PQOS_RETVAL_PARAM: c_int = 2;
/// Resource error.
pub const PQOS_RETVAL_RESOURCE: c_int = 3;
/// Initialization error.
pub const PQOS_RETVAL_INIT: c_int = 4;
/// Transport error.
pub const PQOS_RETVAL_TRANSPORT: c_int = 5;
/// Performance counter error.
pub const PQOS_RETVAL_PERF_CTR: c_int = 6;
/// Resource busy.
pub const PQOS_RETVAL_BUSY: c_int = 7;
/// Interface not supported.
pub const PQOS_RETVAL_INTER: c_int = 8;
/// Data overflow.
pub const PQOS_RETVAL_OVERFLOW: c_int = 9;
/// Data not available.
pub const PQOS_RETVAL_UNAVAILABLE: c_int = 10;

/// Interface values.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pqos_interface {
    /// MSR.
    PQOS_INTER_MSR = 0,
    /// OS (resctrl).
    PQOS_INTER_OS = 1,
    /// OS with resctrl monitoring.
    PQOS_INTER_OS_RESCTRL_MON = 2,
    /// Auto detection.
    PQOS_INTER_AUTO = 3,
    /// MMIO (RDT 1.3).
    PQOS_INTER_MMIO = 4,
}

/// Requested state of an on/off feature.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pqos_feature_cfg {
    /// Feature status does not matter.
    PQOS_FEATURE_ANY = 0,
    /// Feature disabled.
    PQOS_FEATURE_OFF = 1,
    /// Feature enabled.
    PQOS_FEATURE_ON = 2,
}

/// Requested CDP state (values of [`pqos_feature_cfg`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pqos_cdp_config {
    /// Application not compatible with CDP.
    PQOS_REQUIRE_CDP_OFF = 1,
    /// Application requires CDP.
    PQOS_REQUIRE_CDP_ON = 2,
    /// Any CDP setting.
    PQOS_REQUIRE_CDP_ANY = 0,
}

/// Memory Bandwidth Allocation configuration.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pqos_mba_config {
    /// Currently enabled configuration.
    PQOS_MBA_ANY = 0,
    /// Direct MBA hardware configuration (percentage).
    PQOS_MBA_DEFAULT = 1,
    /// MBA controller configuration (MBps).
    PQOS_MBA_CTRL = 2,
}

/// Requested I/O RDT configuration.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pqos_iordt_config {
    /// Currently enabled configuration.
    PQOS_REQUIRE_IORDT_ANY = 0,
    /// I/O RDT disabled.
    PQOS_REQUIRE_IORDT_OFF = 1,
    /// I/O RDT enabled.
    PQOS_REQUIRE_IORDT_ON = 2,
}

/// SNC monitoring mode.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pqos_snc_mode {
    /// Monitor the local NUMA node only.
    PQOS_SNC_LOCAL = 0,
    /// Monitor all NUMA nodes.
    PQOS_SNC_TOTAL = 1,
}

/// Requested SNC configuration.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pqos_snc_config {
    /// Currently enabled configuration.
    PQOS_REQUIRE_SNC_ANY = 0,
    /// SNC monitoring local mode.
    PQOS_REQUIRE_SNC_LOCAL = 1,
    /// SNC monitoring total mode.
    PQOS_REQUIRE_SNC_TOTAL = 2,
}

/// Region-aware MBM and MBA modes (MMIO interface).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pqos_mbm_mba_modes {
    /// Region-aware MBM & MBA mode.
    PQOS_REGION_AWARE_MBM_MBA_MODE = 0,
    /// Total MBM & MBA mode.
    PQOS_TOTAL_MBM_MBA_MODE = 1,
}

/// Types of capabilities.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pqos_cap_type {
    /// Monitoring.
    PQOS_CAP_TYPE_MON = 0,
    /// L3 cache allocation.
    PQOS_CAP_TYPE_L3CA = 1,
    /// L2 cache allocation.
    PQOS_CAP_TYPE_L2CA = 2,
    /// Memory Bandwidth Allocation.
    PQOS_CAP_TYPE_MBA = 3,
    /// Slow Memory Bandwidth Allocation.
    PQOS_CAP_TYPE_SMBA = 4,
    /// Number of types.
    PQOS_CAP_TYPE_NUMOF = 5,
}

/// Monitoring events (bits; match CPUID enumeration).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pqos_mon_event {
    /// LLC occupancy.
    PQOS_MON_EVENT_L3_OCCUP = 1,
    /// Local memory bandwidth.
    PQOS_MON_EVENT_LMEM_BW = 2,
    /// Total memory bandwidth.
    PQOS_MON_EVENT_TMEM_BW = 4,
    /// Remote memory bandwidth (virtual event).
    PQOS_MON_EVENT_RMEM_BW = 8,
    /// I/O LLC occupancy.
    PQOS_MON_EVENT_IO_L3_OCCUP = 0x10,
    /// I/O total memory bandwidth.
    PQOS_MON_EVENT_IO_TOTAL_MEM_BW = 0x20,
    /// I/O miss memory bandwidth.
    PQOS_MON_EVENT_IO_MISS_MEM_BW = 0x40,
    /// Reserved.
    RESERVED1 = 0x1000,
    /// Reserved.
    RESERVED2 = 0x2000,
    /// LLC misses.
    PQOS_PERF_EVENT_LLC_MISS = 0x4000,
    /// Instructions per clock.
    PQOS_PERF_EVENT_IPC = 0x8000,
    /// LLC references.
    PQOS_PERF_EVENT_LLC_REF = 0x10000,
    /// DDIO LLC read misses.
    PQOS_PERF_EVENT_LLC_MISS_PCIE_READ = 0x10_0000,
    /// DDIO LLC write misses.
    PQOS_PERF_EVENT_LLC_MISS_PCIE_WRITE = 0x20_0000,
    /// DDIO LLC read references.
    PQOS_PERF_EVENT_LLC_REF_PCIE_READ = 0x40_0000,
    /// DDIO LLC write references.
    PQOS_PERF_EVENT_LLC_REF_PCIE_WRITE = 0x80_0000,
    /// Core energy (OS telemetry).
    PQOS_MON_EVENT_CORE_ENERGY = 0x100_0000,
    /// Activity counter (OS telemetry).
    PQOS_MON_EVENT_ACTIVITY = 0x200_0000,
    /// Power (synthetic, OS telemetry).
    PQOS_MON_EVENT_POWER = 0x400_0000,
}

/// CPU vendors.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pqos_vendor {
    /// Unknown.
    PQOS_VENDOR_UNKNOWN = 0,
    /// Intel.
    PQOS_VENDOR_INTEL = 1,
    /// AMD.
    PQOS_VENDOR_AMD = 2,
    /// Hygon.
    PQOS_VENDOR_HYGON = 3,
}

/// I/O RDT device types.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum pqos_dev_type {
    /// PCI device.
    PQOS_DEVICE_TYPE_PCI = 1,
    /// PCI bridge.
    PQOS_DEVICE_TYPE_PCI_BRIDGE = 2,
}

/// `enum pqos_interface` as C passes it (read as an integer, checked).
pub type EnumInterface = c_uint;
/// `enum pqos_cdp_config` as C passes it.
pub type EnumCdpConfig = c_uint;
/// `enum pqos_feature_cfg` as C passes it.
pub type EnumFeatureCfg = c_uint;
/// `enum pqos_mba_config` as C passes it.
pub type EnumMbaConfig = c_uint;
/// `enum pqos_iordt_config` as C passes it.
pub type EnumIordtConfig = c_uint;
/// `enum pqos_snc_mode` as C reads it.
pub type EnumSncMode = c_uint;
/// `enum pqos_snc_config` as C passes it.
pub type EnumSncConfig = c_uint;
/// `enum pqos_cap_type` as C passes it.
pub type EnumCapType = c_uint;
/// `enum pqos_mon_event` as C passes it (a set of bits).
pub type EnumMonEvent = c_uint;
/// `enum pqos_vendor` as C reads it.
pub type EnumVendor = c_uint;
/// `enum pqos_dev_type` as C reads it.
pub type EnumDevType = c_uint;

/// Resource Monitoring ID.
pub type pqos_rmid_t = u32;
/// I/O RDT channel ID.
pub type pqos_channel_t = u64;

/// The log callback of [`pqos_config`]: context, message length, message.
pub type pqos_log_callback = Option<unsafe extern "C" fn(*mut c_void, usize, *const c_char)>;

/// Library configuration (`pqos_init`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_config {
    /// File descriptor the library logs to (used when `callback_log` is NULL).
    pub fd_log: c_int,
    /// Application callback receiving each log message.
    pub callback_log: pqos_log_callback,
    /// Context handed to `callback_log`.
    pub context_log: *mut c_void,
    /// Verbosity: -1 silent, 0 warnings and errors, 1 info, 2 debug.
    pub verbose: c_int,
    /// Interface preference.
    pub interface: EnumInterface,
}

/// L3 cache allocation capability.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pqos_cap_l3ca {
    /// Byte size of the structure.
    pub mem_size: c_uint,
    /// Number of classes of service.
    pub num_classes: c_uint,
    /// Number of cache ways (CBM length).
    pub num_ways: c_uint,
    /// Way size in bytes.
    pub way_size: c_uint,
    /// Ways contention (shareable) bit mask.
    pub way_contention: u64,
    /// CDP supported.
    pub cdp: c_int,
    /// CDP on.
    pub cdp_on: c_int,
    /// Non-contiguous CBM supported.
    pub non_contiguous_cbm: c_uint,
    /// I/O RDT supported.
    pub iordt: c_int,
    /// I/O RDT on.
    pub iordt_on: c_int,
}

/// L2 cache allocation capability.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pqos_cap_l2ca {
    /// Byte size of the structure.
    pub mem_size: c_uint,
    /// Number of classes of service.
    pub num_classes: c_uint,
    /// Number of cache ways (CBM length).
    pub num_ways: c_uint,
    /// Way size in bytes.
    pub way_size: c_uint,
    /// Ways contention (shareable) bit mask.
    pub way_contention: u64,
    /// CDP supported.
    pub cdp: c_int,
    /// CDP on.
    pub cdp_on: c_int,
    /// Non-contiguous CBM supported.
    pub non_contiguous_cbm: c_uint,
}

/// Memory bandwidth allocation capability (MBA and SMBA).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pqos_cap_mba {
    /// Byte size of the structure.
    pub mem_size: c_uint,
    /// Number of classes of service.
    pub num_classes: c_uint,
    /// Maximum throttling.
    pub throttle_max: c_uint,
    /// Granularity.
    pub throttle_step: c_uint,
    /// Linear throttling.
    pub is_linear: c_int,
    /// MBA controller supported (-1: unknown).
    pub ctrl: c_int,
    /// MBA controller on.
    pub ctrl_on: c_int,
    /// MBA 4.0 extensions supported.
    pub mba40: c_int,
    /// MBA 4.0 extensions on.
    pub mba40_on: c_int,
}

/// One monitoring event's capability.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_monitor {
    /// Event.
    pub r#type: EnumMonEvent,
    /// Maximum RMID for this event.
    pub max_rmid: c_uint,
    /// Factor scaling the counter to bytes.
    pub scale_factor: u32,
    /// Counter width in bits.
    pub counter_length: c_uint,
    /// I/O RDT monitoring supported.
    pub iordt: c_int,
}

/// Monitoring capability, followed by `num_events` [`pqos_monitor`]s.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_cap_mon {
    /// Byte size of the structure with its events.
    pub mem_size: c_uint,
    /// Maximum RMID.
    pub max_rmid: c_uint,
    /// L3 size in bytes.
    pub l3_size: c_uint,
    /// Number of events.
    pub num_events: c_uint,
    /// I/O RDT monitoring supported.
    pub iordt: c_int,
    /// I/O RDT monitoring on.
    pub iordt_on: c_int,
    /// Number of monitoring clusters (SNC).
    pub snc_num: c_uint,
    /// SNC mode.
    pub snc_mode: EnumSncMode,
    /// The events.
    pub events: [pqos_monitor; 0],
}

/// The capability a [`pqos_capability`] points at.
#[repr(C)]
#[derive(Clone, Copy)]
pub union pqos_capability_u {
    /// Monitoring.
    pub mon: *mut pqos_cap_mon,
    /// L3 CAT.
    pub l3ca: *mut pqos_cap_l3ca,
    /// L2 CAT.
    pub l2ca: *mut pqos_cap_l2ca,
    /// MBA.
    pub mba: *mut pqos_cap_mba,
    /// SMBA.
    pub smba: *mut pqos_cap_mba,
    /// Any of them.
    pub generic_ptr: *mut c_void,
}

impl std::fmt::Debug for pqos_capability_u {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: every member is a pointer of the same size; reading it as `void *` is
        // what C's union allows.
        let p = unsafe { self.generic_ptr };
        write!(f, "{p:p}")
    }
}

/// One capability: its type and a pointer to it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_capability {
    /// Which capability.
    pub r#type: EnumCapType,
    /// The capability.
    pub u: pqos_capability_u,
}

/// Every capability, followed by `num_cap` [`pqos_capability`]s.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_cap {
    /// Byte size of the structure with its capabilities.
    pub mem_size: c_uint,
    /// Library version.
    pub version: c_uint,
    /// Number of capabilities.
    pub num_cap: c_uint,
    /// The capabilities.
    pub capabilities: [pqos_capability; 0],
}

/// One logical core.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct pqos_coreinfo {
    /// Logical core id.
    pub lcore: c_uint,
    /// Socket id.
    pub socket: c_uint,
    /// L3 cluster id.
    pub l3_id: c_uint,
    /// L2 cluster id.
    pub l2_id: c_uint,
    /// L3 CAT classes id.
    pub l3cat_id: c_uint,
    /// MBA id.
    pub mba_id: c_uint,
    /// NUMA node.
    pub numa: c_uint,
    /// SMBA id.
    pub smba_id: c_uint,
}

/// One cache level.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pqos_cacheinfo {
    /// Cache detected and valid.
    pub detected: c_int,
    /// Ways.
    pub num_ways: c_uint,
    /// Sets.
    pub num_sets: c_uint,
    /// Partitions.
    pub num_partitions: c_uint,
    /// Line size in bytes.
    pub line_size: c_uint,
    /// Total size in bytes.
    pub total_size: c_uint,
    /// Way size in bytes.
    pub way_size: c_uint,
}

/// CPU topology, followed by `num_cores` [`pqos_coreinfo`]s.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_cpuinfo {
    /// Byte size of the structure with its cores.
    pub mem_size: c_uint,
    /// L2 cache.
    pub l2: pqos_cacheinfo,
    /// L3 cache.
    pub l3: pqos_cacheinfo,
    /// Vendor.
    pub vendor: EnumVendor,
    /// Number of logical cores.
    pub num_cores: c_uint,
    /// The cores.
    pub cores: [pqos_coreinfo; 0],
}

/// One I/O RDT channel.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_channel {
    /// Channel ID.
    pub channel_id: pqos_channel_t,
    /// RMID tagging supported.
    pub rmid_tagging: c_int,
    /// CLOS tagging supported.
    pub clos_tagging: c_int,
    /// CXL device.
    pub cxld: c_int,
    /// MMIO physical address.
    pub mmio_addr: u64,
    /// NUMA node.
    pub numa: c_uint,
}

/// One I/O RDT device.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_dev {
    /// Device type.
    pub r#type: EnumDevType,
    /// PCI segment.
    pub segment: u16,
    /// Bus, device, function.
    pub bdf: u16,
    /// Its channels (valid where non-zero).
    pub channel: [pqos_channel_t; PQOS_DEV_MAX_CHANNELS],
}

/// I/O RDT devices and channels.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_devinfo {
    /// Number of channels.
    pub num_channels: c_uint,
    /// The channels.
    pub channels: *mut pqos_channel,
    /// Number of devices.
    pub num_devs: c_uint,
    /// The devices.
    pub devs: *mut pqos_dev,
}

/// ERDT ACPI table (MMIO generation; opaque here).
#[derive(Debug)]
pub struct pqos_erdt_info {
    _opaque: [u8; 0],
}

/// MRRM ACPI table (MMIO generation; opaque here).
#[derive(Debug)]
pub struct pqos_mrrm_info {
    _opaque: [u8; 0],
}

/// MMIO dump request (opaque here: `pqos_dump` is refused).
#[derive(Debug)]
pub struct pqos_mmio_dump {
    _opaque: [u8; 0],
}

/// MMIO RMID dump request (opaque here: `pqos_dump_rmids` is refused).
#[derive(Debug)]
pub struct pqos_mmio_dump_rmids {
    _opaque: [u8; 0],
}

/// PCI information of an I/O device (opaque here: `pqos_io_devs_get` is refused).
#[derive(Debug)]
pub struct pqos_pci_info {
    _opaque: [u8; 0],
}

/// Library-internal data of a monitoring group (opaque).
#[derive(Debug)]
pub struct pqos_mon_data_internal {
    _opaque: [u8; 0],
}

/// Cores to domains mapping.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_cores_domains {
    /// Number of cores.
    pub num_cores: c_uint,
    /// Domain of each core.
    pub domains: *mut u16,
}

/// Channels to domains mapping.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_channels_domains {
    /// Number of channel ids.
    pub num_channel_ids: c_uint,
    /// Channel ids.
    pub channel_ids: *mut pqos_channel_t,
    /// Domain ids.
    pub domain_ids: *mut u16,
    /// Domain id indexes.
    pub domain_id_idxs: *mut u16,
}

/// System configuration.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_sysconfig {
    /// Capabilities.
    pub cap: *mut pqos_cap,
    /// CPU topology.
    pub cpu: *mut pqos_cpuinfo,
    /// I/O devices (NULL: no I/O RDT).
    pub dev: *mut pqos_devinfo,
    /// ERDT table (NULL: no MMIO interface).
    pub erdt: *mut pqos_erdt_info,
    /// MRRM table (NULL: no MMIO interface).
    pub mrrm: *mut pqos_mrrm_info,
    /// Cores to domains (NULL: no MMIO interface).
    pub cores_domains: *mut pqos_cores_domains,
    /// Channels to domains (NULL: no MMIO interface).
    pub channels_domains: *mut pqos_channels_domains,
}

/// Monitoring values of every event.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct pqos_event_values {
    /// LLC occupancy, bytes.
    pub llc: u64,
    /// Local memory bandwidth, reading (bytes).
    pub mbm_local: u64,
    /// Total memory bandwidth, reading (bytes).
    pub mbm_total: u64,
    /// Remote memory bandwidth, reading (bytes).
    pub mbm_remote: u64,
    /// Local memory bandwidth, delta (bytes).
    pub mbm_local_delta: u64,
    /// Total memory bandwidth, delta (bytes).
    pub mbm_total_delta: u64,
    /// Remote memory bandwidth, delta (bytes).
    pub mbm_remote_delta: u64,
    /// Instructions retired, reading.
    pub ipc_retired: u64,
    /// Instructions retired, delta.
    pub ipc_retired_delta: u64,
    /// Unhalted cycles, reading.
    pub ipc_unhalted: u64,
    /// Unhalted cycles, delta.
    pub ipc_unhalted_delta: u64,
    /// Retired instructions / cycles.
    pub ipc: f64,
    /// LLC misses, reading.
    pub llc_misses: u64,
    /// LLC misses, delta.
    pub llc_misses_delta: u64,
    /// LLC references, reading.
    pub llc_references: u64,
    /// LLC references, delta.
    pub llc_references_delta: u64,
}

/// Region-aware monitoring values (MMIO interface).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pqos_region_aware_event_values {
    /// Total bandwidth per region, reading.
    pub mbm_total: [u64; PQOS_MAX_MEM_REGIONS],
    /// Total bandwidth per region, delta.
    pub mbm_total_delta: [u64; PQOS_MAX_MEM_REGIONS],
    /// I/O LLC occupancy.
    pub io_llc: u64,
    /// I/O total bandwidth, reading.
    pub io_total: u64,
    /// I/O total bandwidth, delta.
    pub io_total_delta: u64,
    /// I/O miss bandwidth, reading.
    pub io_miss: u64,
    /// I/O miss bandwidth, delta.
    pub io_miss_delta: u64,
}

/// Memory regions of a monitoring group (MMIO interface).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pqos_mon_mem_region {
    /// Region numbers.
    pub region_num: [c_int; PQOS_MAX_MEM_REGIONS],
    /// Number of regions.
    pub num_mem_regions: c_int,
}

/// A monitoring group.
#[repr(C)]
#[derive(Debug)]
pub struct pqos_mon_data {
    /// Validity marker.
    pub valid: c_int,
    /// Monitored events.
    pub event: EnumMonEvent,
    /// Application context.
    pub context: *mut c_void,
    /// Values of the last poll.
    pub values: pqos_event_values,
    /// Number of pids.
    pub num_pids: c_uint,
    /// The pids.
    pub pids: *mut pid_t,
    /// Number of thread ids.
    pub tid_nr: c_uint,
    /// The thread ids.
    pub tid_map: *mut pid_t,
    /// The cores.
    pub cores: *mut c_uint,
    /// Number of cores.
    pub num_cores: c_uint,
    /// The channels.
    pub channels: *mut pqos_channel_t,
    /// Number of channels.
    pub num_channels: c_uint,
    /// Library-internal data.
    pub intl: *mut pqos_mon_data_internal,
    /// Region-aware values.
    pub region_values: pqos_region_aware_event_values,
    /// Memory regions.
    pub regions: pqos_mon_mem_region,
}

/// Monitoring reset configuration.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_mon_config {
    /// Requested I/O RDT configuration.
    pub l3_iordt: EnumIordtConfig,
    /// Requested SNC configuration.
    pub snc: EnumSncConfig,
}

/// Allocation reset configuration.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_alloc_config {
    /// Requested L3 CDP.
    pub l3_cdp: EnumCdpConfig,
    /// Requested L2 CDP.
    pub l2_cdp: EnumCdpConfig,
    /// Requested MBA configuration.
    pub mba: EnumMbaConfig,
    /// Requested MBA 4.0.
    pub mba40: EnumFeatureCfg,
    /// Requested L3 I/O RDT.
    pub l3_iordt: EnumIordtConfig,
    /// Requested SMBA configuration.
    pub smba: EnumMbaConfig,
    /// Reserved.
    pub reserved: [c_int; 4],
}

/// Data and code masks of a CDP class.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct pqos_ca_masks {
    /// Data mask.
    pub data_mask: u64,
    /// Code mask.
    pub code_mask: u64,
}

/// The masks of a cache allocation class: one, or data and code with CDP.
#[repr(C)]
#[derive(Clone, Copy)]
pub union pqos_ca_u {
    /// Ways mask (CDP off).
    pub ways_mask: u64,
    /// Data and code masks (CDP on).
    pub s: pqos_ca_masks,
}

impl std::fmt::Debug for pqos_ca_u {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: both members are plain integers; `s` covers the whole union.
        let s = unsafe { self.s };
        write!(f, "{s:?}")
    }
}

/// An L3 cache allocation class.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_l3ca {
    /// Resource management domain id (MMIO interface).
    pub domain_id: u16,
    /// Class of service.
    pub class_id: c_uint,
    /// Data and code masks used.
    pub cdp: c_int,
    /// The masks.
    pub u: pqos_ca_u,
}

/// An L2 cache allocation class.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pqos_l2ca {
    /// Class of service.
    pub class_id: c_uint,
    /// Data and code masks used.
    pub cdp: c_int,
    /// The masks.
    pub u: pqos_ca_u,
}

/// Bandwidth controls of one memory region (MMIO interface).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pqos_mba_mem_region {
    /// Optimal, minimum, maximum (-1: invalid).
    pub bw_ctrl_val: [c_int; PQOS_BW_CTRL_TYPE_COUNT],
    /// Region number (-1: invalid).
    pub region_num: c_int,
}

/// An MBA (or SMBA) class.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pqos_mba {
    /// Class of service.
    pub class_id: c_uint,
    /// Limit: percent, or MBps with the controller (`ctrl`).
    pub mb_max: c_uint,
    /// MBA controller used.
    pub ctrl: c_int,
    /// An SMBA class.
    pub smba: c_int,
    /// Resource management domain id (MMIO interface).
    pub domain_id: u16,
    /// Number of memory regions (MMIO interface).
    pub num_mem_regions: c_int,
    /// Region controls (MMIO interface).
    pub mem_regions: [pqos_mba_mem_region; PQOS_MAX_MEM_REGIONS],
}
