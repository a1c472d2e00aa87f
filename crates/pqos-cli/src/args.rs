//! The command line as pqos(8) defines it: flat flags with pqos's letters and long names,
//! plus `--sim[=MODEL]` and `--sim-state` to choose the simulated platform.
//!
//! Each complex value goes through its own `FromStr` (see [`crate::grammar`]), so clap
//! reports bad values naming the option and the token. The binary's `command::Plan::from_args`
//! then turns the flags into one validated `command::Command`.

pub mod config_file;
pub mod logger;
pub mod safe_open;
pub mod tables;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches, Parser, ValueEnum};

use crate::grammar::{
    AssocDefs, ClassDefs, EvtChannels, EvtCores, EvtDevices, EvtPids, EvtSockets, Interval,
    MonResetCfg, MonTime, ResetCfg,
};

/// `-u`: the monitoring output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FileType {
    /// Fixed-width text, as on a terminal.
    Text,
    /// XML records.
    Xml,
    /// Comma-separated values, one header line.
    Csv,
    /// JSON Lines: one object per row (ours; field names in docs/compat.md).
    Json,
}

/// `--iface`: the library's [`rdt_pqos::Iface`], offered with pqos's names and a line each.
fn iface_parser() -> impl clap::builder::TypedValueParser<Value = rdt_pqos::Iface> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
    PossibleValuesParser::new([
        PossibleValue::new("auto").help(
            "Let the tool choose: `RDT_IFACE` if set, else OS where resctrl is mounted, else MSR",
        ),
        PossibleValue::new("msr").help("Model-specific registers (`/dev/cpu/N/msr`)"),
        PossibleValue::new("os").help("The Linux resctrl filesystem"),
        PossibleValue::new("mmio").help(
            "RDT 1.3's MMIO registers from the ACPI ERDT table (`/dev/mem`): region-aware \
             MBM and MBA",
        ),
    ])
    .try_map(|s| s.parse::<rdt_pqos::Iface>())
}

const AFTER_HELP: &str = "\
Examples:
  pqos -d                                   show the platform's capabilities
  pqos -s                                   show allocation classes and core association
  pqos -e \"llc:1=0xffe00;llc:2=0x00003\"     define L3 classes 1 and 2 on all sockets
  pqos -e \"llc@0,1:1=0xf\"                   define class 1 on sockets (L3 ids) 0 and 1
  pqos -e \"llc:1d=0xf,1c=0xf0\"              CDP data and code masks of class 1
  pqos -e \"mba:1=50\"                        limit class 1 to 50% of memory bandwidth
  pqos -a \"llc:1=2-7;llc:2=8-10\"            put cores 2-7 in class 1, 8-10 in class 2
  pqos -a \"pid:1=1234,5678\" -I             put processes 1234 and 5678 (all threads) in class 1
  pqos -e \"mba_max:1=6000\" -I               cap class 1 at 6000 MBps (resctrl mounted with mba_MBps)
  pqos -H                                   list the allocation profiles; -c CFG1 applies one
  pqos -f alloc.cfg                         run the commands of a configuration file
  pqos -R                                   reset allocation (-R l3cdp-on: and turn CDP on)
  pqos -m \"all:[2-7];all:[8-10]\" -t 10      monitor two core groups for 10 s
  pqos -r -m all:0-3 -i 5                   reset RMIDs, monitor cores 0-3 every 500 ms
  pqos --sim=skylake-sp -d                  the same commands on a simulated platform
";

/// `pqos --help`'s examples, then what `--sim` offers: the simulator's built-in models
/// (`rdt_pqos::sim::BUILTIN_MODELS`, the one list), wrapped for a terminal.
fn after_help() -> String {
    let mut text = AFTER_HELP.to_owned();
    text.push('\n');
    let mut line = String::new();
    for word in sim_note().split(' ') {
        if !line.is_empty() && line.len() + 1 + word.len() > 88 {
            text.push_str(&line);
            text.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    text.push_str(&line);
    text
}

#[cfg(feature = "sim")]
fn sim_note() -> String {
    use rdt_pqos::sim::{BUILTIN_MODELS, DEFAULT_MODEL};
    let models: Vec<String> = BUILTIN_MODELS
        .iter()
        .map(|&m| {
            if m == DEFAULT_MODEL {
                format!("{m} (default)")
            } else {
                m.to_owned()
            }
        })
        .collect();
    format!(
        "Simulated platforms (--sim=MODEL): {}, or the path of a CPUID dump. Their state \
         persists between runs in a state file (--sim-state PATH).",
        models.join(", ")
    )
}

#[cfg(not(feature = "sim"))]
fn sim_note() -> String {
    "This pqos was built without the simulated platform (--sim): build it with the cargo \
     feature `sim` of pqos-cli (a default)."
        .to_owned()
}

/// The model `--sim` without a name selects.
#[cfg(feature = "sim")]
const DEFAULT_SIM_MODEL: &str = rdt_pqos::sim::DEFAULT_MODEL;
#[cfg(not(feature = "sim"))]
const DEFAULT_SIM_MODEL: &str = "broadwell-ep";

/// pqos: Intel RDT / AMD PQoS monitoring and allocation, compatible with intel-cmt-cat's pqos.
///
/// `Parser` is implemented by hand (below) so that parsing follows pqos: `-f` files expand in
/// place, `-H` answers at once, `-l`/`-v`/`-V` install the log sink.
#[derive(clap::Args, Debug, Default)]
#[command(
    about = "Intel(R) RDT / AMD PQoS: monitor and allocate last-level cache and memory bandwidth",
    long_about = None,
    disable_version_flag = true,
    // A later option overrides an earlier one, as with getopt: `-t 1 -t 5` is `-t 5`, and a
    // -f file's options mix with the command line's (see `config_file`).
    args_override_self = true,
    after_help = after_help()
)]
#[allow(clippy::struct_excessive_bools)] // pqos's flags are booleans one to one
pub struct Args {
    /// Show the platform's RDT capabilities.
    #[arg(short = 'd', long = "display")]
    pub display: bool,

