//! Fault injection and the `.sim/` control directory.
//!
//! # The `.sim/fail` grammar
//! Each line written to `DIR/.sim/fail` arms one fault; `#` starts a comment, blank lines are
//! ignored:
//!
//! ```text
//! LINE    := OP TARGET OPTION*   |   clear
//! OP      := write | read | mkdir | rmdir     TARGET: a path under DIR (`*` matches one
//!          | modify                             component, `**` any number of them)
//!          | msr | rdmsr                       TARGET: an MSR address, 0x-hex or decimal
//! OPTION  := nth=N       the Nth matching operation after arming fails (default 1)
//!          | errno=E     with E: a name (EIO, EINVAL, ENOSPC, ...) or a number (default EIO)
//!          | cpu=N       msr/rdmsr only: only on logical CPU N (default any)
//!          | signal=KILL the process making the operation is killed (SIGKILL) instead
//! ```
//!
//! `modify` is any operation that changes something: a `write(2)` (WRMSR included, through
//! its `dev/cpu/N/msr` path), `mkdir(2)` or `rmdir(2)`. `modify ** nth=5 signal=KILL` kills
//! the process at its fifth change of anything, before that change reaches the model: the
//! way to test what a SIGKILL at every write position leaves behind.
//!
//! `msr` is WRMSR through a write of `dev/cpu/N/msr` at that offset, `rdmsr` a read; `write`
//! and `read` are `write(2)`/`read(2)` calls on a file, `mkdir`/`rmdir` the system calls.
//! Examples: `write sys/fs/resctrl/p0/schemata nth=2 errno=EIO`, `msr 0xc90 nth=1 errno=EIO`,
//! `write dev/cpu/*/msr errno=EPERM`, `mkdir sys/fs/resctrl/* errno=ENOSPC`.
//!
//! A fault fires once: the operation fails with its errno **before** it reaches the model,
//! so the model is unchanged, and the fault is disarmed. Every armed fault that matches an
//! operation counts it; when several reach their Nth together, the first armed gives the
//! errno and all of them are disarmed. Files under `.sim/` are never matched.
//!
//! A write is taken whole or not at all: a bad line fails the `write(2)` with EINVAL, arms
//! nothing, and `.sim/status` names the line and the bad token. `clear` disarms everything.
//! Reading `.sim/fail` lists the armed faults, one canonical line each, with `nth=` the
//! number of matching operations still to come until it fires.

use std::fmt;
use std::io;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};

use rdt_core::LogicalCpu;
use rdt_msr::MsrAddr;

use super::remount::ResctrlSlot;
use super::static_tree::slice_at;
use super::stats::SharedCounts;
use crate::SimHandle;
use crate::vfs::errno::{EACCES, EINVAL, EISDIR, ENOENT, ENOTDIR};
use crate::vfs::{NodeKind, Tree, err};

/// Linux errno names the grammar accepts (x86-64 numbers, `asm-generic/errno*.h`).
const ERRNO_NAMES: &[(&str, i32)] = &[
    ("EPERM", 1),
    ("ENOENT", 2),
    ("ESRCH", 3),
    ("EINTR", 4),
    ("EIO", 5),
    ("ENXIO", 6),
    ("E2BIG", 7),
    ("EBADF", 9),
    ("EAGAIN", 11),
    ("ENOMEM", 12),
    ("EACCES", 13),
    ("EFAULT", 14),
    ("EBUSY", 16),
    ("EEXIST", 17),
    ("ENODEV", 19),
    ("ENOTDIR", 20),
    ("EISDIR", 21),
    ("EINVAL", 22),
    ("ENFILE", 23),
    ("EMFILE", 24),
    ("EFBIG", 27),
    ("ENOSPC", 28),
    ("EROFS", 30),
    ("ERANGE", 34),
    ("ENOTEMPTY", 39),
    ("EOPNOTSUPP", 95),
    ("ETIMEDOUT", 110),
];

/// The highest errno the grammar accepts as a number (the kernel's `MAX_ERRNO`).
const MAX_ERRNO: i32 = 4095;

/// The name of `errno` if the grammar knows one.
fn errno_name(errno: i32) -> Option<&'static str> {
    ERRNO_NAMES
        .iter()
        .find(|(_, n)| *n == errno)
        .map(|(s, _)| *s)
}

