//! The command line of `rdtset`, intel-cmt-cat's taskset-like launcher (removed from
//! intel-cmt-cat master; `rdtset(8)` and `rdtset/rdtset.c` of v25.04's predecessors,
//! `../shared/spec/pqos.md` §8): the clap definition ([`RdtsetArgs`]) and the grammar of
//! `-t` ([`ClassSpec`]).
//!
//! ```text
//! rdtset -t 'l3=0xf;mba=50;cpu=2-3' -c 2-3 CMD ARGS...
//! rdtset -I -t 'l3=0xf0' -p 1234,5678
//! ```
//!
//! `-t` takes `FEATURE=VALUE` items separated by `;`: `l3`/`3` (a mask, or with CDP on
//! `CODE,DATA`: `0xf,0xf0`), `l2`/`2` (the same for L2), `mba`/`m` (percent), `mba_max`/`b`
//! (MiB/s, the kernel's `mba_MBps` controller), `smba`/`s` (AMD slow-memory bandwidth, in
//! 1/8 GB/s units), `cpu` (the CPUs the class is given to).

use std::path::PathBuf;

use clap::Parser;
use rdt_pqos::lease::ClassRequest;
use rdt_pqos::{CacheBitmask, CatMask, CpuSet, MbaLimit, TaskId, parse_number};

/// `rdtset --help`'s examples (those of rdtset(8) and rdtset.c's usage text, in this
/// rdtset's flags), which the man page lists too.
const AFTER_HELP: &str = "\
Examples:
  rdtset -t 'l3=0xf;cpu=1' -c 1 id                         run id on CPU 1 with four L3 ways (mask 0xf)
  rdtset -t 'l2=0x1;l3=0xf;cpu=1' -c 1 id                  CPU 1 with one L2 way and four L3 ways
  rdtset -t 'l3=0xf;cpu=2' -t 'l3=0xf0;cpu=3-5' -c 2-5 id  CPU 2 and CPUs 3-5 in two classes on separate ways
  rdtset -t 'l3=0xf,0xf0;cpu=1' -c 1 id                    with CDP on: four L3 ways for code, four for data
  rdtset -t 'mba=50;l3=0xf;cpu=1' -c 1 id                  four L3 ways and at most 50% of memory bandwidth
  rdtset -I -t 'l3=0xf' -p 23187,567                       place running processes in a class (OS interface)
  rdtset -I -t 'mba=50' memtester 10M                      a class of the command's own, by process (OS interface)
  rdtset -r 0-5 -p $BASHPID                                reset the allocation of CPUs 0-5 (back to COS0)
  rdtset -r 0-5 -t 'l3=0xff;cpu=0-5' -p $BASHPID           reset CPUs 0-5, then give them a class
  rdtset -r 1 -c 1 id                                      reset CPU 1, then run id there in COS0
";

