//! From flags to one validated [`Command`] (ripgrep's LowArgs -> HiArgs).
//!
//! The order of actions follows pqos's `main()` (pqos(8), spec §1.10): `--version`; then
//! `-r` and `-R` run first; then `-s` or `-d`/`-D` and exit; else `-c`/`-e`/`-a` and exit;
//! else, unless `-R` was given, monitoring (every core when no `-m`).
//!
//! The plan names the interface the user asked for and the option that needs the OS
//! interface (`pid:`, `-p`); the library resolves it when it opens the platform
//! ([`rdt_pqos::OpenOptions`], pqos v25.04's rules).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use rdt_pqos::{AllocReset, ClassId, LogicalCpu, TaskId};

use crate::args::{Args, FileType};
use crate::grammar::{
    AssocTarget, ClassDef, EvtPids, EvtSockets, MonGroupSpec, MonTime, PidGroupSpec,
    SocketGroupSpec, merge_groups, merge_pid_groups, merge_socket_groups,
};

/// Where the platform comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// This machine's hardware (or the `--sysroot` directory), through the requested
    /// interface.
    Native(rdt_pqos::Iface),
    /// The in-process simulated platform.
    Sim(SimOptions),
}

/// How to set up the simulated platform (`--sim`, `--sim-state`, `--sim-scenario`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimOptions {
    /// Built-in model name or CPUID dump path.
    pub model: String,
    /// The interface asked for (the in-process simulator has the MSR interface only).
    pub iface: rdt_pqos::Iface,
    /// State file; `None` = the default location.
    pub state: Option<PathBuf>,
    /// A workload scenario file to install before running (kept in the state afterwards).
    pub scenario: Option<PathBuf>,
    /// Advance the simulated clock instead of sleeping.
    pub virtual_clock: bool,
    /// `--sim-kernel`: the kernel release of the simulated platform (`None`: the newest).
    pub kernel: Option<String>,
    /// `--sim-fresh`: start from the model's reset state.
    pub fresh: bool,
}

/// `-e`, `-c` and `-a` together.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AllocRequest {
    /// Class definitions, in command-line order.
    pub classes: Vec<ClassDef>,
    /// `-c PROFILE`: an allocation profile whose L3 classes are applied after the `-e`
    /// definitions (pqos appends them to the `-e` list; resolved against the CBM length
    /// when applied, see `commands::profiles`).
    pub profile: Option<String>,
    /// Core associations after merging repeated cores (the last one wins, as in pqos),
    /// in first-mention order, each with the `-a` item it came from.
    pub assoc: Vec<(LogicalCpu, ClassId, String)>,
    /// Task associations (`-a pid:COS=LIST`) after merging repeated tasks (the last one
    /// wins), in first-mention order, each with its `-a` item. A process id moves every
    /// thread of the process.
    pub tasks: Vec<(TaskId, ClassId, String)>,
    /// I/O RDT associations (`-a channel:COS=CHANNEL`, `-a dev:COS=DEVICE[@VC]`) after
    /// merging repeats (the last one wins), in first-mention order, each with its `-a` item;
    /// the target is [`AssocTarget::Channel`] or [`AssocTarget::Device`].
    pub io: Vec<(AssocTarget, ClassId, String)>,
    /// pqos's `warn: updating COS for core %u from %u to %u` (and `... for task ...`)
    /// lines, printed on stdout.
    pub warnings: Vec<String>,
    /// MMIO interface: where and how `mba:` definitions apply (`--alloc-domain-id`,
    /// `--alloc-mem-regions`, `--alloc-{opt,min,max}-bw`).
    pub regions: RegionAlloc,
}

/// `--alloc-domain-id`, `--alloc-mem-regions`, `--alloc-opt-bw`, `--alloc-min-bw`,
/// `--alloc-max-bw` (pqos v26.03, MMIO interface).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionAlloc {
    /// ERDT domain ids; empty without the option.
    pub domains: Vec<u16>,
    /// Memory regions; empty without the option.
    pub regions: Vec<u8>,
    /// The controls set: those named, or all three when none is.
    pub controls: Vec<rdt_pqos::BwControl>,
}

impl RegionAlloc {
    /// Whether any of the options was given.
    #[must_use]
    pub const fn given(&self) -> bool {
        !self.domains.is_empty() || !self.regions.is_empty() || !self.controls.is_empty()
    }
}

/// `--mon-channel` groups merged as pqos merges `-m`'s: the same channels twice get the
/// union of their events; a channel in two different groups is pqos's error.
fn merge_channel_groups(
    groups: impl IntoIterator<Item = crate::grammar::ChannelGroupSpec>,
) -> Result<Vec<crate::grammar::ChannelGroupSpec>> {
    let mut out: Vec<crate::grammar::ChannelGroupSpec> = Vec::new();
    for g in groups {
        if let Some(same) = out.iter_mut().find(|o| o.targets == g.targets) {
            same.events |= g.events;
            continue;
        }
        if let Some(other) = out
            .iter()
            .find(|o| o.targets.iter().any(|c| g.targets.contains(c)))
        {
            bail!(
                "Error: cannot monitor same channels in different groups: group \"{}\" and \
                 group \"{}\"",
                other.desc,
                g.desc
            );
        }
        out.push(g);
    }
    Ok(out)
}