/// The kind of operation a [`Fault`] fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultOp {
    /// `write(2)` on a file.
    Write,
    /// `read(2)` on a file.
    Read,
    /// `mkdir(2)`.
    Mkdir,
    /// `rmdir(2)`.
    Rmdir,
    /// WRMSR: a write of `dev/cpu/N/msr` at the register's offset.
    Wrmsr,
    /// RDMSR: a read of `dev/cpu/N/msr` at the register's offset.
    Rdmsr,
    /// Any change: a write (WRMSR included), `mkdir` or `rmdir` (matched on paths only).
    Modify,
}

impl FaultOp {
    const ALL: [(&'static str, Self); 7] = [
        ("write", Self::Write),
        ("read", Self::Read),
        ("mkdir", Self::Mkdir),
        ("rmdir", Self::Rmdir),
        ("modify", Self::Modify),
        ("msr", Self::Wrmsr),
        ("rdmsr", Self::Rdmsr),
    ];

    fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, op)| *op == self)
            .map_or("?", |(n, _)| n)
    }

    const fn on_msr(self) -> bool {
        matches!(self, Self::Wrmsr | Self::Rdmsr)
    }
}

/// What a [`Fault`] matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultTarget {
    /// A path relative to the mount's root, `/`-separated; a `*` component matches any one
    /// component.
    Path(String),
    /// An MSR address.
    Msr(MsrAddr),
}

/// One armed fault: the `nth` next operation matching `op` and `target` (and `cpu`) fails
/// with `errno`. The grammar is in the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The operation.
    pub op: FaultOp,
    /// The path or MSR.
    pub target: FaultTarget,
    /// MSR faults only: the CPU, `None` for any.
    pub cpu: Option<LogicalCpu>,
    /// Matching operations until it fires, counting the one that fails (≥ 1).
    pub nth: u32,
    /// The errno the operation fails with.
    pub errno: i32,
    /// Whether the process making the operation is killed (SIGKILL) when it fires.
    pub kill: bool,
}

/// What a fault that fired does to the operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fired {
    /// The operation fails with this errno.
    pub(crate) errno: i32,
    /// And the process that made it is killed first.
    pub(crate) kill: bool,
}

/// A `.sim/fail` line that does not follow the grammar; each variant names the bad token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseFaultError {
    /// The first word is not an operation.
    #[error("unknown operation `{0}` (expected write, read, mkdir, rmdir, msr, rdmsr or clear)")]
    UnknownOp(String),
    /// The operation has no target.
    #[error(
        "`{0}` needs a target: a path for write/read/mkdir/rmdir, an MSR address for msr/rdmsr"
    )]
    MissingTarget(String),
    /// An MSR address that is not a 32-bit number.
    #[error("`{0}` is not an MSR address (0x-prefixed hex or decimal, at most 0xffffffff)")]
    BadAddress(String),
    /// A path that leaves the mount or targets `.sim/`.
    #[error("`{0}` is not a path under the mount (no `.` or `..` components, not under .sim/)")]
    BadPath(String),
    /// A word that is not `key=value` with a known key.
    #[error("unknown option `{0}` (expected nth=N, errno=E, signal=KILL or, for msr/rdmsr, cpu=N)")]
    BadOption(String),
    /// `nth=` without a positive number.
    #[error("`{0}`: nth must be a number of at least 1")]
    BadNth(String),
    /// `errno=` with neither a known name nor a number in 1..=4095.
    #[error("`{0}`: errno must be a name such as EIO or EINVAL, or a number from 1 to 4095")]
    BadErrno(String),
    /// `cpu=` that is not a number, or on a path operation.
    #[error("`{0}`: cpu=N takes a CPU number and applies to msr and rdmsr only")]
    BadCpu(String),
    /// `signal=` with anything but KILL.
    #[error("`{0}`: the only signal is KILL (signal=KILL)")]
    BadSignal(String),
}

fn parse_addr(s: &str) -> Result<MsrAddr, ParseFaultError> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    };
    v.map(MsrAddr::new)
        .map_err(|_| ParseFaultError::BadAddress(s.into()))
}

fn parse_path(s: &str) -> Result<String, ParseFaultError> {
    let p = s.trim_start_matches('/').trim_end_matches('/');
    let bad = p.is_empty()
        || p.split('/').any(|c| c.is_empty() || c == "." || c == "..")
        || p == ".sim"
        || p.starts_with(".sim/");
    if bad {
        return Err(ParseFaultError::BadPath(s.into()));
    }
    Ok(p.to_owned())
}