    /// Show the capabilities in detail (scale factors, way sizes, cache geometry).
    #[arg(short = 'D', long = "display-verbose")]
    pub display_verbose: bool,

    /// Show the allocation classes and the core-to-class association.
    #[arg(short = 's', long = "show")]
    pub show: bool,

    /// `-e`: class definitions.
    #[arg(
        short = 'e',
        long = "alloc-class",
        value_name = "CLASSDEF",
        help = "Define allocation classes: TYPE[@IDS]:COS=VALUE[,COS=VALUE][;...] with TYPE llc, \
                l2 or mba (COS may end in d or c for CDP data/code masks; values decimal unless 0x)"
    )]
    pub alloc_class: Vec<ClassDefs>,

    /// `-a`: core associations.
    #[arg(
        short = 'a',
        long = "alloc-assoc",
        value_name = "CLASS2ID",
        help = "Associate cores with classes: llc:COS=CORES, cos:COS=CORES or core:COS=CORES[;...]"
    )]
    pub alloc_assoc: Vec<AssocDefs>,

    /// Reset allocation: all classes to full masks, all cores to COS0; CFG is a comma list of
    /// l3cdp-on|off|any, l2cdp-on|off|any, mbaCtrl-on|off|any.
    #[arg(
        short = 'R',
        long = "alloc-reset",
        value_name = "CFG",
        num_args = 0..=1,
        default_missing_value = ""
    )]
    pub alloc_reset: Option<ResetCfg>,

    /// Reset monitoring: every core back to RMID0 (monitoring then starts as usual).
    #[arg(
        short = 'r',
        long = "mon-reset",
        value_name = "CFG",
        num_args = 0..=1,
        default_missing_value = ""
    )]
    pub mon_reset: Option<MonResetCfg>,

    /// `-m`: monitoring groups.
    #[arg(
        short = 'm',
        long = "mon-core",
        value_name = "EVTCORES",
        help = "Monitor cores: EVENT:CORES[;...] with EVENT llc, mbl, mbr, mbt, llc_ref or all; [a-b] is \
                one group, a-b is one group per core"
    )]
    pub mon_core: Vec<EvtCores>,

    /// `--mon-uncore[=EVTSOCKETS]`: uncore (socket) monitoring groups of the PCIe LLC events
    /// (Skylake-SP, MSR interface). Like getopt's optional argument, a value needs `=`.
    #[arg(
        long = "mon-uncore",
        value_name = "EVTSOCKETS",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = EvtSockets::MISSING,
        help = "Monitor the uncore PCIe LLC events per socket (Skylake-SP, MSR interface): \
                without a value every socket, else all:SOCKETS[;...]; [a-b] is one group, a-b \
                is one group per socket"
    )]
    pub mon_uncore: Vec<EvtSockets>,

    /// `--mon-channel=EVTCHANNELS`: I/O RDT channel monitoring groups (pqos v23.11+).
    #[arg(
        long = "mon-channel",
        value_name = "EVTCHANNELS",
        help = "Monitor I/O RDT channels (MSR interface): EVENT:CHANNELS[;...] with EVENT llc, \
                mbl, mbt or all; [a,b] is one group, a,b is one group per channel"
    )]
    pub mon_channel: Vec<EvtChannels>,

    /// `--mon-dev=EVTDEVICES`: I/O RDT device monitoring groups (pqos v23.11+), each device
    /// as its channels.
    #[arg(
        long = "mon-dev",
        value_name = "EVTDEVICES",
        help = "Monitor I/O RDT devices (MSR interface): EVENT:DEVICES[;...] with EVENT llc, \
                mbl, mbt or all and DEVICE [SEG:]BUS:DEV.FN[@VC]; [a,b] is one group"
    )]
    pub mon_dev: Vec<EvtDevices>,

    /// `-p`: process monitoring groups.
    #[arg(
        short = 'p',
        long = "mon-pid",
        value_name = "EVTPIDS",
        num_args = 0..=1,
        default_missing_value = "",
        help = "Monitor processes: EVENT:PIDS[;...] with EVENT llc, mbl, mbr, mbt, llc_ref or all; \
                [a,b] is one group, a,b is one group per process (needs the OS interface)"
    )]
    pub mon_pid: Vec<EvtPids>,

    /// Monitoring time in seconds, or inf/infinite (the default).
    // allow_negative_numbers: `-t -1128` is an invalid value of -t, not the flags -1 -1 -2 -8.
    #[arg(
        short = 't',
        long = "mon-time",
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    pub mon_time: Option<MonTime>,

    /// Monitoring interval in units of 100 ms (default 10 = 1 s).
    #[arg(
        short = 'i',
        long = "mon-interval",
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub mon_interval: Option<Interval>,

    /// Top-like monitoring output: rows sorted by LLC occupancy.
    #[arg(short = 'T', long = "mon-top")]
    pub mon_top: bool,

    /// Write monitoring data to FILE (text appends; csv, xml and json overwrite).
    #[arg(short = 'o', long = "mon-file", value_name = "FILE")]
    pub mon_file: Option<PathBuf>,

    /// Monitoring output format: text, xml, csv or json (one JSON object per row).
    #[arg(
        short = 'u',
        long = "mon-file-type",
        value_name = "TYPE",
        ignore_case = true
    )]
    pub mon_file_type: Option<FileType>,

    /// Show LLC occupancy as a percentage of the L3 size instead of KB.
    #[arg(short = 'P', long = "percent-llc")]
    pub percent_llc: bool,

    /// Do not monitor IPC.
    #[arg(long = "disable-mon-ipc")]
    pub disable_mon_ipc: bool,

    /// Do not monitor LLC misses.
    #[arg(long = "disable-mon-llc_miss")]
    pub disable_mon_llc_miss: bool,

    /// Verbose messages on stderr.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,

    /// Very verbose messages on stderr.
    #[arg(short = 'V', long = "super-verbose")]
    pub super_verbose: bool,

    /// Print the version and exit.
    #[arg(long = "version")]
    pub version: bool,

    /// List the allocation profiles (for -c) and exit.
    #[arg(short = 'H', long = "profile-list")]
    pub profile_list: bool,

    /// Apply an allocation profile: its L3 classes as -e items (CFG0..CFG3; see -H).
    #[arg(short = 'c', long = "profile-set", value_name = "PROFILE")]
    pub profile_set: Option<String>,

    /// Read commands from a configuration file, in place of this option ("KEY: VALUE" lines,
    /// e.g. "alloc-class-set: llc:1=0xf"; # comments). Only one -f.
    #[arg(short = 'f', long = "config-file", value_name = "FILE")]
    pub config_file: Option<PathBuf>,

    /// Apply a declarative configuration of named classes (TOML, or JSON for *.json), or
    /// goresctrl's RDT configuration (YAML: *.yaml, *.yml, or a `partitions:` line), as one
    /// transaction: prints each write and makes only the writes that change something. The
    /// file's classes end with exactly the CPUs it lists (and, for a class that lists tasks,
    /// the tasks of those processes): members no longer listed go back to COS0.
    #[arg(
        long = "apply",
        value_name = "FILE",
        conflicts_with_all = ["alloc_class", "alloc_assoc", "profile_set", "show", "display", "display_verbose"]
    )]
    pub apply: Option<PathBuf>,

    /// Extension of this pqos (not in Intel's): set which memory transactions AMD's MBM
    /// events count (BMEC, or ABMC's event_filter on the OS interface; QOS_EVT_CFG_n on the
    /// MSR interface, which needs BMEC), e.g.
    /// `total=0x7f,local=0x15` (bit 0 local reads, 1 remote reads, 2 local non-temporal
    /// writes, 3 remote non-temporal writes, 4 local slow-memory reads, 5 remote slow-memory
    /// reads, 6 dirty victim writes). -R puts the defaults back (total 0x7f, local 0x15).
    #[arg(
        long = "mbm-config",
        value_name = "EVENT=BITS[,EVENT=BITS]",
        value_parser = mbm_config_parser,
        conflicts_with_all = ["alloc_class", "alloc_assoc", "profile_set", "show", "display", "display_verbose", "apply", "mon_core", "mon_pid", "mon_uncore", "mon_channel", "mon_dev"]
    )]
    pub mbm_config: Option<MbmConfig>,

    /// Extension of this pqos: switch resctrl's MBM counter assignment mode (AMD ABMC,
    /// Linux 6.18+): `mbm_event` (an MBM event counts only where a hardware counter is
    /// assigned to it; pqos's monitoring assigns them) or `default` (every group counts).
    /// The switch frees every assignment and resets every MBM count. OS interface only.
    #[arg(
        long = "mbm-assign-mode",
        value_name = "MODE",
        value_parser = assign_mode_parser,
        conflicts_with_all = ["alloc_class", "alloc_assoc", "profile_set", "show", "display", "display_verbose", "apply", "mon_core", "mon_pid", "mon_uncore", "mon_channel", "mon_dev", "mbm_config"]
    )]
    pub mbm_assign_mode: Option<rdt_pqos::AssignMode>,

    /// Extension of this pqos: enable (`on`) or disable (`off`) L3 I/O allocation (AMD
    /// SDCIAE, Linux 6.19+: resctrl's info/L3/io_alloc). Enabled, I/O traffic fills the L3
    /// with the masks of the highest class, which no longer serves CPUs or tasks. OS
    /// interface only.
    #[arg(
        long = "io-alloc",
        value_name = "on|off",
        value_parser = on_off_parser,
        conflicts_with_all = ["alloc_class", "alloc_assoc", "profile_set", "show", "display", "display_verbose", "apply", "mon_core", "mon_pid", "mon_uncore", "mon_channel", "mon_dev", "mbm_config", "mbm_assign_mode"]
    )]
    pub io_alloc: Option<bool>,

    /// With --apply: print the writes the configuration needs and write nothing.
    #[arg(long = "dry-run", requires = "apply")]
    pub dry_run: bool,

    /// With --apply: take the file's named classes away instead, those this library made
    /// (another tool's group of a name is left alone, with a warning): their masks and
    /// limits back to the defaults, their CPUs and tasks back to COS0, the name given up
    /// (OS interface: its resctrl group removed), as one transaction.
    #[arg(long = "remove", requires = "apply")]
    pub remove: bool,

    /// With --apply of goresctrl's YAML: put PREFIX before every class's name to make its
    /// resctrl group's, as goresctrl's embedding runtime does (`rdt.Initialize(prefix)`);
    /// the root class is never prefixed. With --remove, the groups of that prefix go.
    #[arg(long = "group-prefix", value_name = "PREFIX", requires = "apply")]
    pub group_prefix: Option<String>,

    /// With --apply of goresctrl's YAML: also remove the named classes this pqos made whose
    /// names have the --group-prefix and that the file no longer names (never another
    /// tool's group; a group still holding tasks is refused), in the same transaction.
    #[arg(long = "prune", requires = "apply", conflicts_with = "remove")]
    pub prune: bool,

    /// With --apply of goresctrl's YAML and --group-prefix: migrating from OWNER (only
    /// `goresctrl`), adopt the groups with the prefix that OWNER made, so that the file's
    /// classes take over their groups and --prune removes those the file no longer names
    /// (a group still holding tasks or monitor groups is refused, naming it). Never done
    /// without this flag: a class named like another tool's group is refused.
    #[arg(
        long = "adopt",
        value_name = "OWNER",
        requires = "group_prefix",
        conflicts_with = "remove"
    )]
    pub adopt: Option<rdt_pqos::config::goresctrl::PreviousOwner>,

    /// Write log messages (WARN; INFO with -v; DEBUG with -V) to FILE instead of stderr.
    #[arg(short = 'l', long = "log-file", value_name = "FILE")]
    pub log_file: Option<PathBuf>,

    /// Use the OS (resctrl) interface; same as --iface=os.
    #[arg(short = 'I', long = "iface-os", conflicts_with = "iface")]
    pub iface_os: bool,

    /// The interface: auto, msr, os or mmio.
    #[arg(long = "iface", value_name = "IFACE", ignore_case = true, value_parser = iface_parser())]
    pub iface: Option<rdt_pqos::Iface>,

    /// MMIO interface: the memory regions whose local bandwidth `-m` shows, one column each
    /// (default: every region), e.g. `0` or `3,2`.
    #[arg(long = "mon-mem-regions", value_name = "REGIONS", value_parser = region_list_parser)]
    pub mon_mem_regions: Option<IdList<u8>>,

    /// MMIO interface: the memory regions an `-e mba:COS=VALUE` sets (a range or one
    /// region, e.g. `1` or `0-3`).
    #[arg(
        long = "alloc-mem-regions",
        alias = "alloc-mem-region",
        value_name = "REGIONS",
        value_parser = region_list_parser
    )]
    pub alloc_mem_regions: Option<IdList<u8>>,

    /// MMIO interface: the ERDT domains an `-e mba:COS=VALUE` sets (a list or range).
    #[arg(long = "alloc-domain-id", value_name = "DOMAINS", value_parser = domain_list_parser)]
    pub alloc_domain_id: Option<IdList<u16>>,

    /// MMIO interface: `-e mba:` sets the optimal bandwidth control (without any of
    /// --alloc-opt-bw/--alloc-min-bw/--alloc-max-bw: all three).
    #[arg(long = "alloc-opt-bw")]
    pub alloc_opt_bw: bool,

    /// MMIO interface: `-e mba:` sets the minimum bandwidth control.
    #[arg(long = "alloc-min-bw")]
    pub alloc_min_bw: bool,

    /// MMIO interface: `-e mba:` sets the maximum bandwidth control.
    #[arg(long = "alloc-max-bw")]
    pub alloc_max_bw: bool,

    /// `--sim`: the simulated platform's model.
    #[arg(
        long = "sim",
        value_name = "MODEL",
        env = "RDT_SIM",
        num_args = 0..=1,
        default_missing_value = DEFAULT_SIM_MODEL,
        help = "Use a simulated platform instead of the hardware: a built-in model name or the \
                path of a CPUID dump [default: broadwell-ep]"
    )]
    pub sim: Option<String>,

    /// `--sim-state`: where the simulated platform's state persists.
    #[arg(
        long = "sim-state",
        value_name = "PATH",
        requires = "sim",
        help = "The simulated platform's state file [default: MODEL.json in $XDG_RUNTIME_DIR/rdt-sim, \
                else in ~/.local/state/rdt-sim]"
    )]
    pub sim_state: Option<PathBuf>,

    /// `--sim-fresh`: start the simulated platform from its reset state.
    #[arg(
        long = "sim-fresh",
        requires = "sim",
        help = "Start the simulated platform from the model's reset state, discarding what earlier \
                runs saved in the state file (without it, a platform earlier runs changed says so \
                once on stderr)"
    )]
    pub sim_fresh: bool,

    /// `--sim-scenario`: a workload scenario for the simulated platform.
    #[arg(
        long = "sim-scenario",
        value_name = "FILE",
        requires = "sim",
        help = "Install a workload scenario (JSON, see rdt-sim's scenario docs; builtin:NAME for a \
                built-in one, e.g. builtin:dpdk-pipeline with --sim skylake-sp) in the simulated \
                platform before running; it stays in the state file"
    )]
    pub sim_scenario: Option<PathBuf>,

    /// `--sim-kernel`: the Linux release whose resctrl the simulated platform serves.
    #[arg(
        long = "sim-kernel",
        value_name = "RELEASE",
        requires = "sim",
        help = "The Linux release the simulated platform runs, which decides its resctrl files: \
                6.17, 6.18 (ABMC counter assignment) or 6.19 (io_alloc) [default: 6.19]"
    )]
    pub sim_kernel: Option<String>,

    /// `--sysroot`: where the platform's device and sysfs files are.
    #[arg(
        long = "sysroot",
        value_name = "DIR",
        env = "RDT_SYSROOT",
        conflicts_with = "sim",
        help = "Look up /dev/cpu and /sys under DIR instead of / (a mounted simulated platform: \
                rdt-sim mount DIR); /proc stays the host's"
    )]
    pub sysroot: Option<PathBuf>,

    /// Monitoring advances the simulated clock by each interval instead of sleeping
    /// (`RDT_SIM_VIRTUAL_CLOCK=true`: how the guide's transcripts are checked, tests/docs.rs).
    #[arg(
        long = "sim-virtual-clock",
        env = "RDT_SIM_VIRTUAL_CLOCK",
        hide = true,
        requires = "sim"
    )]
    pub sim_virtual_clock: bool,

    /// pqos v26.03's RDT 1.3 table reports and register dumps.
    #[command(flatten)]
    pub tables: tables::TableArgs,
}