/// Monitoring settings (`-m`, `-p`, `-t`, `-i`, `-T`, `-o`, `-u`, `-P`, `--disable-mon-*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorRequest {
    /// Core groups after merging; empty (and no `pid_groups`) = one group per core with all
    /// events (pqos's default).
    pub groups: Vec<MonGroupSpec>,
    /// `-p`: process groups after merging (PID mode); never together with `groups`.
    pub pid_groups: Vec<PidGroupSpec>,
    /// `-p` without a value: pqos's top-pids mode (the busiest processes, chosen when
    /// monitoring starts: [`rdt_pqos::proc::ProcFs::top_pids`]).
    pub top_pids: bool,
    /// `--mon-uncore`: socket groups after merging (uncore mode), empty for one group per
    /// socket; `None` without the option. Never together with `groups` or `pid_groups`.
    pub uncore_groups: Option<Vec<SocketGroupSpec>>,
    /// `--mon-channel` / `--mon-dev`: I/O RDT channel (or device) groups after merging
    /// (channel mode); empty without the options. Never together with the other kinds of group.
    pub channel_groups: Vec<crate::grammar::ChannelGroupSpec>,
    /// Sampling interval (`-i` × 100 ms; default 1 s).
    pub interval: Duration,
    /// How long to run; `None` = until interrupted.
    pub duration: Option<Duration>,
    /// `-T`: sort rows by LLC occupancy, descending.
    pub top: bool,
    /// `-P`: LLC as a percentage of the L3 size.
    pub llc_percent: bool,
    /// `--disable-mon-ipc`.
    pub disable_ipc: bool,
    /// `--disable-mon-llc_miss`.
    pub disable_llc_miss: bool,
    /// `-o`.
    pub output: Option<PathBuf>,
    /// `-u`.
    pub format: FileType,
    /// `--mon-mem-regions` (MMIO interface): the regions shown, in the order given; `None`:
    /// every region.
    pub mem_regions: Option<Vec<u8>>,
}

/// The action of one invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `--version`.
    Version,
    /// `-d` / `-D`.
    Display {
        /// `-D`.
        verbose: bool,
    },
    /// `-s`.
    Show,
    /// `-e` and/or `-a`.
    Allocate(AllocRequest),
    /// `--apply FILE [--remove] [--dry-run]`.
    Apply {
        /// The configuration file.
        file: PathBuf,
        /// `--dry-run`.
        dry_run: bool,
        /// `--remove`: take the file's named classes away.
        remove: bool,
        /// `--group-prefix`, `--prune` (goresctrl's YAML).
        groups: rdt_pqos::config::goresctrl::GroupOptions,
        /// `--adopt OWNER` (goresctrl's YAML).
        adopt: Option<rdt_pqos::config::goresctrl::PreviousOwner>,
    },
    /// `--mbm-config` (ours): the MBM events' transaction configurations to set.
    MbmConfig(Vec<(rdt_pqos::RmidEvent, u32)>),
    /// `--mbm-assign-mode` (ours): the MBM counter assignment mode to switch to.
    AssignMode(rdt_pqos::AssignMode),
    /// `--io-alloc on|off` (ours): L3 I/O allocation enabled or not.
    IoAlloc(bool),
    /// Nothing after the resets (`-R` alone: pqos exits after it).
    Nothing,
    /// Monitoring.
    Monitor(MonitorRequest),
    /// pqos v26.03's RDT 1.3 table reports and register dumps (`commands::tables`).
    Tables(crate::args::tables::TablesRequest),
}

/// A validated invocation: the platform, the resets that run first, the action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The platform.
    pub source: Source,
    /// The first option that needs the OS interface (`pid:` associations, `-p`), which
    /// narrows the interface when the platform is opened.
    pub needs_os: Option<&'static str>,
    /// Log level on stderr: 0 normal, 1 `-v`, 2 `-V`.
    pub verbosity: u8,
    /// `--sysroot`: the directory `/dev/cpu` and `/sys` are looked up under (native only).
    pub sysroot: Option<PathBuf>,
    /// `-r`: reset monitoring first, with what else its value sets (I/O RDT monitoring, the
    /// SNC mode).
    pub mon_reset: Option<rdt_pqos::MonReset>,
    /// `-R`: reset allocation (after `-r`).
    pub alloc_reset: Option<AllocReset>,
    /// The action.
    pub command: Command,
    /// `-u json`: stdout carries only JSON (the capabilities of `-d`/`-D`, the
    /// configuration of `-s`, monitoring rows); every other line goes to stderr.
    pub json: bool,
}

impl Plan {
    /// Whether the plan only reads the platform: `-s`, `-d`/`-D`, `--version`, `--apply
    /// --dry-run` or a table report or dump (`--print-topology`, `--dump`, ...), without
    /// `-r`/`-R`, and not on the OS interface asked for (`-I`, which
    /// mounts the simulated resctrl if need be, as pqos mounts the kernel's). `--sim` then
    /// opens its state read-only (`SessionOptions::read_only`): a shared state a user may
    /// read but not write can still be looked at, and nothing is saved.
    #[cfg(feature = "sim")]
    #[must_use]
    pub const fn only_reads(&self) -> bool {
        let os =
            matches!(&self.source, Source::Sim(sim) if matches!(sim.iface, rdt_pqos::Iface::Os));
        !os && self.mon_reset.is_none()
            && self.alloc_reset.is_none()
            && matches!(
                self.command,
                Command::Show
                    | Command::Display { .. }
                    | Command::Version
                    | Command::Apply { dry_run: true, .. }
                    | Command::Tables(_)
            )
    }

