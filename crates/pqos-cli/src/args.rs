//! The command line as pqos(8) defines it: flat flags with pqos's letters and long names,
//! plus `--sim[=MODEL]` and `--sim-state` to choose the simulated platform.
//!
//! Each complex value goes through its own `FromStr` (see [`crate::grammar`]), so clap
//! reports bad values naming the option and the token. [`crate::command::Plan::from_args`]
//! then turns the flags into one validated [`crate::command::Command`].

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::grammar::{
    AssocDefs, ClassDefs, EvtCores, EvtPids, Interval, MonResetCfg, MonTime, ResetCfg,
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

/// `--iface`: which interface programs the hardware.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IfaceArg {
    /// Let the tool choose (MSR for now).
    Auto,
    /// Model-specific registers (`/dev/cpu/N/msr`).
    Msr,
    /// The Linux resctrl filesystem.
    Os,
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
  pqos -R                                   reset allocation (-R l3cdp-on: and turn CDP on)
  pqos -m \"all:[2-7];all:[8-10]\" -t 10      monitor two core groups for 10 s
  pqos -r -m all:0-3 -i 5                   reset RMIDs, monitor cores 0-3 every 500 ms
  pqos --sim=skylake-sp -d                  the same commands on a simulated platform

Simulated platforms (--sim=MODEL): broadwell-ep (default), skylake-sp, milan,
sapphire-rapids, or the path of a CPUID dump. Their state persists between runs in a
state file (--sim-state PATH).";

/// pqos: Intel RDT / AMD PQoS monitoring and allocation, compatible with intel-cmt-cat's pqos.
#[derive(Parser, Debug, Default)]
#[command(
    name = "pqos",
    about = "Intel(R) RDT / AMD PQoS: monitor and allocate last-level cache and memory bandwidth",
    long_about = None,
    disable_version_flag = true,
    after_help = AFTER_HELP
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
        help = "Monitor cores: EVENT:CORES[;...] with EVENT llc, mbl, mbr, mbt or all; [a-b] is \
                one group, a-b is one group per core"
    )]
    pub mon_core: Vec<EvtCores>,

    /// `-p`: process monitoring groups.
    #[arg(
        short = 'p',
        long = "mon-pid",
        value_name = "EVTPIDS",
        num_args = 0..=1,
        default_missing_value = "",
        help = "Monitor processes: EVENT:PIDS[;...] with EVENT llc, mbl, mbr, mbt or all; \
                [a,b] is one group, a,b is one group per process (needs the OS interface)"
    )]
    pub mon_pid: Vec<EvtPids>,

    /// Monitoring time in seconds, or inf/infinite (the default).
    #[arg(short = 't', long = "mon-time", value_name = "SECONDS")]
    pub mon_time: Option<MonTime>,

    /// Monitoring interval in units of 100 ms (default 10 = 1 s).
    #[arg(short = 'i', long = "mon-interval", value_name = "N")]
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

    /// Use the OS (resctrl) interface; same as --iface=os.
    #[arg(short = 'I', long = "iface-os", conflicts_with = "iface")]
    pub iface_os: bool,

    /// The interface: auto, msr or os.
    #[arg(long = "iface", value_name = "IFACE", ignore_case = true)]
    pub iface: Option<IfaceArg>,

    /// `--sim`: the simulated platform's model.
    #[arg(
        long = "sim",
        value_name = "MODEL",
        num_args = 0..=1,
        default_missing_value = "broadwell-ep",
        help = "Use a simulated platform instead of the hardware: a built-in model name or the \
                path of a CPUID dump [default: broadwell-ep]"
    )]
    pub sim: Option<String>,

    /// `--sim-state`: where the simulated platform's state persists.
    #[arg(
        long = "sim-state",
        value_name = "PATH",
        requires = "sim",
        help = "The simulated platform's state file [default: $XDG_RUNTIME_DIR/rdt-sim-MODEL.json]"
    )]
    pub sim_state: Option<PathBuf>,

    /// `--sim-scenario`: a workload scenario for the simulated platform.
    #[arg(
        long = "sim-scenario",
        value_name = "FILE",
        requires = "sim",
        help = "Install a workload scenario (JSON, see rdt-sim's scenario docs) in the simulated \
                platform before running; it stays in the state file"
    )]
    pub sim_scenario: Option<PathBuf>,

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

    /// Monitoring advances the simulated clock by each interval instead of sleeping.
    #[arg(long = "sim-virtual-clock", hide = true, requires = "sim")]
    pub sim_virtual_clock: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn clap_definition_is_consistent() {
        Args::command().debug_assert();
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
            rdt_core::FeatureSetting::On
        );
        let a = parse(&["--alloc-reset=l3cdp-off"]);
        assert_eq!(
            a.alloc_reset.unwrap().0.l3_cdp,
            rdt_core::FeatureSetting::Off
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
        assert_eq!(parse(&["--iface=MSR"]).iface, Some(IfaceArg::Msr));
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
}