/// A clap error of `kind` with pqos's message, printed by `main` as clap errors are.
fn arg_error(kind: ErrorKind, message: &str) -> clap::Error {
    clap::Error::raw(kind, format!("{message}\n"))
}

/// `pqos -H`: the profile list on stdout, exit 0, as soon as `-H` is seen (pqos answers it
/// in its getopt loop, before the platform is opened). Built as clap's own help output, so
/// `main` prints it and exits 0 as it does for `-h`.
fn profile_list_exit() -> clap::Error {
    let mut cmd = clap::Command::new("pqos")
        .help_template(crate::profiles::list_text())
        .disable_help_flag(true)
        .arg(
            clap::Arg::new("profile-list")
                .short('H')
                .action(clap::ArgAction::Help),
        );
    match cmd.try_get_matches_from_mut(["pqos", "-H"]) {
        Err(e) => e,
        Ok(_) => arg_error(ErrorKind::DisplayHelp, &crate::profiles::list_text()),
    }
}

impl CommandFactory for Args {
    fn command() -> clap::Command {
        <Self as clap::Args>::augment_args(clap::Command::new("pqos"))
    }

    fn command_for_update() -> clap::Command {
        <Self as clap::Args>::augment_args_for_update(clap::Command::new("pqos"))
    }
}