    /// Validates flag combinations and converts the flags into a plan.
    ///
    /// # Errors
    /// A core in two monitoring groups, processes and cores monitored together, and other
    /// invalid combinations.
    pub fn from_args(mut args: Args) -> Result<Self> {
        let source = source(&mut args);
        let needs_os = needs_os(&args);
        let verbosity = if args.super_verbose {
            2
        } else {
            u8::from(args.verbose)
        };
        let command = if args.version {
            Command::Version
        } else if args.show {
            Command::Show
        } else if args.display || args.display_verbose {
            Command::Display {
                verbose: args.display_verbose,
            }
        } else if let Some(req) = crate::args::tables::request(&args.tables)? {
            Command::Tables(req)
        } else if let Some(file) = &args.apply {
            Command::Apply {
                file: file.clone(),
                dry_run: args.dry_run,
                remove: args.remove,
                groups: rdt_pqos::config::goresctrl::GroupOptions {
                    prefix: args.group_prefix.clone().unwrap_or_default(),
                    prune: args.prune,
                },
                adopt: args.adopt,
            }
        } else if let Some(cfg) = &args.mbm_config {
            Command::MbmConfig(cfg.0.clone())
        } else if let Some(mode) = args.mbm_assign_mode {
            Command::AssignMode(mode)
        } else if let Some(on) = args.io_alloc {
            Command::IoAlloc(on)
        } else if !args.alloc_class.is_empty()
            || !args.alloc_assoc.is_empty()
            || args.profile_set.is_some()
        {
            Command::Allocate(alloc_request(&args))
        } else if args.alloc_reset.is_some() {
            Command::Nothing
        } else {
            Command::Monitor(monitor_request(&args)?)
        };
        if matches!(command, Command::Tables(_))
            && (args.mon_reset.is_some() || args.alloc_reset.is_some())
        {
            // pqos resets first, then prints; not built here: refused, never skipped
            bail!(
                "-r/-R together with a table report or dump (--print-topology, --dump, ...) is \
                 not implemented yet: run the reset and the report as two commands"
            );
        }
        Ok(Self {
            source,
            needs_os,
            sysroot: args.sysroot.take(),
            verbosity,
            mon_reset: args.mon_reset.map(|r| r.0),
            alloc_reset: args.alloc_reset.map(|r| r.0),
            json: args.mon_file_type == Some(FileType::Json),
            command,
        })
    }
}

impl Plan {
    /// How the library opens this plan's platform: the requested interface, the option that
    /// needs the OS interface, `--sysroot`; `-d`/`-D` report the PMU events CPUID enumerates.
    #[must_use]
    pub fn open_options(&self) -> rdt_pqos::OpenOptions {
        let iface = match &self.source {
            Source::Native(iface) => *iface,
            Source::Sim(sim) => sim.iface,
        };
        let mut opts = rdt_pqos::OpenOptions::new(iface);
        if let Some(dir) = &self.sysroot {
            opts = opts.sysroot(dir);
        }
        if let Some(option) = self.needs_os {
            opts = opts.needs_os(option);
        }
        if matches!(self.command, Command::Display { .. }) {
            opts = opts.pmu_caps(rdt_pqos::PmuCapsPolicy::Enumerated);
        }
        opts
    }
}

/// The option that requires the OS interface, if any (pqos master's `narrow_iface`).
fn needs_os(args: &Args) -> Option<&'static str> {
    let pid_assoc = args
        .alloc_assoc
        .iter()
        .flat_map(|a| a.0.iter())
        .any(|item| matches!(item.target, AssocTarget::Pids(_)));
    if pid_assoc {
        Some("-a/--alloc-assoc (pid)")
    } else if !args.mon_pid.is_empty() {
        Some("-p/--mon-pid")
    } else if args.mbm_assign_mode.is_some() {
        Some("--mbm-assign-mode")
    } else if args.io_alloc.is_some() {
        Some("--io-alloc")
    } else {
        None
    }
}

/// The platform: the in-process simulator, or this machine through the requested
/// interface.
fn source(args: &mut Args) -> Source {
    let iface = if args.iface_os {
        rdt_pqos::Iface::Os
    } else {
        args.iface.unwrap_or_default()
    };
    match args.sim.take() {
        None => Source::Native(iface),
        Some(model) => Source::Sim(SimOptions {
            model,
            iface,
            state: args.sim_state.take(),
            scenario: args.sim_scenario.take(),
            virtual_clock: args.sim_virtual_clock,
            kernel: args.sim_kernel.take(),
            fresh: args.sim_fresh,
        }),
    }
}