/// `rdtset`: run a command, or place running processes, in a class of service of its own.
#[derive(Debug, Parser)]
#[command(
    name = "rdtset",
    version,
    about = "Run a command (or place processes) in a class of service of its own: \
             rdtset -t 'l3=0xf;cpu=2-3' -c 2-3 CMD ARGS...",
    after_help = AFTER_HELP,
    group(clap::ArgGroup::new("target").args(["pid", "command"]))
)]
pub struct RdtsetArgs {
    /// The class: `FEATURE=VALUE` items separated by `;` (l3, l2, mba, mba_max, cpu), e.g.
    /// 'l3=0xf;mba=50;cpu=2-3'. Repeat for more classes, each with its own `cpu=`.
    #[arg(
        short = 't',
        long = "set",
        value_name = "FEATURES",
        required_unless_present_any = ["exec_in_class", "reset"]
    )]
    pub set: Vec<ClassSpec>,

    /// Reset the allocation of these CPUs first: put them back in COS0 (then run the
    /// command, or with -p and no -t nothing more, as rdtset's -r).
    #[arg(
        short = 'r',
        long = "reset",
        value_name = "CPULIST",
        requires = "target"
    )]
    pub reset: Option<CpuSet>,

    /// The CPUs the command may run on (its CPU affinity), e.g. 2-3.
    #[arg(short = 'c', long = "cpu", value_name = "CPULIST")]
    pub cpu: Option<CpuSet>,

    /// Use the OS (resctrl) interface (the same as --iface=os).
    #[arg(short = 'I', long = "iface-os")]
    pub iface_os: bool,

    /// The interface: auto, msr or os (with -I, only os).
    #[arg(long = "iface", value_name = "IFACE")]
    pub iface: Option<rdt_pqos::Iface>,

    /// Running processes to place in the class instead of a command (OS interface); the
    /// class stays after rdtset exits.
    #[arg(
        short = 'p',
        long = "pid",
        value_name = "PIDLIST",
        value_delimiter = ',',
        conflicts_with = "command"
    )]
    pub pid: Vec<u32>,

    /// Keep the class after the command exits (by default it is given back).
    #[arg(long = "keep")]
    pub keep: bool,

    /// Say what is taken and given back, on stderr.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,

    /// Keep sudo's privileges for the command. Without it a command started under sudo
    /// runs as the user who ran sudo (SUDO_UID, SUDO_GID), as rdtset does.
    #[arg(short = 'k', long = "sudo-keep")]
    pub sudo_keep: bool,

    /// The directory `/dev/cpu`, `/sys` and resctrl are under (a mounted simulated platform).
    #[arg(long = "sysroot", value_name = "DIR", env = "RDT_SYSROOT")]
    pub sysroot: Option<PathBuf>,

    /// Internal: the process rdtset starts, which enters class N itself, sets its CPU
    /// affinity and then becomes the command.
    #[arg(long = "exec-in-class", value_name = "N", hide = true)]
    pub exec_in_class: Option<u32>,

    /// The command and its arguments.
    #[arg(
        value_name = "CMD",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<String>,
}

/// The user and group a command started under sudo runs as (rdtset.c `sudo_drop`): the
/// numbers in `SUDO_UID` and `SUDO_GID` as `lookup` gives them (`std::env::var`), `None`
/// when either is unset (not started by sudo).
///
/// # Errors
/// A variable that is set but is not a number names itself and its value.
///
/// # Examples
/// ```
/// use pqos_cli::rdtset::sudo_ids;
/// let env = |k: &str| match k {
///     "SUDO_UID" => Some("1000".to_owned()),
///     "SUDO_GID" => Some("100".to_owned()),
///     _ => None,
/// };
/// assert_eq!(sudo_ids(env), Ok(Some((1000, 100))));
/// assert_eq!(sudo_ids(|_| None), Ok(None));
/// ```
pub fn sudo_ids(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<(u32, u32)>, String> {
    let number = |name: &str| -> Result<Option<u32>, String> {
        lookup(name)
            .map(|v| {
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("{name}={v:?} is not a user or group number"))
            })
            .transpose()
    };
    Ok(number("SUDO_UID")?.zip(number("SUDO_GID")?))
}

impl RdtsetArgs {
    /// The interface asked for: `-I` and `--iface=os` say the same and may come together,
    /// as rdtset's usage allows.
    ///
    /// # Errors
    /// `-I` with `--iface` of another interface, naming both.
    pub fn iface(&self) -> Result<rdt_pqos::Iface, String> {
        match (self.iface_os, self.iface) {
            (true, Some(i)) if i != rdt_pqos::Iface::Os => Err(format!(
                "-I (the OS interface) and --iface={i} contradict each other"
            )),
            (true, _) => Ok(rdt_pqos::Iface::Os),
            (false, i) => Ok(i.unwrap_or_default()),
        }
    }

    /// The processes of `-p`.
    #[must_use]
    pub fn pids(&self) -> Vec<TaskId> {
        self.pid.iter().map(|&p| TaskId::new(p)).collect()
    }
}

/// One `-t` value: what one class holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassSpec(pub ClassRequest);

/// A `-t` value that does not follow the grammar; the message names the item.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ClassSpecError(String);

const RULE: &str = "expected FEATURE=VALUE items separated by ';' with FEATURE one of l3, l2, \
                    mba, mba_max, smba, cpu, e.g. 'l3=0xf;mba=50;cpu=2-3'";