fn parse_errno(s: &str, token: &str) -> Result<i32, ParseFaultError> {
    if let Some((_, n)) = ERRNO_NAMES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(s))
    {
        return Ok(*n);
    }
    s.parse::<i32>()
        .ok()
        .filter(|n| (1..=MAX_ERRNO).contains(n))
        .ok_or_else(|| ParseFaultError::BadErrno(token.into()))
}

impl FromStr for Fault {
    type Err = ParseFaultError;

    /// Parses one line of the grammar (not `clear`, not a comment).
    fn from_str(line: &str) -> Result<Self, ParseFaultError> {
        let mut words = line.split_whitespace();
        let op_word = words.next().unwrap_or_default();
        let op = FaultOp::ALL
            .iter()
            .find(|(n, _)| *n == op_word)
            .map(|(_, op)| *op)
            .ok_or_else(|| ParseFaultError::UnknownOp(op_word.into()))?;
        let target_word = words
            .next()
            .ok_or_else(|| ParseFaultError::MissingTarget(op_word.into()))?;
        let target = if op.on_msr() {
            FaultTarget::Msr(parse_addr(target_word)?)
        } else {
            FaultTarget::Path(parse_path(target_word)?)
        };
        let mut fault = Self {
            op,
            target,
            cpu: None,
            nth: 1,
            errno: crate::vfs::errno::EIO,
            kill: false,
        };
        for word in words {
            let (key, value) = word
                .split_once('=')
                .ok_or_else(|| ParseFaultError::BadOption(word.into()))?;
            match key {
                "nth" => {
                    fault.nth = value
                        .parse()
                        .ok()
                        .filter(|n| *n >= 1)
                        .ok_or_else(|| ParseFaultError::BadNth(word.into()))?;
                }
                "errno" => fault.errno = parse_errno(value, word)?,
                "cpu" if op.on_msr() => {
                    let n = value
                        .parse()
                        .map_err(|_| ParseFaultError::BadCpu(word.into()))?;
                    fault.cpu = Some(LogicalCpu::new(n));
                }
                "cpu" => return Err(ParseFaultError::BadCpu(word.into())),
                "signal" => {
                    if !["KILL", "SIGKILL", "9"].contains(&value.to_ascii_uppercase().as_str()) {
                        return Err(ParseFaultError::BadSignal(word.into()));
                    }
                    fault.kill = true;
                }
                _ => return Err(ParseFaultError::BadOption(word.into())),
            }
        }
        Ok(fault)
    }
}

impl fmt::Display for Fault {
    /// The canonical line: `msr 0xc90 cpu=0 nth=1 errno=EIO`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ", self.op.name())?;
        match &self.target {
            FaultTarget::Path(p) => write!(f, "{p}")?,
            FaultTarget::Msr(a) => write!(f, "{:#x}", a.get())?,
        }
        if let Some(cpu) = self.cpu {
            write!(f, " cpu={cpu}")?;
        }
        write!(f, " nth={} errno=", self.nth)?;
        match errno_name(self.errno) {
            Some(name) => write!(f, "{name}")?,
            None => write!(f, "{}", self.errno)?,
        }
        if self.kill {
            write!(f, " signal=KILL")?;
        }
        Ok(())
    }
}

/// One operation the dispatcher is about to perform, as faults see it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Access<'a> {
    /// A file, directory or MSR operation on `path` (relative to the mount root).
    Path(FaultOp, &'a str),
    /// WRMSR/RDMSR on a CPU.
    Msr(FaultOp, LogicalCpu, MsrAddr),
}

fn path_matches(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let q: Vec<&str> = path.split('/').collect();
    components_match(&p, &q)
}

/// `*` matches one component, `**` any number (zero included).
fn components_match(p: &[&str], q: &[&str]) -> bool {
    match (p.first(), q.first()) {
        (None, None) => true,
        (Some(&"**"), _) => {
            components_match(&p[1..], q) || (!q.is_empty() && components_match(p, &q[1..]))
        }
        (Some(a), Some(b)) if *a == "*" || a == b => components_match(&p[1..], &q[1..]),
        _ => false,
    }
}