impl Parser for Args {
    /// Parses this process's command line the pqos way ([`Args::try_parse_argv`]) and
    /// installs the log sink of `-l`/`-v`/`-V` ([`logger::Sink`]).
    fn try_parse() -> Result<Self, clap::Error> {
        let args = Self::try_parse_argv(std::env::args_os().collect())?;
        let verbosity = if args.super_verbose {
            2
        } else {
            u8::from(args.verbose)
        };
        let json = args.mon_file_type == Some(FileType::Json);
        let sink =
            logger::Sink::for_args(args.log_file.as_deref(), verbosity, json).map_err(|e| {
                let name = args
                    .log_file
                    .as_deref()
                    .map_or_else(String::new, |p| p.display().to_string());
                arg_error(
                    ErrorKind::Io,
                    &format!("Error opening {name} log file! ({e})"),
                )
            })?;
        sink.install();
        Ok(args)
    }

    fn try_parse_from<I, T>(itr: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Self::try_parse_argv(itr.into_iter().map(Into::into).collect())
    }
}

impl Args {
    /// Parses an argument list the pqos way, without installing the log sink: `-f FILE` is
    /// replaced by the file's options where it stands ([`config_file::expand`]), then clap
    /// parses, then `-H` answers at once.
    ///
    /// # Errors
    /// A clap error to print: bad options or values, a bad configuration file; `-h` and
    /// `-H` as clap's help "errors" (printed on stdout, exit 0).
    pub fn try_parse_argv(argv: Vec<OsString>) -> Result<Self, clap::Error> {
        if let Some(message) = not_built_yet(&argv) {
            return Err(arg_error(ErrorKind::InvalidValue, &message));
        }
        let mut cmd = Self::command();
        let argv = config_file::expand(argv, &mut cmd)
            .map_err(|m| arg_error(ErrorKind::ValueValidation, &m))?;
        let mut matches = cmd.try_get_matches_from_mut(argv)?;
        let parsed = Self::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd))?;
        if parsed.profile_list {
            return Err(profile_list_exit());
        }
        Ok(parsed)
    }
}