/// A mask, or `CODE,DATA` masks (CDP).
fn cat_masks(item: &str, value: &str) -> Result<CatMask, ClassSpecError> {
    let mask = |t: &str| {
        t.parse::<CacheBitmask>()
            .map_err(|e| ClassSpecError(format!("`{item}`: {e}")))
    };
    match value.split_once(',') {
        None => Ok(CatMask::Unified(mask(value)?)),
        Some((code, data)) => Ok(CatMask::Cdp {
            data: mask(data)?,
            code: mask(code)?,
        }),
    }
}

fn number(item: &str, value: &str, what: &str) -> Result<u32, ClassSpecError> {
    parse_number(value)
        .ok()
        .and_then(|v| u32::try_from(v).ok())
        .filter(|&v| v > 0)
        .ok_or_else(|| ClassSpecError(format!("`{item}`: `{value}` is not {what}")))
}

impl std::str::FromStr for ClassSpec {
    type Err = ClassSpecError;

    fn from_str(s: &str) -> Result<Self, ClassSpecError> {
        let mut req = ClassRequest::default();
        let mut seen: Vec<&'static str> = Vec::new();
        for item in s.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((feature, value)) = item.split_once('=') else {
                return Err(ClassSpecError(format!("`{item}` has no `=` ({RULE})")));
            };
            let value = value.trim();
            let key = match feature.trim().to_ascii_lowercase().as_str() {
                "l3" | "3" => {
                    req.l3 = Some(cat_masks(item, value)?);
                    "l3"
                }
                "l2" | "2" => {
                    req.l2 = Some(cat_masks(item, value)?);
                    "l2"
                }
                "mba" | "m" => {
                    let p = number(item, value, "a percentage from 1 to 100")?;
                    let p = u8::try_from(p).ok().filter(|p| *p <= 100).ok_or_else(|| {
                        ClassSpecError(format!(
                            "`{item}`: `{value}` is not a percentage from 1 to 100"
                        ))
                    })?;
                    req.mba = Some(MbaLimit::Percent(p));
                    "mba"
                }
                "mba_max" | "b" => {
                    req.mba = Some(MbaLimit::MibPerSec(number(item, value, "a rate in MBps")?));
                    "mba"
                }
                "cpu" => {
                    req.cpus = value
                        .parse()
                        .map_err(|e| ClassSpecError(format!("`{item}`: {e}")))?;
                    "cpu"
                }
                "smba" | "s" => {
                    // AMD units; the platform's range (1..=2^width) is the library's check.
                    req.smba = Some(MbaLimit::AmdUnits(number(
                        item,
                        value,
                        "a bandwidth in 1/8 GB/s units",
                    )?));
                    "smba"
                }
                other => {
                    return Err(ClassSpecError(format!(
                        "`{item}`: unknown feature `{other}` ({RULE})"
                    )));
                }
            };
            if seen.contains(&key) {
                return Err(ClassSpecError(format!(
                    "`{item}`: {key} is given twice in `{s}`"
                )));
            }
            seen.push(key);
        }
        if req.l3.is_none() && req.l2.is_none() && req.mba.is_none() && req.smba.is_none() {
            return Err(ClassSpecError(format!(
                "`{s}` sets no l3, l2, mba, mba_max or smba ({RULE})"
            )));
        }
        Ok(Self(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> Result<ClassRequest, String> {
        s.parse::<ClassSpec>()
            .map(|c| c.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn features_by_name_and_by_letter() {
        let r = spec("l3=0xf;mba=50;cpu=2-3").expect("valid");
        assert_eq!(r.l3, Some(CatMask::Unified("f".parse().expect("mask"))));
        assert_eq!(r.mba, Some(MbaLimit::Percent(50)));
        assert_eq!(r.cpus, "2-3".parse::<CpuSet>().expect("cpus"));
        assert_eq!(spec("3=0xf;m=50;cpu=2-3"), Ok(r));
        let r = spec("2=0x3;b=2000").expect("valid");
        assert_eq!(r.l2, Some(CatMask::Unified("3".parse().expect("mask"))));
        assert_eq!(r.mba, Some(MbaLimit::MibPerSec(2000)));
        assert!(r.cpus.is_empty());
        let r = spec("smba=256;cpu=1").expect("valid");
        assert_eq!(r.smba, Some(MbaLimit::AmdUnits(256)));
        assert_eq!((r.mba, r.l3), (None, None));
        assert_eq!(spec("s=256;cpu=1"), Ok(r));
    }

    #[test]
    fn cdp_masks_are_code_then_data() {
        let r = spec("l3=0xf,0xf0").expect("valid");
        assert_eq!(
            r.l3,
            Some(CatMask::Cdp {
                code: "f".parse().expect("mask"),
                data: "f0".parse().expect("mask"),
            })
        );
    }

    #[test]
    fn bad_items_are_named() {
        for (bad, says) in [
            ("l3", "`l3` has no `=`"),
            ("l3=0x0", "`l3=0x0`"),
            ("l3=xyz", "`l3=xyz`"),
            ("mba=0", "`mba=0`: `0` is not a percentage"),
            ("mba=101", "`mba=101`: `101` is not a percentage"),
            ("l3=0xf;l3=0x3", "l3 is given twice"),
            ("l4=0xf", "unknown feature `l4`"),
            ("cpu=2-3", "sets no l3"),
            ("smba=0", "`smba=0`: `0` is not a bandwidth"),
            ("l3=0xf;cpu=3-1", "`cpu=3-1`"),
        ] {
            let e = spec(bad).expect_err(bad);
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_command_line_takes_a_command_with_its_own_flags() {
        let a = RdtsetArgs::try_parse_from(["rdtset", "-t", "l3=0xf", "-c", "1", "ls", "-l", "/"])
            .expect("valid");
        assert_eq!(a.command, ["ls", "-l", "/"]);
        assert_eq!(a.cpu, Some("1".parse().expect("cpus")));
        assert_eq!(a.iface(), Ok(rdt_pqos::Iface::Auto));
        let a = RdtsetArgs::try_parse_from(["rdtset", "-I", "-t", "l3=0xf", "-p", "12,34"])
            .expect("valid");
        assert_eq!(a.pids(), [TaskId::new(12), TaskId::new(34)]);
        assert_eq!(a.iface(), Ok(rdt_pqos::Iface::Os));
        // -I and --iface=os together, as rdtset's usage allows; -I with msr contradicts
        let a = RdtsetArgs::try_parse_from(["rdtset", "-I", "--iface=os", "-t", "l3=0xf", "ls"])
            .expect("valid");
        assert_eq!(a.iface(), Ok(rdt_pqos::Iface::Os));
        let a = RdtsetArgs::try_parse_from(["rdtset", "-I", "--iface=msr", "-t", "l3=0xf", "ls"])
            .expect("parses");
        let e = a.iface().expect_err("-I with msr");
        assert!(e.contains("-I") && e.contains("msr"), "{e}");
        assert!(
            RdtsetArgs::try_parse_from(["rdtset", "ls"]).is_err(),
            "-t is required"
        );
    }

    #[test]
    fn reset_takes_cpus_with_pids_and_no_command_as_rdtsets_r() {
        let a = RdtsetArgs::try_parse_from(["rdtset", "-r", "0-3,5", "-p", "12"]).expect("valid");
        assert_eq!(a.reset, Some("0-3,5".parse().expect("cpus")));
        assert!(a.set.is_empty(), "-t is optional with -r");
        let a = RdtsetArgs::try_parse_from([
            "rdtset",
            "--reset",
            "1",
            "-t",
            "l3=0xf;cpu=1",
            "-p",
            "12",
        ])
        .expect("valid");
        assert_eq!(a.set.len(), 1);
        // -r needs something to reset for: processes, or a command (rdtset's usage: `-r 1
        // -c 1 CMD` runs CMD on CPU 1 after putting it back in COS0); not both
        assert!(RdtsetArgs::try_parse_from(["rdtset", "-r", "0-3"]).is_err());
        assert!(RdtsetArgs::try_parse_from(["rdtset", "-r", "0-3", "-p", "1", "ls"]).is_err());
        let a =
            RdtsetArgs::try_parse_from(["rdtset", "-r", "1", "-c", "1", "true"]).expect("valid");
        assert_eq!((a.reset.is_some(), a.command.len()), (true, 1));
        assert!(RdtsetArgs::try_parse_from(["rdtset", "-r", "x", "-p", "1"]).is_err());
    }

    #[test]
    fn the_definition_is_consistent() {
        use clap::CommandFactory;
        RdtsetArgs::command().debug_assert();
    }
}