impl Fault {
    fn matches(&self, access: Access<'_>) -> bool {
        match (access, &self.target) {
            (Access::Path(op, path), FaultTarget::Path(pattern)) => {
                let op_matches = op == self.op
                    || (self.op == FaultOp::Modify
                        && matches!(op, FaultOp::Write | FaultOp::Mkdir | FaultOp::Rmdir));
                op_matches
                    && path != ".sim"
                    && !path.starts_with(".sim/")
                    && path_matches(pattern, path)
            }
            (Access::Msr(op, cpu, addr), FaultTarget::Msr(a)) => {
                op == self.op && addr == *a && self.cpu.is_none_or(|c| c == cpu)
            }
            _ => false,
        }
    }
}

/// The armed faults of one mount, shared by the dispatcher (which consults them before
/// every operation) and the `.sim/fail` file (which arms and lists them).
#[derive(Debug, Default)]
pub struct Faults {
    armed: Vec<Fault>,
}

impl Faults {
    /// Arms `fault`.
    pub fn arm(&mut self, fault: Fault) {
        self.armed.push(fault);
    }

    /// Disarms every fault.
    pub fn clear(&mut self) {
        self.armed.clear();
    }

    /// The armed faults, in arming order.
    #[must_use]
    pub fn armed(&self) -> &[Fault] {
        &self.armed
    }

    /// Counts one operation; what happens to it when a fault fires on it (module docs).
    pub(crate) fn check(&mut self, accesses: &[Access<'_>]) -> Option<Fired> {
        let mut fired: Option<Fired> = None;
        self.armed.retain_mut(|f| {
            if !accesses.iter().any(|a| f.matches(*a)) {
                return true;
            }
            f.nth -= 1;
            if f.nth == 0 {
                let first = fired.get_or_insert(Fired {
                    errno: f.errno,
                    kill: false,
                });
                first.kill |= f.kill;
                return false;
            }
            true
        });
        fired
    }
}

/// Shared, lockable [`Faults`].
pub(crate) type SharedFaults = Arc<Mutex<Faults>>;

/// The `.sim/` directory: `fail` (arm and list faults, module docs), `status` (the outcome
/// of the last write to `fail`, `stats` or `resctrl_mount`: `ok` or the error naming the bad
/// token), `model` (the model's name and identity), `clock` (the model's simulated time, in
/// seconds), `stats` (request counts, [`super::stats`]; write `reset`), `resctrl_mount`
/// (mount, unmount or remount resctrl, [`super::remount`]), `workloads` (each workload's
/// application metric and the memory domains' load: ground truth for evaluation,
/// [`crate::metrics::WORKLOADS_FORMAT`]) and `pmu/` (the model's PMU counters,
/// [`PMU_FORMAT`]).
#[derive(Debug)]
pub struct ControlTree {
    sim: SimHandle,
    faults: SharedFaults,
    resctrl: ResctrlSlot,
    counts: SharedCounts,
    status: String,
}

/// The format of the files under `.sim/pmu/`: the PMU of the mounted model, for a client
/// on a host without a usable PMU of its own (the `rdt_pqos` facade reads them when
/// `perf_event_open` fails on a simulated sysroot).
///
/// - `.sim/pmu/cpu<N>`, one per logical CPU `N` of the model: that CPU's counts.
/// - `.sim/pmu/task<TID>`, one per host thread the model follows (a thread written to a
///   resctrl `tasks` file, [`crate::resctrl`] "Host tasks"): that thread's counts, from 0
///   when it was first placed; absent for any other id (ENOENT).
///
/// Each holds one line of four decimal counters separated by one space, cumulative since
/// the model started (free-running, wrapping at 2^64), in this order:
/// `instructions cycles llc_misses llc_references` (instructions retired, unhalted core
/// cycles, LLC misses, LLC references: what `PERF_COUNT_HW_INSTRUCTIONS`, `_CPU_CYCLES`,
/// `_CACHE_MISSES` and `_CACHE_REFERENCES` count). Readers take the first four fields and
/// ignore any later ones (room to grow). Example: `2102431234 1468004321 1853 61024\n`.
pub const PMU_FORMAT: &str = "instructions cycles llc_misses llc_references";

const FILES: [(&str, u16); 7] = [
    ("fail", 0o644),
    ("status", 0o444),
    ("model", 0o444),
    ("clock", 0o444),
    ("stats", 0o644),
    ("resctrl_mount", 0o644),
    ("workloads", 0o444),
];

impl ControlTree {
    pub(crate) fn new(
        sim: SimHandle,
        faults: SharedFaults,
        resctrl: ResctrlSlot,
        counts: SharedCounts,
    ) -> Self {
        Self {
            sim,
            faults,
            resctrl,
            counts,
            status: "ok\n".into(),
        }
    }