/// pqos v26.03's options of the RDT 1.3 MMIO generation and I/O RDT that this pqos does not
/// have yet (issue 34), each with what it needs: refused by name, never taken for an
/// unknown option or silently ignored. Source: pqos v26.03 `pqos/main.c` (long options).
/// Empty since `--mon-channel`/`--mon-dev` were built; kept for the next option that is
/// known but not built.
const NOT_BUILT_YET: [(&str, &str); 0] = [];

/// pqos's options that exist only in a build with `PQOS_RMID_CUSTOM` (`pqos/main.c`: fixed
/// RMIDs for cores and I/O RDT channels instead of the library's allocation); pqos's default
/// build, whose behaviour this pqos follows, does not know them.
const RMID_CUSTOM: [&str; 2] = ["--rmid", "--rmid-channels"];

/// The refusal of the first argument that names an option of [`NOT_BUILT_YET`] (as
/// `--NAME` or `--NAME=VALUE`).
fn not_built_yet(argv: &[OsString]) -> Option<String> {
    let words: Vec<&str> = argv.iter().skip(1).filter_map(|a| a.to_str()).collect();
    for arg in &words {
        let name = arg.split_once('=').map_or(*arg, |(n, _)| n);
        if let Some((opt, needs)) = NOT_BUILT_YET.iter().find(|(o, _)| *o == name) {
            return Some(format!(
                "{opt}: pqos v26.03's option for {needs} is not implemented yet in this pqos"
            ));
        }
        if let Some(opt) = RMID_CUSTOM.iter().find(|o| **o == name) {
            return Some(format!(
                "{opt}: pqos has this option only when built with PQOS_RMID_CUSTOM (fixed \
                 RMIDs for cores and I/O RDT channels); this pqos follows pqos's default \
                 build, which allocates RMIDs itself"
            ));
        }
    }
    None
}