fn alloc_request(args: &Args) -> AllocRequest {
    let classes = args
        .alloc_class
        .iter()
        .flat_map(|d| d.0.iter().cloned())
        .collect();
    let mut assoc: Vec<(LogicalCpu, ClassId, String)> = Vec::new();
    let mut tasks: Vec<(TaskId, ClassId, String)> = Vec::new();
    let mut io: Vec<(AssocTarget, ClassId, String)> = Vec::new();
    let mut warnings = Vec::new();
    for item in args.alloc_assoc.iter().flat_map(|a| a.0.iter()) {
        match &item.target {
            AssocTarget::Pids(pids) => {
                for &task in pids {
                    if let Some(entry) = tasks.iter_mut().find(|(t, _, _)| *t == task) {
                        warnings.push(format!(
                            "warn: updating COS for task {task} from {} to {}",
                            entry.1, item.class
                        ));
                        entry.1 = item.class;
                        entry.2.clone_from(&item.text);
                    } else {
                        tasks.push((task, item.class, item.text.clone()));
                    }
                }
            }
            target @ (AssocTarget::Channel(_) | AssocTarget::Device { .. }) => {
                if let Some(entry) = io.iter_mut().find(|(t, _, _)| t == target) {
                    // pqos/alloc.c add_channel_channel_tab, fill_dev_tab
                    let what = match target {
                        AssocTarget::Channel(c) => format!("channel {c}"),
                        AssocTarget::Device { segment, bdf, vc } => format!(
                            "dev {segment:04x}:{:02x}:{:02x}.{:x}{}",
                            bdf >> 8,
                            (bdf >> 3) & 0x1f,
                            bdf & 7,
                            vc.map(|v| format!("@{v}")).unwrap_or_default()
                        ),
                        _ => String::new(),
                    };
                    warnings.push(format!(
                        "warn: updating COS for {what} from {} to {}",
                        entry.1, item.class
                    ));
                    entry.1 = item.class;
                    entry.2.clone_from(&item.text);
                } else {
                    io.push((target.clone(), item.class, item.text.clone()));
                }
            }
            AssocTarget::Cores(cpus) => {
                for cpu in cpus.iter() {
                    if let Some(entry) = assoc.iter_mut().find(|(c, _, _)| *c == cpu) {
                        warnings.push(format!(
                            "warn: updating COS for core {cpu} from {} to {}",
                            entry.1, item.class
                        ));
                        entry.1 = item.class;
                        entry.2.clone_from(&item.text);
                    } else {
                        assoc.push((cpu, item.class, item.text.clone()));
                    }
                }
            }
        }
    }
    let mut controls = Vec::new();
    for (on, c) in [
        (args.alloc_opt_bw, rdt_pqos::BwControl::Optimal),
        (args.alloc_min_bw, rdt_pqos::BwControl::Min),
        (args.alloc_max_bw, rdt_pqos::BwControl::Max),
    ] {
        if on {
            controls.push(c);
        }
    }
    AllocRequest {
        classes,
        profile: args.profile_set.clone(),
        assoc,
        tasks,
        io,
        warnings,
        regions: RegionAlloc {
            domains: args
                .alloc_domain_id
                .as_ref()
                .map(|l| l.0.clone())
                .unwrap_or_default(),
            regions: args
                .alloc_mem_regions
                .as_ref()
                .map(|l| l.0.clone())
                .unwrap_or_default(),
            controls,
        },
    }
}

fn monitor_request(args: &Args) -> Result<MonitorRequest> {
    let groups = merge_groups(args.mon_core.iter().flat_map(|m| m.0.iter().cloned()))?;
    let mut pids = Vec::new();
    let mut top_pids = false;
    for p in &args.mon_pid {
        match p {
            EvtPids::Top => top_pids = true,
            EvtPids::Groups(g) => pids.extend(g.iter().cloned()),
        }
    }
    let pid_groups = merge_pid_groups(pids)?;
    if top_pids && !pid_groups.is_empty() {
        bail!("-p without EVTPIDS (top-pids mode) cannot be combined with -p EVTPIDS");
    }
    if top_pids && !groups.is_empty() {
        bail!(
            "Monitoring start error, process, core, channel/device tracking can not be done \
             simultaneously (-m and -p given)"
        );
    }
    if !groups.is_empty() && !pid_groups.is_empty() {
        bail!(
            "Monitoring start error, process, core, channel/device tracking can not be done \
             simultaneously (-m and -p given)"
        );
    }
    let uncore_groups = if args.mon_uncore.is_empty() {
        None
    } else {
        let mut specs = Vec::new();
        for u in &args.mon_uncore {
            if let EvtSockets::Groups(g) = u {
                specs.extend(g.iter().cloned());
            }
        }
        Some(merge_socket_groups(specs)?)
    };
    if uncore_groups.is_some() && !(groups.is_empty() && pid_groups.is_empty() && !top_pids) {
        bail!(
            "Monitoring start error, process, core, channel/device tracking can not be done \
             simultaneously (--mon-uncore with {})",
            if groups.is_empty() { "-p" } else { "-m" }
        );
    }
    if !args.mon_channel.is_empty() && !args.mon_dev.is_empty() {
        bail!(
            "Monitoring start error, process, core, channel/device tracking can not be done \
             simultaneously (--mon-channel and --mon-dev given)"
        );
    }
    let channel_groups = merge_channel_groups(
        args.mon_channel
            .iter()
            .flat_map(|c| c.0.clone())
            .chain(args.mon_dev.iter().flat_map(|d| d.0.clone())),
    )?;
    let other_groups =
        !groups.is_empty() || !pid_groups.is_empty() || top_pids || uncore_groups.is_some();
    if !channel_groups.is_empty() && other_groups {
        bail!(
            "Monitoring start error, process, core, channel/device tracking can not be done \
             simultaneously (--mon-channel with -m, -p or --mon-uncore)"
        );
    }
    Ok(MonitorRequest {
        groups,
        pid_groups,
        top_pids,
        uncore_groups,
        channel_groups,
        interval: args.mon_interval.map_or(Duration::from_secs(1), |i| i.0),
        duration: match args.mon_time {
            Some(MonTime::Limited(d)) => Some(d),
            Some(MonTime::Infinite) | None => None,
        },
        top: args.mon_top,
        llc_percent: args.percent_llc,
        disable_ipc: args.disable_mon_ipc,
        disable_llc_miss: args.disable_mon_llc_miss,
        output: args.mon_file.clone(),
        format: args.mon_file_type.unwrap_or(FileType::Text),
        mem_regions: args.mon_mem_regions.as_ref().map(|l| l.0.clone()),
    })
}