    fn faults(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn content(&self, name: &str) -> io::Result<String> {
        Ok(match name {
            "fail" => self
                .faults()
                .armed()
                .iter()
                .fold(String::new(), |mut s, f| {
                    s.push_str(&f.to_string());
                    s.push('\n');
                    s
                }),
            "status" => self.status.clone(),
            "model" => {
                let p = self.sim.lock();
                format!("{} {}\n", p.model(), p.identity())
            }
            "clock" => format!("{:.6}\n", self.sim.lock().now().as_secs_f64()),
            "stats" => self.counts.snapshot().to_string(),
            "resctrl_mount" => self.resctrl.describe(),
            "workloads" => self.sim.lock().workloads_text(),
            _ => return Err(err(ENOENT)),
        })
    }

    /// Parses a whole write: `Ok(None)` for `clear`, the faults otherwise.
    fn parse(text: &str) -> Result<(bool, Vec<Fault>), String> {
        let mut clear = false;
        let mut faults = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            if line == "clear" {
                clear = true;
                continue;
            }
            let f: Fault = line.parse().map_err(|e| format!("line {}: {e}", i + 1))?;
            faults.push(f);
        }
        Ok((clear, faults))
    }
}

impl ControlTree {
    /// The `pmu/` files there are now: every CPU's, every followed host task's.
    fn pmu_files(&self) -> Vec<String> {
        let p = self.sim.lock();
        let mut v: Vec<String> = p
            .topology()
            .cpus()
            .iter()
            .map(|c| format!("cpu{}", c.cpu))
            .collect();
        v.extend(p.task_pmu.keys().map(|t| format!("task{t}")));
        v
    }

    /// The text of `pmu/<name>` ([`PMU_FORMAT`]).
    fn pmu_content(&self, name: &str) -> io::Result<String> {
        let p = self.sim.lock();
        let counts = if let Some(n) = name.strip_prefix("cpu") {
            let cpu = n.parse().map_err(|_| err(ENOENT))?;
            let cpu = rdt_core::LogicalCpu::new(cpu);
            p.pmu_counts(cpu)
        } else if let Some(n) = name.strip_prefix("task") {
            p.task_pmu_counts(n.parse().map_err(|_| err(ENOENT))?)
        } else {
            None
        };
        let c = counts.ok_or_else(|| err(ENOENT))?;
        Ok(format!(
            "{} {} {} {}\n",
            c.instructions,
            c.cycles,
            c.llc_misses,
            c.llc_references.unwrap_or(0)
        ))
    }
}

/// Whether `name` is `cpu<N>` or `task<N>` with `N` in canonical decimal.
fn canonical_pmu_name(name: &str) -> bool {
    let digits = name
        .strip_prefix("cpu")
        .or_else(|| name.strip_prefix("task"))
        .unwrap_or_default();
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
}

impl Tree for ControlTree {
    fn kind(&self, path: &str) -> io::Result<NodeKind> {
        if path.is_empty() || path == "pmu" {
            return Ok(NodeKind::Dir);
        }
        if let Some(name) = path.strip_prefix("pmu/") {
            return if canonical_pmu_name(name) && self.pmu_content(name).is_ok() {
                Ok(NodeKind::File { mode: 0o444 })
            } else {
                Err(err(ENOENT))
            };
        }
        FILES
            .iter()
            .find(|(n, _)| *n == path)
            .map(|(_, mode)| NodeKind::File { mode: *mode })
            .ok_or_else(|| err(ENOENT))
    }

    fn list(&self, path: &str) -> io::Result<Vec<(String, NodeKind)>> {
        if path == "pmu" {
            return Ok(self
                .pmu_files()
                .into_iter()
                .map(|n| (n, NodeKind::File { mode: 0o444 }))
                .collect());
        }
        if !path.is_empty() {
            return Err(err(if self.kind(path).is_ok() {
                ENOTDIR
            } else {
                ENOENT
            }));
        }
        let mut v: Vec<(String, NodeKind)> = FILES
            .iter()
            .map(|(n, mode)| ((*n).to_owned(), NodeKind::File { mode: *mode }))
            .collect();
        v.push(("pmu".into(), NodeKind::Dir));
        Ok(v)
    }