/// A list of numbers and ranges (`0`, `3,2`, `0-3`) as pqos's `strlisttotab`, each below
/// `limit`; at most 64 entries.
fn number_list(s: &str, limit: u64, what: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim) {
        let num = |t: &str| {
            rdt_pqos::parse_number(t.trim())
                .ok()
                .filter(|n| *n < limit)
                .ok_or_else(|| format!("`{t}`: {what} are numbers from 0 to {}", limit - 1))
        };
        let (a, b) = if let Some((a, b)) = item.split_once('-') {
            (num(a)?, num(b)?)
        } else {
            let n = num(item)?;
            (n, n)
        };
        if a > b {
            return Err(format!("`{item}`: a range goes up"));
        }
        for n in a..=b {
            if !out.contains(&n) {
                out.push(n);
            }
            if out.len() > 64 {
                return Err(format!("`{s}`: more than 64 {what}"));
            }
        }
    }
    Ok(out)
}

/// A list of ids given as one option value (`0,1`, `0-3`), in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdList<T>(pub Vec<T>);

/// `--mon-mem-regions`, `--alloc-mem-regions`: memory region ids (0-255).
fn region_list_parser(s: &str) -> Result<IdList<u8>, String> {
    number_list(s, 256, "memory regions")
        .map(|v| IdList(v.into_iter().filter_map(|n| u8::try_from(n).ok()).collect()))
}