/// The plan of `pqos ARGV...`, for the unit tests of the actions.
#[cfg(test)]
pub(crate) fn plan_of(argv: &[&str]) -> Plan {
    use clap::Parser as _;
    let parsed = Args::try_parse_from(std::iter::once("pqos").chain(argv.iter().copied()))
        .expect("valid arguments");
    Plan::from_args(parsed).expect("a valid plan")
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use rdt_pqos::Interface;
    use rdt_pqos::{CpuSet, FeatureSetting, MonEvents};

    use super::*;
    use crate::grammar::{AllocKind, MaskScope};

    fn plan(argv: &[&str]) -> Result<Plan> {
        let parsed = Args::try_parse_from(std::iter::once("pqos").chain(argv.iter().copied()))?;
        Plan::from_args(parsed)
    }

    /// A host as interface resolution sees it: resctrl mounted or not, `RDT_IFACE`.
    struct Host {
        dir: tempfile::TempDir,
        rdt_iface: Option<String>,
    }

    fn host(resctrl_mounted: bool, rdt_iface: Option<&str>) -> Host {
        let dir = tempfile::tempdir().unwrap();
        if resctrl_mounted {
            let root = dir.path().join("sys/fs/resctrl");
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(root.join("schemata"), "L3:0=fffff\n").unwrap();
        }
        Host {
            dir,
            rdt_iface: rdt_iface.map(str::to_owned),
        }
    }

    fn resctrl() -> Host {
        host(true, None)
    }

    fn env(v: &str) -> Host {
        host(true, Some(v))
    }

    /// The interface `pqos ARGV...` resolves to on `host` (the library's resolution, with
    /// the plan's request and narrowing).
    fn iface_on(host: &Host, argv: &[&str]) -> Result<Interface> {
        let plan = plan(argv)?;
        let opts = plan
            .open_options()
            .paths(rdt_pqos::Paths::under(host.dir.path()))
            .rdt_iface(host.rdt_iface.clone());
        Ok(opts.resolve()?)
    }

    fn iface(argv: &[&str]) -> Result<Interface> {
        iface_on(&host(false, None), argv)
    }

    /// The command of `argv` on a host where resctrl is mounted (`-p` needs the OS interface).
    fn command_os(argv: &[&str]) -> Command {
        plan(argv).unwrap().command
    }

    fn command(argv: &[&str]) -> Command {
        plan(argv).unwrap().command
    }

    fn cpus(s: &str) -> CpuSet {
        s.parse().unwrap()
    }

    /// `--mon-uncore` (pqos: `optional_argument`, so a value needs `=`): one group per socket
    /// without a value; never together with `-m` or `-p` (pqos `monitor_setup`).
    #[test]
    fn mon_uncore_is_its_own_monitoring_mode() {
        let Command::Monitor(m) = command(&["--mon-uncore"]) else {
            panic!("monitor")
        };
        assert_eq!(m.uncore_groups, Some(vec![]));
        let Command::Monitor(m) = command(&["--mon-uncore=all:[0-1]", "--mon-uncore=all:[0-1]"])
        else {
            panic!("monitor")
        };
        assert_eq!(m.uncore_groups.unwrap().len(), 1, "identical groups merge");
        let e = plan(&["--mon-uncore", "-m", "all:0"]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Monitoring start error, process, core, channel/device tracking"),
            "{e}"
        );
        assert!(
            plan(&["--mon-uncore", "all:0"]).is_err(),
            "a value needs '='"
        );
        let Command::Monitor(m) = command(&["-m", "all:0"]) else {
            panic!("monitor")
        };
        assert_eq!(m.uncore_groups, None);
    }

    // One test per example command line of pqos(8) (spec §1.2-1.8).

    #[test]
    fn example_no_arguments_monitors_every_core() {
        let Command::Monitor(m) = command(&[]) else {
            panic!()
        };
        assert!(m.groups.is_empty());
        assert_eq!(m.interval, Duration::from_secs(1));
        assert_eq!(m.duration, None);
        assert_eq!(m.format, FileType::Text);
    }

    #[test]
    fn example_display_and_display_verbose() {
        assert_eq!(command(&["-d"]), Command::Display { verbose: false });
        assert_eq!(command(&["-D"]), Command::Display { verbose: true });
        assert_eq!(command(&["--display"]), Command::Display { verbose: false });
    }

    #[test]
    fn example_show() {
        assert_eq!(command(&["-s"]), Command::Show);
        assert_eq!(command(&["-s", "-v"]), Command::Show);
        assert_eq!(plan(&["-s", "-v"]).unwrap().verbosity, 1);
    }

    #[test]
    fn example_version() {
        assert_eq!(command(&["--version"]), Command::Version);
    }

    #[test]
    fn example_seed_paper_class_definition() {
        let Command::Allocate(a) = command(&["-e", "llc:1=0xffe00;llc:2=0x00003"]) else {
            panic!()
        };
        assert_eq!(a.classes.len(), 2);
        assert_eq!(a.classes[1].values[0].value, 3);
        assert!(a.assoc.is_empty());
    }

    #[test]
    fn example_class_definition_on_selected_sockets() {
        let Command::Allocate(a) = command(&["-e", "llc@0,1:1=0xf"]) else {
            panic!()
        };
        assert_eq!(a.classes[0].ids, Some(vec![0, 1]));
        let Command::Allocate(a) = command(&["-e", "llc@0-1:2=0xff00"]) else {
            panic!()
        };
        assert_eq!(a.classes[0].ids, Some(vec![0, 1]));
    }

    #[test]
    fn example_cdp_class_definition() {
        let Command::Allocate(a) = command(&["-e", "llc:1d=0xf,1c=0xf0"]) else {
            panic!()
        };
        let scopes: Vec<_> = a.classes[0].values.iter().map(|v| v.scope).collect();
        assert_eq!(scopes, [MaskScope::Data, MaskScope::Code]);
    }

    #[test]
    fn example_l2_and_mba_class_definitions() {
        let Command::Allocate(a) = command(&["-e", "l2:1=0xf"]) else {
            panic!()
        };
        assert_eq!(a.classes[0].kind, AllocKind::L2);
        let Command::Allocate(a) = command(&["-e", "l2@2:1=0xf"]) else {
            panic!()
        };
        assert_eq!(a.classes[0].ids, Some(vec![2]));
        let Command::Allocate(a) = command(&["-e", "mba:1=50"]) else {
            panic!()
        };
        assert_eq!(
            (a.classes[0].kind, a.classes[0].values[0].value),
            (AllocKind::Mba, 50)
        );
        let Command::Allocate(a) = command(&["-e", "mba@1:3=80"]) else {
            panic!()
        };
        assert_eq!(a.classes[0].ids, Some(vec![1]));
    }

    #[test]
    fn example_seed_paper_association() {
        let Command::Allocate(a) = command(&["-a", "llc:1=2-7;llc:2=8-10"]) else {
            panic!()
        };
        let got: Vec<(u32, u32)> = a.assoc.iter().map(|(c, k, _)| (c.get(), k.get())).collect();
        let mut want: Vec<(u32, u32)> = (2..=7).map(|c| (c, 1)).collect();
        want.extend((8..=10).map(|c| (c, 2)));
        assert_eq!(got, want);
        assert!(a.warnings.is_empty());
    }

    #[test]
    fn example_cos_and_core_association_forms() {
        let Command::Allocate(a) = command(&["-a", "cos:1=0,2"]) else {
            panic!()
        };
        assert_eq!(a.assoc.len(), 2);
        let Command::Allocate(a) = command(&["-a", "core:1=3"]) else {
            panic!()
        };
        assert_eq!(a.assoc[0].0, LogicalCpu::new(3));
    }

    #[test]
    fn reassociating_a_core_warns_like_pqos_and_last_wins() {
        let Command::Allocate(a) = command(&["-a", "llc:1=2-3;llc:2=3"]) else {
            panic!()
        };
        assert_eq!(a.warnings, ["warn: updating COS for core 3 from 1 to 2"]);
        assert_eq!(a.assoc[1].1, ClassId::new(2));
    }

    #[test]
    fn class_definition_and_association_together_only_allocate() {
        let Command::Allocate(a) = command(&["-e", "llc:1=0xf", "-a", "llc:1=0", "-m", "all:0"])
        else {
            panic!()
        };
        assert_eq!((a.classes.len(), a.assoc.len()), (1, 1));
    }

    #[test]
    fn example_alloc_reset_forms() {
        let p = plan(&["-R"]).unwrap();
        assert_eq!(
            (p.alloc_reset, p.command),
            (Some(AllocReset::default()), Command::Nothing)
        );
        let p = plan(&["-R", "l3cdp-on"]).unwrap();
        assert_eq!(p.alloc_reset.unwrap().l3_cdp, FeatureSetting::On);
        let p = plan(&["-R", "l3cdp-off", "-m", "all:0"]).unwrap();
        assert_eq!(
            p.command,
            Command::Nothing,
            "-R exits before monitoring, as in pqos"
        );
        let p = plan(&["-R", "-s"]).unwrap();
        assert_eq!((p.alloc_reset.is_some(), p.command), (true, Command::Show));
    }

    #[test]
    fn example_mon_reset_then_monitoring() {
        let p = plan(&["-r", "-t", "5", "-u", "csv"]).unwrap();
        assert_eq!(p.mon_reset, Some(rdt_pqos::MonReset::default()));
        let Command::Monitor(m) = p.command else {
            panic!()
        };
        assert_eq!(
            (m.duration, m.format),
            (Some(Duration::from_secs(5)), FileType::Csv)
        );
    }

    #[test]
    fn example_monitoring_all_events_one_group_per_core() {
        let Command::Monitor(m) = command(&["-m", "all:0-3"]) else {
            panic!()
        };
        assert_eq!(m.groups.len(), 4);
        assert!(m.groups.iter().all(|g| g.events == MonEvents::PQOS_ALL));
    }

    #[test]
    fn example_monitoring_one_bracket_group() {
        let Command::Monitor(m) = command(&["-m", "all:[0-3]"]) else {
            panic!()
        };
        assert_eq!(m.groups.len(), 1);
        assert_eq!(
            (m.groups[0].desc.as_str(), &m.groups[0].cpus),
            ("0-3", &cpus("0-3"))
        );
    }

    #[test]
    fn example_monitoring_seed_paper_groups() {
        let Command::Monitor(m) = command(&["-m", "all:[2-7];all:[8-10]"]) else {
            panic!()
        };
        let descs: Vec<&str> = m.groups.iter().map(|g| g.desc.as_str()).collect();
        assert_eq!(descs, ["2-7", "8-10"]);
    }

    #[test]
    fn example_monitoring_mixed_events_and_groups() {
        let Command::Monitor(m) = command(&["-m", "all:0,2,4-10;llc:1,3;mbr:11-12"]) else {
            panic!()
        };
        assert_eq!(m.groups.len(), 13);
        let Command::Monitor(m) = command(&["-m", "llc:[0-3];all:[4,5,6];mbr:[7-8],9"]) else {
            panic!()
        };
        assert_eq!(m.groups.len(), 4);
    }

    #[test]
    fn example_monitoring_identical_groups_merge() {
        let Command::Monitor(m) = command(&["-m", "llc:0-3;mbl:0-3"]) else {
            panic!()
        };
        assert_eq!(m.groups.len(), 4);
        assert_eq!(
            m.groups[3].events,
            MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL
        );
        let Command::Monitor(m) = command(&["-m", "llc:0", "-m", "mbl:0"]) else {
            panic!()
        };
        assert_eq!(m.groups.len(), 1, "merging spans repeated -m options");
    }

    #[test]
    fn example_monitoring_core_in_two_groups_is_an_error() {
        let e = plan(&["-m", "llc:[0-3];mbl:0"]).unwrap_err().to_string();
        assert!(
            e.starts_with("Error: cannot monitor same cores in different groups"),
            "{e}"
        );
        assert!(e.contains("core 0"), "{e}");
    }

    #[test]
    fn example_monitoring_time_interval_top_percent_and_file() {
        let Command::Monitor(m) = command(&[
            "-m",
            "all:0",
            "-t",
            "inf",
            "-i",
            "5",
            "-T",
            "-P",
            "-o",
            "/tmp/x",
            "-u",
            "xml",
            "--disable-mon-ipc",
            "--disable-mon-llc_miss",
        ]) else {
            panic!()
        };
        assert_eq!(m.duration, None);
        assert_eq!(m.interval, Duration::from_millis(500));
        assert!(m.top && m.llc_percent && m.disable_ipc && m.disable_llc_miss);
        assert_eq!(m.output, Some(PathBuf::from("/tmp/x")));
        assert_eq!(m.format, FileType::Xml);
    }

    #[test]
    fn example_interfaces() {
        assert_eq!(iface(&["-d"]).unwrap(), Interface::Msr);
        assert_eq!(iface(&["--iface=msr", "-d"]).unwrap(), Interface::Msr);
        assert_eq!(iface(&["-I", "-d"]).unwrap(), Interface::Os);
        assert_eq!(iface(&["--iface", "os", "-d"]).unwrap(), Interface::Os);
        assert!(matches!(
            plan(&["--sim", "-I", "-d"]).unwrap().source,
            Source::Sim(SimOptions {
                iface: rdt_pqos::Iface::Os,
                ..
            })
        ));
    }

    #[test]
    fn auto_chooses_os_where_resctrl_is_mounted_as_pqos_v25_04() {
        assert_eq!(iface_on(&resctrl(), &["-s"]).unwrap(), Interface::Os);
        assert_eq!(
            iface_on(&resctrl(), &["--iface=auto", "-s"]).unwrap(),
            Interface::Os
        );
        assert_eq!(
            iface_on(&resctrl(), &["--iface=msr", "-s"]).unwrap(),
            Interface::Msr
        );
        // the in-process simulator is its own source, whatever the host has
        assert!(matches!(
            plan(&["--sim", "-s"]).unwrap().source,
            Source::Sim(_)
        ));
    }

    #[test]
    fn rdt_iface_chooses_for_auto_and_restricts_explicit_choices() {
        for v in ["OS", "os", "Os_only"] {
            assert_eq!(iface_on(&env(v), &["-s"]).unwrap(), Interface::Os, "{v}");
        }
        assert_eq!(iface_on(&env("msr"), &["-s"]).unwrap(), Interface::Msr);
        let e = iface_on(&env("OS"), &["--iface=msr", "-s"])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "Interface initialization error! Your system has been restricted to use the OS interface only!"
            ),
            "{e}"
        );
        let e = iface_on(&env("MSR"), &["-I", "-s"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("restricted to use the MSR interface only!"),
            "{e}"
        );
        let e = iface_on(&env("MSR"), &["-a", "pid:1=1"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("restricted to use the MSR interface only!"),
            "{e}"
        );
        assert!(e.contains("'-a/--alloc-assoc (pid)' requires 'os'"), "{e}");
        let e = iface_on(&env("mmio"), &["-s"]).unwrap_err().to_string();
        assert!(e.contains("Invalid interface enforcement selection"), "{e}");
    }

    #[test]
    fn pid_association_narrows_the_interface_to_os() {
        // auto on a resctrl host: os
        let p = plan(&["-a", "llc:1=0-1;pid:2=1234"]).unwrap();
        assert_eq!(p.needs_os, Some("-a/--alloc-assoc (pid)"));
        assert_eq!(
            iface_on(&resctrl(), &["-a", "llc:1=0-1;pid:2=1234"]).unwrap(),
            Interface::Os
        );
        // explicit msr: pqos master's message
        let e = iface_on(&resctrl(), &["--iface=msr", "-a", "pid:1=1234"])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "Error: explicit interface 'msr' is not compatible with option \
             '-a/--alloc-assoc (pid)' which requires 'os'."
        );
        // auto without resctrl
        let e = iface(&["-a", "pid:1=1234"]).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "Error: option '-a/--alloc-assoc (pid)' requires interface 'os' but only 'msr' \
                 is available on this platform."
            ),
            "{e}"
        );
        // core associations leave the choice alone
        assert_eq!(plan(&["-a", "core:1=2"]).unwrap().needs_os, None);
        assert_eq!(iface(&["-a", "core:1=2"]).unwrap(), Interface::Msr);
    }

    #[test]
    fn mon_pid_narrows_the_interface_to_os() {
        assert_eq!(
            iface_on(&resctrl(), &["-p", "all:1"]).unwrap(),
            Interface::Os
        );
        let e = iface_on(&resctrl(), &["--iface=msr", "-p", "all:1"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("with option '-p/--mon-pid' which requires 'os'"),
            "{e}"
        );
    }

    #[test]
    fn task_associations_merge_like_pqos_with_a_warning() {
        let p = plan(&["-a", "pid:1=10,11;pid:2=11;core:3=0"]).unwrap();
        let Command::Allocate(a) = p.command else {
            panic!()
        };
        let got: Vec<(u32, u32)> = a.tasks.iter().map(|(t, c, _)| (t.get(), c.get())).collect();
        assert_eq!(got, [(10, 1), (11, 2)]);
        assert_eq!(a.warnings, ["warn: updating COS for task 11 from 1 to 2"]);
        assert_eq!(a.assoc.len(), 1);
    }

    #[test]
    fn profile_alone_is_an_allocation() {
        let Command::Allocate(a) = command(&["-c", "CFG1"]) else {
            panic!()
        };
        assert_eq!(a.profile.as_deref(), Some("CFG1"));
        assert_eq!(command(&["-c", "CFG1", "-s"]), Command::Show);
    }

    #[test]
    fn sim_kernel_is_passed_to_the_simulated_platform() {
        let p = plan(&["--sim=turin", "--sim-kernel", "6.17", "-d"]).unwrap();
        assert!(
            matches!(&p.source, Source::Sim(SimOptions { kernel: Some(k), .. }) if k == "6.17"),
            "{:?}",
            p.source
        );
        assert!(
            plan(&["--sim-kernel", "6.17", "-d"]).is_err(),
            "requires --sim"
        );
    }

    #[test]
    fn example_sim_platform() {
        let p = plan(&["--sim=milan", "--sim-state", "/tmp/s.json", "-s"]).unwrap();
        assert!(matches!(
            plan(&["--sim", "--sim-fresh", "-s"]).unwrap().source,
            Source::Sim(SimOptions { fresh: true, .. })
        ));
        assert_eq!(
            p.source,
            Source::Sim(SimOptions {
                model: "milan".into(),
                iface: rdt_pqos::Iface::Auto,
                state: Some(PathBuf::from("/tmp/s.json")),
                scenario: None,
                virtual_clock: false,
                kernel: None,
                fresh: false,
            })
        );
    }

    #[test]
    fn example_monitoring_processes() {
        let Command::Monitor(m) = command_os(&["-p", "all:1234,5678;llc:[10,11]"]) else {
            panic!()
        };
        assert!(m.groups.is_empty());
        let descs: Vec<&str> = m.pid_groups.iter().map(|g| g.desc.as_str()).collect();
        assert_eq!(descs, ["1234", "5678", "10,11"]);
        assert_eq!(m.pid_groups[2].events, MonEvents::LLC_OCCUPANCY);
        let Command::Monitor(m) = command_os(&["-p", "llc:7", "-p", "mbl:7", "-t", "1"]) else {
            panic!()
        };
        assert_eq!(
            m.pid_groups.len(),
            1,
            "one process named twice: events merged"
        );
        assert_eq!(
            m.pid_groups[0].events,
            MonEvents::LLC_OCCUPANCY | MonEvents::MBM_LOCAL
        );
    }

    #[test]
    fn processes_and_cores_cannot_be_monitored_together() {
        let e = plan(&["-p", "all:1", "-m", "all:0"])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("Monitoring start error, process, core, channel/device tracking"),
            "{e}"
        );
        let e = plan(&["-p", "all:[1,2];llc:2"]).unwrap_err().to_string();
        assert!(
            e.starts_with("Error: cannot monitor same pids in different groups"),
            "{e}"
        );
    }

    #[test]
    fn top_pids_mode_is_planned_and_alone() {
        let Command::Monitor(m) = command_os(&["-p"]) else {
            panic!()
        };
        assert!(m.top_pids && m.pid_groups.is_empty());
        // a following option is not -p's value
        let Command::Monitor(m) = command_os(&["-p", "-t", "1"]) else {
            panic!()
        };
        assert!(m.top_pids);
        assert!(plan(&["-p", "-m", "all:0"]).is_err());
    }

    #[test]
    fn pid_association_fails_with_a_clear_message() {
        let e = iface(&["-a", "pid:1=1234"]).unwrap_err().to_string();
        assert!(
            e.contains("'-a/--alloc-assoc (pid)'") && e.contains("'os'"),
            "{e}"
        );
    }
}