    fn read(&mut self, path: &str, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        if path.is_empty() || path == "pmu" {
            return Err(err(EISDIR));
        }
        if let Some(name) = path.strip_prefix("pmu/") {
            if !canonical_pmu_name(name) {
                return Err(err(ENOENT));
            }
            return Ok(slice_at(self.pmu_content(name)?.as_bytes(), offset, size));
        }
        Ok(slice_at(self.content(path)?.as_bytes(), offset, size))
    }

    fn write(&mut self, path: &str, _offset: u64, data: &[u8]) -> io::Result<usize> {
        match path {
            "fail" => {}
            "stats" => {
                if String::from_utf8_lossy(data).trim() != "reset" {
                    self.status = "stats: expected `reset`\n".into();
                    return Err(err(EINVAL));
                }
                self.counts.reset();
                self.status = "ok\n".into();
                return Ok(data.len());
            }
            "resctrl_mount" => {
                return match self.resctrl.command(&String::from_utf8_lossy(data)) {
                    Ok(()) => {
                        self.status = "ok\n".into();
                        Ok(data.len())
                    }
                    Err((errno, msg)) => {
                        self.status = format!("{msg}\n");
                        Err(err(errno))
                    }
                };
            }
            "" => return Err(err(EISDIR)),
            _ => {
                self.kind(path)?;
                return Err(err(EACCES));
            }
        }
        let text = String::from_utf8_lossy(data);
        match Self::parse(&text) {
            Ok((clear, faults)) => {
                let mut armed = self.faults();
                if clear {
                    armed.clear();
                }
                for f in faults {
                    armed.arm(f);
                }
                drop(armed);
                self.status = "ok\n".into();
                Ok(data.len())
            }
            Err(msg) => {
                self.status = format!("{msg}\n");
                Err(err(EINVAL))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resctrl::MountOptions;

    #[test]
    fn parses_the_documented_examples_and_prints_them_canonically() {
        let f: Fault = "write sys/fs/resctrl/p0/schemata nth=2 errno=EIO"
            .parse()
            .unwrap();
        assert_eq!(
            f.to_string(),
            "write sys/fs/resctrl/p0/schemata nth=2 errno=EIO"
        );
        let f: Fault = "msr 0xc90 nth=1 errno=EIO".parse().unwrap();
        assert_eq!(
            f,
            Fault {
                op: FaultOp::Wrmsr,
                target: FaultTarget::Msr(MsrAddr::new(0xc90)),
                cpu: None,
                nth: 1,
                errno: 5,
                kill: false,
            }
        );
        let f: Fault = "rdmsr 3214 cpu=3 errno=7".parse().unwrap();
        assert_eq!(f.to_string(), "rdmsr 0xc8e cpu=3 nth=1 errno=E2BIG");
        let f: Fault = "mkdir /sys/fs/resctrl/* errno=enospc".parse().unwrap();
        assert_eq!(f.to_string(), "mkdir sys/fs/resctrl/* nth=1 errno=ENOSPC");
        assert_eq!(
            "write a errno=200".parse::<Fault>().unwrap().to_string(),
            "write a nth=1 errno=200"
        );
    }

    #[test]
    fn each_error_names_the_bad_token() {
        let e = |s: &str| s.parse::<Fault>().unwrap_err().to_string();
        assert!(e("wrte x").contains("`wrte`"));
        assert!(e("msr").contains("`msr` needs a target"));
        assert!(e("msr 0xzz").contains("`0xzz`"));
        assert!(e("write ../etc/passwd").contains("`../etc/passwd`"));
        assert!(e("write .sim/fail").contains("`.sim/fail`"));
        assert!(e("write a nth=0").contains("`nth=0`"));
        assert!(e("write a errno=EWHAT").contains("`errno=EWHAT`"));
        assert!(e("write a errno=0").contains("`errno=0`"));
        assert!(e("write a cpu=1").contains("`cpu=1`"));
        assert!(e("msr 0xc90 cpu=x").contains("`cpu=x`"));
        assert!(e("msr 0xc90 times=2").contains("`times=2`"));
        assert!(e("msr 0xc90 nth").contains("`nth`"));
        assert!(e("modify ** signal=TERM").contains("`signal=TERM`"));
    }

    #[test]
    fn modify_counts_every_change_and_double_star_any_depth() {
        let f: Fault = "modify sys/** nth=3 signal=KILL".parse().unwrap();
        assert_eq!(f.to_string(), "modify sys/** nth=3 errno=EIO signal=KILL");
        let mut faults = Faults::default();
        faults.arm(f);
        let w = |op, p| [Access::Path(op, p)];
        assert_eq!(
            faults.check(&w(FaultOp::Read, "sys/fs/resctrl/schemata")),
            None
        );
        assert_eq!(
            faults.check(&w(FaultOp::Mkdir, "sys/fs/resctrl/COS1")),
            None
        );
        assert_eq!(
            faults.check(&w(FaultOp::Write, "dev/cpu/0/msr")),
            None,
            "not under sys/"
        );
        let wrmsr = [
            Access::Path(FaultOp::Write, "sys/x/msr"),
            Access::Msr(FaultOp::Wrmsr, LogicalCpu::new(0), MsrAddr::new(0xc90)),
        ];
        assert_eq!(faults.check(&wrmsr), None, "one operation counts once");
        assert_eq!(
            faults.check(&w(FaultOp::Rmdir, "sys/fs/resctrl/COS1/mon_groups/g")),
            Some(Fired {
                errno: 5,
                kill: true
            })
        );
        assert!(path_matches("**", "a/b/c") && path_matches("a/**/c", "a/c"));
        assert!(!path_matches("a/**/c", "a/b/d"));
    }

    #[test]
    fn the_nth_matching_access_fires_once_and_other_accesses_do_not_count() {
        // arrange
        let mut faults = Faults::default();
        faults.arm(
            "write sys/fs/resctrl/*/schemata nth=2 errno=EINVAL"
                .parse()
                .unwrap(),
        );
        faults.arm("msr 0xc90 cpu=1".parse().unwrap());
        let schemata = Access::Path(FaultOp::Write, "sys/fs/resctrl/p0/schemata");
        // act / assert
        assert_eq!(
            faults.check(&[Access::Path(FaultOp::Read, "sys/fs/resctrl/p0/schemata")]),
            None
        );
        assert_eq!(
            faults.check(&[Access::Path(FaultOp::Write, "sys/fs/resctrl/p0/tasks")]),
            None
        );
        assert_eq!(faults.check(&[schemata]), None);
        assert_eq!(
            faults.check(&[schemata]),
            Some(Fired {
                errno: EINVAL,
                kill: false
            })
        );
        assert_eq!(faults.check(&[schemata]), None, "disarmed after firing");
        let mut wild = Faults::default();
        wild.arm("write */fail".parse().unwrap());
        assert_eq!(
            wild.check(&[Access::Path(FaultOp::Write, ".sim/fail")]),
            None,
            ".sim/ is never matched, so faults can always be cleared"
        );
        let on = |cpu| Access::Msr(FaultOp::Wrmsr, LogicalCpu::new(cpu), MsrAddr::new(0xc90));
        assert_eq!(faults.check(&[on(0)]), None);
        assert_eq!(
            faults.check(&[on(1)]),
            Some(Fired {
                errno: 5,
                kill: false
            })
        );
        assert!(faults.armed().is_empty());
    }

    #[test]
    fn control_file_arms_lists_clears_and_reports_bad_lines() {
        // arrange
        let sim = SimHandle::new(crate::SimPlatform::builtin("broadwell-ep").unwrap());
        let faults = SharedFaults::default();
        let slot = ResctrlSlot::new(sim.clone(), None).unwrap();
        let mut t = ControlTree::new(sim, faults.clone(), slot, SharedCounts::default());
        let read =
            |t: &mut ControlTree, p: &str| String::from_utf8(t.read(p, 0, 4096).unwrap()).unwrap();
        // act
        t.write(
            "fail",
            0,
            b"# two faults\nmsr 0xc90 nth=3\n\nwrite dev/cpu/0/msr errno=EPERM\n",
        )
        .unwrap();
        // assert
        assert_eq!(
            read(&mut t, "fail"),
            "msr 0xc90 nth=3 errno=EIO\nwrite dev/cpu/0/msr nth=1 errno=EPERM\n"
        );
        let e = t
            .write("fail", 0, b"msr 0xc91\nmsr 0xc92 errno=NOPE\n")
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(EINVAL));
        assert!(read(&mut t, "status").starts_with("line 2: `errno=NOPE`"));
        assert_eq!(
            faults.lock().unwrap().armed().len(),
            2,
            "nothing armed from a bad write"
        );
        t.write("fail", 0, b"clear\n").unwrap();
        assert_eq!(read(&mut t, "fail"), "");
        assert_eq!(read(&mut t, "status"), "ok\n");
        assert_eq!(read(&mut t, "model"), "broadwell-ep builtin:broadwell-ep\n");
        assert_eq!(
            t.write("model", 0, b"x").unwrap_err().raw_os_error(),
            Some(EACCES)
        );
    }

    #[test]
    fn resctrl_mount_file_remounts_with_kernel_effects_and_refuses_bad_options() {
        // arrange: skylake-sp has L3 CDP and linear MBA with MBM, so cdp and mba_MBps mount
        use crate::fs::remount::ResctrlView;
        let sim = SimHandle::new(
            crate::SimPlatform::builtin("skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal").unwrap(),
        );
        let slot = ResctrlSlot::new(sim.clone(), Some(&MountOptions::default())).unwrap();
        let mut view = ResctrlView(slot.clone());
        let mut t = ControlTree::new(
            sim.clone(),
            SharedFaults::default(),
            slot,
            SharedCounts::default(),
        );
        let read =
            |t: &mut ControlTree, p: &str| String::from_utf8(t.read(p, 0, 4096).unwrap()).unwrap();
        assert_eq!(
            read(&mut t, "resctrl_mount"),
            "\n",
            "defaults: an empty line"
        );
        view.mkdir("g1").unwrap();
        assert!(view.kind("info/L3").is_ok() && view.kind("info/L3CODE").is_err());
        // act
        t.write("resctrl_mount", 0, b"remount cdp,mba_MBps\n")
            .unwrap();
        // assert: the new mount's view, the old group gone, CDP on in the register
        assert_eq!(read(&mut t, "resctrl_mount"), "cdp,mba_MBps\n");
        assert!(view.kind("info/L3CODE").is_ok() && view.kind("info/L3").is_err());
        assert!(view.kind("g1").is_err(), "a remount starts with no groups");
        let cfg = rdt_msr::MsrIo::read(&mut sim.clone(), LogicalCpu::new(0), MsrAddr::new(0xc81))
            .unwrap();
        assert_eq!(cfg & 1, 1, "IA32_L3_QOS_CFG.CDP set by the cdp mount");
        // a bad option fails before anything is unmounted
        let e = t
            .write("resctrl_mount", 0, b"remount cdp,nosuch\n")
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(EINVAL));
        assert!(
            read(&mut t, "status").contains("nosuch"),
            "{}",
            read(&mut t, "status")
        );
        assert_eq!(read(&mut t, "resctrl_mount"), "cdp,mba_MBps\n");
        // mount while mounted is EBUSY; umount twice is EINVAL
        let e = t.write("resctrl_mount", 0, b"mount \n").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(crate::vfs::errno::EBUSY));
        t.write("resctrl_mount", 0, b"umount\n").unwrap();
        assert_eq!(read(&mut t, "resctrl_mount"), "unmounted\n");
        assert!(
            view.list("").unwrap().is_empty(),
            "an empty directory when unmounted"
        );
        let cfg = rdt_msr::MsrIo::read(&mut sim.clone(), LogicalCpu::new(0), MsrAddr::new(0xc81))
            .unwrap();
        assert_eq!(cfg & 1, 0, "unmounting turns CDP off as the kernel does");
        let e = t.write("resctrl_mount", 0, b"umount\n").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(EINVAL));
        t.write("resctrl_mount", 0, b"mount cdp\n").unwrap();
        assert_eq!(read(&mut t, "resctrl_mount"), "cdp\n");
    }

    #[test]
    fn stats_file_reads_counts_and_takes_only_reset() {
        use super::super::stats::Op;
        let sim = SimHandle::new(crate::SimPlatform::builtin("broadwell-ep").unwrap());
        let slot = ResctrlSlot::new(sim.clone(), None).unwrap();
        let counts = SharedCounts::default();
        let mut t = ControlTree::new(sim, SharedFaults::default(), slot, counts.clone());
        counts.count(Op::Read, "sys/fs/resctrl/schemata");
        let text = String::from_utf8(t.read("stats", 0, 4096).unwrap()).unwrap();
        assert!(text.lines().any(|l| l == "read 1"), "{text}");
        assert_eq!(
            t.write("stats", 0, b"zero\n").unwrap_err().raw_os_error(),
            Some(EINVAL)
        );
        t.write("stats", 0, b"reset\n").unwrap();
        assert_eq!(counts.snapshot().read, 0);
    }
}