/// `--alloc-domain-id`: ERDT domain ids (0-65535).
fn domain_list_parser(s: &str) -> Result<IdList<u16>, String> {
    number_list(s, 65536, "domain ids").map(|v| {
        IdList(
            v.into_iter()
                .filter_map(|n| u16::try_from(n).ok())
                .collect(),
        )
    })
}

/// `--mbm-assign-mode`: the kernel's mode names.
fn assign_mode_parser(s: &str) -> Result<rdt_pqos::AssignMode, String> {
    match s {
        "mbm_event" => Ok(rdt_pqos::AssignMode::MbmEvent),
        "default" => Ok(rdt_pqos::AssignMode::Default),
        other => Err(format!("`{other}`: the modes are mbm_event and default")),
    }
}

/// `--io-alloc`: `on` or `off`.
fn on_off_parser(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("`{other}`: on or off")),
    }
}

/// `--mbm-config`: the MBM events' transaction bitmasks to set, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MbmConfig(pub Vec<(rdt_pqos::RmidEvent, u32)>);

/// Parses `total=0x7f,local=0x15` (`mbt`/`mbl` and the kernel's event names too; values
/// hex with `0x` or decimal, at most 0x7f).
fn mbm_config_parser(s: &str) -> Result<MbmConfig, String> {
    use rdt_pqos::RmidEvent;
    let mut out = Vec::new();
    for item in s.split(',') {
        let (ev, v) = item
            .split_once('=')
            .ok_or_else(|| format!("`{item}`: expected EVENT=BITS (total=0x7f)"))?;
        let event = match ev.trim() {
            "total" | "mbt" | "mbm_total_bytes" => RmidEvent::MbmTotal,
            "local" | "mbl" | "mbm_local_bytes" => RmidEvent::MbmLocal,
            other => return Err(format!("`{other}`: the events are total and local")),
        };
        let bits = rdt_pqos::parse_number(v.trim())
            .ok()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n <= rdt_pqos::mbm::MBM_CONFIG_ALL)
            .ok_or_else(|| format!("`{v}`: a transaction bitmask from 0 to 0x7f"))?;
        out.push((event, bits));
    }
    Ok(MbmConfig(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v26_03_options_not_built_yet_are_refused_by_name() {
        // every v26.03 I/O RDT monitoring option is built now: parsed, not refused
        assert!(NOT_BUILT_YET.is_empty());
        for argv in [
            &["pqos", "--mon-dev=all:0000:16:00.0@0"][..],
            &["pqos", "--mon-channel=all:0x10000", "-t", "1"],
        ] {
            Args::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        }
        let e = Args::try_parse_from(["pqos", "--mon-dev=llc:x"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("Invalid PCI ID"), "{e}");
        // options of a PQOS_RMID_CUSTOM build, refused saying so
        for argv in [
            &["pqos", "--rmid=1=0-3"][..],
            &["pqos", "--rmid-channels=2=0x10100"],
        ] {
            let e = Args::try_parse_from(argv).unwrap_err().to_string();
            assert!(
                e.contains("PQOS_RMID_CUSTOM") && e.contains(argv[1].split('=').next().unwrap()),
                "{argv:?}: {e}"
            );
        }
        // built now: the MMIO interface and its region options
        let a = Args::try_parse_from([
            "pqos",
            "--iface=mmio",
            "--alloc-domain-id=0-2,5",
            "--alloc-mem-region=1",
            "--alloc-max-bw",
            "--mon-mem-regions=3,2",
            "-s",
        ])
        .unwrap();
        assert_eq!(a.iface, Some(rdt_pqos::Iface::Mmio));
        assert_eq!(a.alloc_domain_id, Some(IdList(vec![0, 1, 2, 5])));
        assert_eq!(a.alloc_mem_regions, Some(IdList(vec![1])));
        assert_eq!(a.mon_mem_regions, Some(IdList(vec![3, 2])));
        assert!(a.alloc_max_bw && !a.alloc_min_bw && !a.alloc_opt_bw);
        let e = Args::try_parse_from(["pqos", "--mon-mem-regions=256", "-s"]).unwrap_err();
        assert!(e.to_string().contains("0 to 255"), "{e}");
        let e = Args::try_parse_from(["pqos", "--alloc-domain-id=3-1", "-s"]).unwrap_err();
        assert!(e.to_string().contains("a range goes up"), "{e}");
        // an option of the same prefix is not taken for one
        assert!(Args::try_parse_from(["pqos", "-s"]).is_ok());
        // the table reports and dumps are built (issue 34)
        for argv in [
            &["pqos", "--print-mem-regions"][..],
            &["pqos", "--print-topology"],
            &["pqos", "--print-dump-info"],
            &[
                "pqos",
                "--dump",
                "--dump-domain-id=0",
                "--space=MMRC",
                "--width=8",
                "--le",
            ],
            &[
                "pqos",
                "--dump-rmid-regs",
                "--dump-rmids=0-3",
                "--dump-rmid-type=l3",
            ],
            &["pqos", "--print-io-devs"],
            &[
                "pqos",
                "--print-io-dev=0000:16:00.0",
                "--print-io-dev=96:00.1",
            ],
        ] {
            assert!(Args::try_parse_from(argv).is_ok(), "{argv:?}");
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    #[cfg(feature = "sim")]
    fn help_lists_every_built_in_model_and_wraps() {
        let help = Args::command().render_long_help().to_string();
        let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for model in rdt_pqos::sim::BUILTIN_MODELS {
            assert!(
                flat.contains(&format!(" {model}")),
                "{model} missing:\n{help}"
            );
        }
        assert!(flat.contains("broadwell-ep (default)"), "{help}");
        let notes = help
            .split("Simulated platforms")
            .nth(1)
            .expect("the models note");
        assert!(notes.lines().all(|l| l.len() <= 88), "{notes}");
    }

    #[test]
    fn mbm_config_takes_both_events_and_refuses_wrong_ones() {
        use rdt_pqos::RmidEvent;
        assert_eq!(
            mbm_config_parser("total=0x7f,local=21,mbl=0"),
            Ok(MbmConfig(vec![
                (RmidEvent::MbmTotal, 0x7f),
                (RmidEvent::MbmLocal, 0x15),
                (RmidEvent::MbmLocal, 0),
            ]))
        );
        for bad in ["total", "llc=0x1", "total=0x80", "local=-1", "total=0x7f,"] {
            assert!(mbm_config_parser(bad).is_err(), "{bad}");
        }
    }

    fn parse(argv: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("pqos").chain(argv.iter().copied())).unwrap()
    }

    #[test]
    fn alloc_reset_takes_an_optional_value_and_never_a_following_option() {
        assert_eq!(parse(&["-R"]).alloc_reset, Some(ResetCfg::default()));
        let a = parse(&["-R", "-s"]);
        assert_eq!(a.alloc_reset, Some(ResetCfg::default()));
        assert!(a.show);
        let a = parse(&["-R", "l3cdp-on"]);
        assert_eq!(
            a.alloc_reset.unwrap().0.l3_cdp,
            rdt_pqos::FeatureSetting::On
        );
        let a = parse(&["--alloc-reset=l3cdp-off"]);
        assert_eq!(
            a.alloc_reset.unwrap().0.l3_cdp,
            rdt_pqos::FeatureSetting::Off
        );
    }

    #[test]
    fn repeated_options_accumulate() {
        let a = parse(&[
            "-e",
            "llc:1=0xf",
            "-e",
            "llc:2=0xf0",
            "-m",
            "llc:0",
            "-m",
            "mbl:1",
        ]);
        assert_eq!(a.alloc_class.len(), 2);
        assert_eq!(a.mon_core.len(), 2);
    }

    #[test]
    fn sim_model_is_optional() {
        assert_eq!(parse(&["--sim", "-d"]).sim.as_deref(), Some("broadwell-ep"));
        assert_eq!(parse(&["--sim=milan", "-d"]).sim.as_deref(), Some("milan"));
        assert_eq!(parse(&["--sim", "milan"]).sim.as_deref(), Some("milan"));
        assert_eq!(parse(&["-d"]).sim, None);
    }

    #[test]
    fn sysroot_is_a_directory_and_excludes_sim() {
        assert_eq!(
            parse(&["--sysroot", "/tmp/rdt", "-s"]).sysroot,
            Some(PathBuf::from("/tmp/rdt"))
        );
        let e = Args::try_parse_from(["pqos", "--sim", "--sysroot", "/tmp/rdt"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn file_type_and_iface_are_case_insensitive() {
        assert_eq!(parse(&["-u", "CSV"]).mon_file_type, Some(FileType::Csv));
        assert_eq!(parse(&["--iface=MSR"]).iface, Some(rdt_pqos::Iface::Msr));
    }

    #[test]
    fn only_one_of_iface_os_and_iface() {
        let e = Args::try_parse_from(["pqos", "-I", "--iface=msr"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn bad_values_are_reported_by_clap_naming_option_and_token() {
        let e = Args::try_parse_from(["pqos", "-e", "llc1="])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--alloc-class <CLASSDEF>") && e.contains("\"llc1=\""),
            "{e}"
        );
        let e = Args::try_parse_from(["pqos", "-i", "0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--mon-interval"), "{e}");
    }

    #[test]
    fn a_negative_time_or_interval_is_an_invalid_value_of_that_option() {
        // clap took `-1128` for the flags -1 -1 -2 -8: "unexpected argument '-1' found".
        for (argv, option) in [
            (["pqos", "-t", "-1128"], "'--mon-time <SECONDS>'"),
            (["pqos", "-i", "-5"], "'--mon-interval <N>'"),
        ] {
            let e = Args::try_parse_from(argv).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{e}");
            let text = e.to_string();
            assert!(
                text.contains(&format!("invalid value '{}' for {option}", argv[2])),
                "{text}"
            );
        }
        // an option letter after -t is still an option letter
        assert!(Args::try_parse_from(["pqos", "-t", "-s"]).is_err());
    }
}
