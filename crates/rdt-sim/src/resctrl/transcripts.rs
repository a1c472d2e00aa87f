//! The worked transcripts (§15) and the emulator acceptance list (§13, §19) of
//! `../shared/spec/resctrl.md`, as data: steps of file operations on a resctrl root with the
//! bytes a read must return, the errno an operation must fail with, and the
//! `info/last_cmd_status` text after it.
//!
//! The steps speak only [`FsOps`], so the same transcripts run in-process against
//! [`Resctrl`] ([`InProcess`]) and over a FUSE mount with plain file operations (an `FsOps`
//! made of `std::fs` calls on `DIR/sys/fs/resctrl`, `pread` on `DIR/dev/cpu/N/msr`, and the
//! mount's platform handle to advance the clock).
//!
//! The spec's reference machine (8 CPUs, two L3 domains of 4 CPUs, 11-bit CBM with no
//! shareable bits, MB with 8 CLOSIDs, 176 RMIDs) is not a built-in model. The transcripts run
//! on `skylake-sp`, which is closest (two L3 domains, 11-bit CBM, L3 16 / MB 8 CLOSIDs), and
//! the AMD one on `milan`; where the model differs, the expected text is derived from its
//! parameters (72 CPUs: `cpus` masks have three chunks and CPU 72 is the first missing one;
//! `shareable_bits` 0x600 shows as `X` in `bit_usage`; 144 RMIDs; milan: 16 L3 domains, a
//! CDP-capable L3, so names are padded to 6, and no SMBA, BMEC or ABMC). Message wording is
//! always the kernel's.
//!
//! # Examples
//! In-process, with simulated tasks:
//! ```
//! use rdt_sim::resctrl::transcripts::{self, Ctx, InProcess};
//!
//! let ctx = Ctx::simulated();
//! let t = &transcripts::all(&ctx)[0];
//! let mut h = InProcess::mount(t.model, t.options, &ctx).unwrap();
//! transcripts::run(t, &mut h).unwrap();
//! ```
//! Over FUSE, with real `sleep` processes as the tasks (as root, `/dev/fuse` present):
//! ```no_run
//! use rdt_sim::fs::testing::TestMount;
//! use rdt_sim::fs::{MountConfig, SimClock};
//! use rdt_sim::resctrl::transcripts::{self, HostTasks, OverFiles};
//! use rdt_sim::{SimHandle, SimPlatform};
//!
//! let tasks = HostTasks::spawn().unwrap();
//! let ctx = tasks.ctx();
//! for t in transcripts::all(&ctx) {
//!     let sim = SimHandle::new(SimPlatform::builtin(t.model).unwrap());
//!     let config = MountConfig { resctrl: Some(t.options.parse().unwrap()), clock: SimClock::Manual };
//!     let m = TestMount::new(sim.clone(), config);
//!     let mut ops = OverFiles { resctrl: m.path("sys/fs/resctrl"), dev_cpu: m.path("dev/cpu"), sim };
//!     transcripts::run(&t, &mut ops).unwrap();
//! }
//! ```

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::io;
use std::path::Path;
use std::time::Duration;

use rdt_core::LogicalCpu;
use rdt_msr::{MsrAddr, MsrIo};

use crate::vfs::Tree;
use crate::{SimHandle, SimPlatform};

use super::errno::{
    E2BIG, EACCES, EBUSY, EEXIST, EINVAL, ENOENT, ENOSPC, EOVERFLOW, EPERM, ERANGE, ESRCH,
};
use super::{MountOptions, Resctrl};

/// File operations on a resctrl root (paths relative to it), errors as errno values.
pub trait FsOps {
    /// Reads the whole file.
    ///
    /// # Errors
    /// The errno of open or read.
    fn read(&mut self, path: &str) -> Result<Vec<u8>, i32>;
    /// One `write(2)` of `data` (opened for writing, as `echo >` does).
    ///
    /// # Errors
    /// The errno of open or write.
    fn write(&mut self, path: &str, data: &[u8]) -> Result<(), i32>;
    /// `mkdir(2)`.
    ///
    /// # Errors
    /// Its errno.
    fn mkdir(&mut self, path: &str) -> Result<(), i32>;
    /// `rmdir(2)`.
    ///
    /// # Errors
    /// Its errno.
    fn rmdir(&mut self, path: &str) -> Result<(), i32>;
    /// `rename(2)`.
    ///
    /// # Errors
    /// Its errno.
    fn rename(&mut self, from: &str, to: &str) -> Result<(), i32>;
    /// Whether `path` exists.
    fn exists(&mut self, path: &str) -> bool;
    /// RDMSR `addr` on `cpu` (`/dev/cpu/N/msr`).
    ///
    /// # Errors
    /// Its errno.
    fn msr(&mut self, cpu: u32, addr: u32) -> Result<u64, i32>;
    /// Advances the platform's virtual clock.
    fn advance(&mut self, dt: Duration);
}

/// One operation of a transcript.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Read a file.
    Read(String),
    /// One write to a file.
    Write(String, Vec<u8>),
    /// mkdir.
    Mkdir(String),
    /// rmdir.
    Rmdir(String),
    /// rename(from, to).
    Rename(String, String),
    /// Whether a path exists.
    Exists(String),
    /// RDMSR on a CPU.
    Msr {
        /// The CPU.
        cpu: u32,
        /// The MSR address.
        addr: u32,
    },
    /// Advance the virtual clock.
    Advance(Duration),
    /// The decimal number in file `whole` equals the sum of those in `parts`.
    Sum {
        /// The file holding the sum.
        whole: String,
        /// The files holding the addends.
        parts: Vec<String>,
    },
    /// The decimal number in `larger` is greater than the one in `smaller` (read first).
    Greater {
        /// Read second.
        larger: String,
        /// Read first.
        smaller: String,
    },
    /// The decimal number in the file is above 0.
    Positive(String),
    /// Remember the decimal number in the file, for [`Op::Cmp`].
    Save(String),
    /// The decimal number in the file compares so with the one last saved.
    Cmp(String, Ordering),
}

/// What an operation must give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Success (any content).
    Ok,
    /// A read returning exactly these bytes.
    Is(Vec<u8>),
    /// A read whose lines include every `has` and none of `lacks`.
    Lines {
        /// Lines that must be present.
        has: Vec<String>,
        /// Lines that must be absent.
        lacks: Vec<String>,
    },
    /// A read of one decimal number and a newline.
    Decimal,
    /// An MSR value.
    Value(u64),
    /// [`Op::Exists`]'s answer.
    Present(bool),
    /// Failure with this errno.
    Errno(i32),
}

/// One step: an operation, its result, and optionally `last_cmd_status` right after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The operation.
    pub op: Op,
    /// Its result.
    pub expect: Expect,
    /// `info/last_cmd_status` after it, when checked.
    pub status: Option<Vec<u8>>,
    /// The spec's line this step comes from.
    pub note: String,
}

/// A transcript: a fresh mount of a model, then the steps in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transcript {
    /// Its name (spec section and subject).
    pub name: &'static str,
    /// The built-in model.
    pub model: &'static str,
    /// Mount options (`mount -o`).
    pub options: &'static str,
    /// The steps.
    pub steps: Vec<Step>,
}

/// The task ids the transcripts use: eight that exist (simulated, or real threads of the host
/// when run over FUSE) and one that does not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ctx {
    /// Existing task ids, all in the root group at mount (the spec's 1234..1240 and one more).
    pub tasks: [u32; 8],
    /// An id no task has (the spec's 99999).
    pub missing: u32,
}

impl Ctx {
    /// The spec's ids 1234..=1241 as simulated tasks, and the first id from 99999 up that is
    /// no host thread and none of those.
    #[must_use]
    pub fn simulated() -> Self {
        let tasks = [1234, 1235, 1236, 1237, 1238, 1239, 1240, 1241];
        let missing = (99_999..4_194_304)
            .find(|id| !tasks.contains(id) && !Path::new(&format!("/proc/{id}")).exists())
            .unwrap_or(99_999);
        Self { tasks, missing }
    }
}

/// Builds a transcript's steps.
#[derive(Debug, Default)]
struct B {
    steps: Vec<Step>,
}

impl B {
    fn push(&mut self, op: Op, expect: Expect, status: Option<&[u8]>, note: &str) -> &mut Self {
        self.steps.push(Step {
            op,
            expect,
            status: status.map(<[u8]>::to_vec),
            note: note.into(),
        });
        self
    }

    /// A read returning `content`.
    fn read(&mut self, path: &str, content: &str) -> &mut Self {
        let note = format!("cat {path}");
        self.push(
            Op::Read(path.into()),
            Expect::Is(content.into()),
            None,
            &note,
        )
    }

    fn read_lines(&mut self, path: &str, has: &[String], lacks: &[String]) -> &mut Self {
        let note = format!("cat {path}");
        self.push(
            Op::Read(path.into()),
            Expect::Lines {
                has: has.to_vec(),
                lacks: lacks.to_vec(),
            },
            None,
            &note,
        )
    }

    /// A write that succeeds, leaving status "ok".
    fn write(&mut self, path: &str, data: &str) -> &mut Self {
        let note = format!("echo {data:?} > {path}");
        self.push(
            Op::Write(path.into(), data.into()),
            Expect::Ok,
            Some(b"ok\n"),
            &note,
        )
    }

    /// A write failing with `errno` and status `status` (exact bytes).
    fn write_err(&mut self, path: &str, data: &str, errno: i32, status: &str) -> &mut Self {
        let note = format!("echo {data:?} > {path}");
        self.push(
            Op::Write(path.into(), data.into()),
            Expect::Errno(errno),
            Some(status.as_bytes()),
            &note,
        )
    }

    fn mkdir(&mut self, path: &str) -> &mut Self {
        let note = format!("mkdir {path}");
        self.push(Op::Mkdir(path.into()), Expect::Ok, Some(b"ok\n"), &note)
    }

    fn mkdir_err(&mut self, path: &str, errno: i32, status: Option<&str>) -> &mut Self {
        let note = format!("mkdir {path}");
        self.push(
            Op::Mkdir(path.into()),
            Expect::Errno(errno),
            status.map(str::as_bytes),
            &note,
        )
    }

    fn rmdir(&mut self, path: &str) -> &mut Self {
        let note = format!("rmdir {path}");
        self.push(Op::Rmdir(path.into()), Expect::Ok, None, &note)
    }

    fn rmdir_err(&mut self, path: &str, errno: i32) -> &mut Self {
        let note = format!("rmdir {path}");
        self.push(Op::Rmdir(path.into()), Expect::Errno(errno), None, &note)
    }

    fn rename(&mut self, from: &str, to: &str) -> &mut Self {
        let note = format!("mv {from} {to}");
        self.push(
            Op::Rename(from.into(), to.into()),
            Expect::Ok,
            Some(b"ok\n"),
            &note,
        )
    }

    fn rename_err(&mut self, from: &str, to: &str, errno: i32, status: &str) -> &mut Self {
        let note = format!("mv {from} {to}");
        self.push(
            Op::Rename(from.into(), to.into()),
            Expect::Errno(errno),
            Some(status.as_bytes()),
            &note,
        )
    }

    fn exists(&mut self, path: &str, present: bool) -> &mut Self {
        let note = format!("test -e {path}");
        self.push(
            Op::Exists(path.into()),
            Expect::Present(present),
            None,
            &note,
        )
    }

    fn msr(&mut self, cpu: u32, addr: u32, value: u64) -> &mut Self {
        let note = format!("rdmsr -p {cpu} {addr:#x}");
        self.push(Op::Msr { cpu, addr }, Expect::Value(value), None, &note)
    }

    fn status(&mut self, text: &str) -> &mut Self {
        self.read("info/last_cmd_status", text)
    }

    fn advance(&mut self, secs: u64) -> &mut Self {
        self.push(
            Op::Advance(Duration::from_secs(secs)),
            Expect::Ok,
            None,
            "(time passes)",
        )
    }

    fn decimal(&mut self, path: &str) -> &mut Self {
        let note = format!("cat {path}");
        self.push(Op::Read(path.into()), Expect::Decimal, None, &note)
    }

    fn sum(&mut self, whole: &str, parts: &[&str]) -> &mut Self {
        let note = format!("{whole} = {}", parts.join(" + "));
        self.push(
            Op::Sum {
                whole: whole.into(),
                parts: parts.iter().map(|s| (*s).to_string()).collect(),
            },
            Expect::Ok,
            None,
            &note,
        )
    }

    fn greater(&mut self, smaller: &str, larger: &str) -> &mut Self {
        let note = format!("{larger} > {smaller}");
        self.push(
            Op::Greater {
                larger: larger.into(),
                smaller: smaller.into(),
            },
            Expect::Ok,
            None,
            &note,
        )
    }

    fn positive(&mut self, path: &str) -> &mut Self {
        let note = format!("{path} > 0");
        self.push(Op::Positive(path.into()), Expect::Ok, None, &note)
    }

    fn save(&mut self, path: &str) -> &mut Self {
        let note = format!("v = $(cat {path})");
        self.push(Op::Save(path.into()), Expect::Ok, None, &note)
    }

    fn cmp(&mut self, path: &str, ord: Ordering) -> &mut Self {
        let note = format!("$(cat {path}) {ord:?} v");
        self.push(Op::Cmp(path.into(), ord), Expect::Ok, None, &note)
    }

    fn done(
        &mut self,
        name: &'static str,
        model: &'static str,
        options: &'static str,
    ) -> Transcript {
        Transcript {
            name,
            model,
            options,
            steps: std::mem::take(&mut self.steps),
        }
    }
}

/// The `cpus` text of a set of CPUs on a machine of `nr` CPUs: 32-bit chunks, most
/// significant first, the first padded to its bits' digits, the others to 8 (written
/// independently of the implementation's formatter).
#[must_use]
pub fn mask_text(cpus: &[u32], nr: u32) -> String {
    let chunks = nr.div_ceil(32);
    let mut parts = Vec::new();
    for k in (0..chunks).rev() {
        let word: u32 = cpus
            .iter()
            .filter(|&&c| c / 32 == k)
            .fold(0, |w, &c| w | (1 << (c % 32)));
        let digits = if k == chunks - 1 {
            let top = nr - 32 * k;
            top.div_ceil(4) as usize
        } else {
            8
        };
        parts.push(format!("{word:0digits$x}"));
    }
    parts.join(",")
}

const PQR: u32 = 0xC8F;
const L3_MASK: u32 = 0xC90;
const L3_CFG: u32 = 0xC81;
const MBA_DELAY: u32 = 0xD50;

/// Every transcript.
#[must_use]
pub fn all(ctx: &Ctx) -> Vec<Transcript> {
    vec![
        fresh_mount(),
        fresh_mount_cdp(),
        schemata_writes(),
        exclusive_groups(),
        tasks(ctx),
        cpus(),
        limits(),
        amd_reference(),
        monitoring(),
        out_of_rmids_and_limbo(),
        cpu_ownership_on_rmdir(),
        mon_group_rename(ctx),
        last_cmd_status(ctx),
        file_semantics(),
        mba_mbps(),
        l2_cdp(),
    ]
}

/// §15.1 on skylake-sp (72 CPUs, `shareable_bits` 0x600).
fn fresh_mount() -> Transcript {
    B::default()
        .read("schemata", "    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n")
        .read("cpus", "ff,ffffffff,ffffffff\n")
        .read("cpus_list", "0-71\n")
        .read("mode", "shareable\n")
        // spec (shareable_bits 0): SSSSSSSSSSS; here bits 10-9 are hardware-shared too: X
        .read("info/L3/bit_usage", "0=XXSSSSSSSSS;1=XXSSSSSSSSS\n")
        .read("info/last_cmd_status", "ok\n")
        .read(
            "info/L3_MON/mon_features",
            "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n",
        )
        .read("info/L3/num_closids", "16\n")
        .read("info/MB/num_closids", "8\n")
        .read("info/L3/cbm_mask", "7ff\n")
        .read("info/L3/min_cbm_bits", "1\n")
        .read("info/L3/shareable_bits", "600\n")
        .read("info/L3/sparse_masks", "0\n")
        .read("info/MB/min_bandwidth", "10\n")
        .read("info/MB/bandwidth_gran", "10\n")
        .read("info/MB/delay_linear", "1\n")
        .read("info/MB/thread_throttle_mode", "max\n")
        .read("info/L3_MON/num_rmids", "144\n")
        // 25952256 bytes of L3 / 144 RMIDs = 180224, rounded down to 73728-byte units
        .read("info/L3_MON/max_threshold_occupancy", "147456\n")
        .read("size", "    MB:0=100;1=100\n    L3:0=25952256;1=25952256\n")
        .exists("mon_groups", true)
        .exists("mon_data/mon_L3_00/llc_occupancy", true)
        .exists("mon_data/mon_L3_01/mbm_local_bytes", true)
        .exists("info/L3CODE", false)
        .msr(0, L3_CFG, 0)
        .msr(5, PQR, 0)
        .done(
            "15.1 fresh mount",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "",
        )
}

/// §15.1, last sentence: `mount -o cdp`.
fn fresh_mount_cdp() -> Transcript {
    B::default()
        .read(
            "schemata",
            "    MB:0=100;1=100\nL3DATA:0=7ff;1=7ff\nL3CODE:0=7ff;1=7ff\n",
        )
        .read("info/L3CODE/num_closids", "8\n")
        .read("info/L3DATA/num_closids", "8\n")
        .exists("info/L3", false)
        // IA32_L3_QOS_CFG bit 0 in both L3 domains (CPU 0 is in domain 0, CPU 1 in 1)
        .msr(0, L3_CFG, 1)
        .msr(1, L3_CFG, 1)
        .write_err(
            "schemata",
            "L3:0=3\n",
            EINVAL,
            "Unknown or unsupported resource name 'L3'\n",
        )
        .mkdir("p0")
        .write("p0/schemata", "L3CODE:0=f0\n")
        .write("p0/schemata", "L3DATA:1=3\n")
        .read(
            "p0/schemata",
            "    MB:0=100;1=100\nL3DATA:0=7ff;1=3\nL3CODE:0=f0;1=7ff\n",
        )
        // COS1: data mask at 0xC90 + 2, code mask at 0xC90 + 3
        .msr(0, L3_MASK + 3, 0xf0)
        .msr(1, L3_MASK + 2, 0x3)
        .msr(0, L3_MASK + 2, 0x7ff)
        .done(
            "15.1 fresh mount with cdp",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "cdp",
        )
}

/// §15.2 on skylake-sp.
fn schemata_writes() -> Transcript {
    let mut b = B::default();
    b.mkdir("p0")
        .read("p0/schemata", "    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n")
        .write("p0/schemata", "L3:0=3\n")
        .read("p0/schemata", "    MB:0=100;1=100\n    L3:0=3;1=7ff\n")
        // p0 has CLOSID 1: IA32_L3_QOS_MASK_1 of domain 0 (CPU 0) and 1 (CPU 1)
        .msr(0, L3_MASK + 1, 0x3)
        .msr(1, L3_MASK + 1, 0x7ff)
        .write("p0/schemata", "L3:0=0x00C\n")
        .read("p0/schemata", "    MB:0=100;1=100\n    L3:0=c;1=7ff\n")
        .write_err(
            "p0/schemata",
            "L3:0=5\n",
            EINVAL,
            "The mask 5 has non-consecutive 1-bits\n",
        )
        .write_err("p0/schemata", "L3:0=0\n", EINVAL, "Mask out of range\n")
        .write_err("p0/schemata", "L3:0=fff\n", EINVAL, "Mask out of range\n")
        .write_err(
            "p0/schemata",
            "L3:0=xyz\n",
            EINVAL,
            "Non-hex character in the mask xyz\n",
        )
        .write_err("p0/schemata", "L3:2=3\n", EINVAL, "ok\n")
        .write_err(
            "p0/schemata",
            "L3: 0=3\n",
            EINVAL,
            "Missing '=' or non-numeric domain\n",
        )
        .write_err(
            "p0/schemata",
            "L3:0=3;0=7\n",
            EINVAL,
            "Duplicate domain 0\n",
        )
        .write_err(
            "p0/schemata",
            "l3:0=3\n",
            EINVAL,
            "Unknown or unsupported resource name 'l3'\n",
        )
        .write_err(
            "p0/schemata",
            "L3CODE:0=3\n",
            EINVAL,
            "Unknown or unsupported resource name 'L3CODE'\n",
        )
        // No trailing newline: EINVAL before the status is cleared (v6.17), so the previous
        // message stays; after a successful write it reads "ok".
        .write_err(
            "p0/schemata",
            "L3:0=3",
            EINVAL,
            "Unknown or unsupported resource name 'L3CODE'\n",
        )
        .write("p0/schemata", "L3:0=c\n")
        .write_err("p0/schemata", "L3:0=3", EINVAL, "ok\n")
        .write_err("p0/schemata", "L3:0=3\n\n", EINVAL, "Missing ':'\n")
        .write_err("p0/schemata", "\n", EINVAL, "Missing ':'\n")
        .write_err("p0/schemata", "L3:\n", EINVAL, "Missing 'L3' value\n")
        .write("p0/schemata", "MB:0=15\n")
        .read("p0/schemata", "    MB:0=20;1=100\n    L3:0=c;1=7ff\n")
        // Intel MBA holds the delay: 100 - 20 at 0xD50 + CLOSID
        .msr(0, MBA_DELAY + 1, 80)
        .write_err(
            "p0/schemata",
            "MB:0=5\n",
            EINVAL,
            "MB value 5 out of range [10,100]\n",
        )
        .write_err(
            "p0/schemata",
            "MB:0=0x32\n",
            EINVAL,
            "Invalid MB value 0x32\n",
        )
        .write("p0/schemata", "L3:1=f\nMB:1=50\n")
        .read("p0/schemata", "    MB:0=20;1=50\n    L3:0=c;1=f\n")
        .write_err(
            "p0/schemata",
            "L3:1=1f\nMB:1=500\n",
            EINVAL,
            "MB value 500 out of range [10,100]\n",
        )
        .read("p0/schemata", "    MB:0=20;1=50\n    L3:0=c;1=f\n")
        .msr(1, L3_MASK + 1, 0xf)
        .write("p0/schemata", "    L3:0=3;1=f\n")
        .read("p0/schemata", "    MB:0=20;1=50\n    L3:0=3;1=f\n")
        // other accepted spellings: trailing ';', spaces around the value, '+' ids
        .write("p0/schemata", "L3:0= 7 ;+1=3;\n")
        .read("p0/schemata", "    MB:0=20;1=50\n    L3:0=7;1=3\n")
        // the root's values are untouched
        .read("schemata", "    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n")
        .msr(0, L3_MASK, 0x7ff);
    b.done(
        "15.2 schemata writes",
        "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
        "",
    )
}

/// §15.3 on skylake-sp: `shareable_bits` 0x600 add `X` to `bit_usage`.
fn exclusive_groups() -> Transcript {
    B::default()
        .mkdir("p0")
        .write_err("p0/mode", "exclusive\n", EINVAL, "Schemata overlaps\n")
        .write("schemata", "L3:0=7fc;1=7fc\n")
        .write("p0/schemata", "L3:0=3;1=3\n")
        .write("p0/mode", "exclusive\n")
        .read("p0/mode", "exclusive\n")
        .read("info/L3/bit_usage", "0=XXSSSSSSSEE;1=XXSSSSSSSEE\n")
        .mkdir("p1")
        .read("p1/schemata", "    MB:0=100;1=100\n    L3:0=7fc;1=7fc\n")
        .write_err(
            "p1/schemata",
            "L3:0=1\n",
            EINVAL,
            "Overlaps with exclusive group\n",
        )
        .write_err(
            "p0/schemata",
            "L3:0=7\n",
            EINVAL,
            "Overlaps with other group\n",
        )
        .write_err(
            "p1/mode",
            "Exclusive\n",
            EINVAL,
            "Unknown or unsupported mode\n",
        )
        .write_err(
            "p1/mode",
            "exclusive",
            EINVAL,
            "Unknown or unsupported mode\n",
        )
        .write_err(
            "p1/mode",
            "pseudo-locksetup\n",
            EINVAL,
            "Pseudo-locking not supported\n",
        )
        .write_err(
            "mode",
            "pseudo-locksetup\n",
            EINVAL,
            "Cannot pseudo-lock default group\n",
        )
        .write("p0/mode", "shareable\n")
        .read("info/L3/bit_usage", "0=XXSSSSSSSSS;1=XXSSSSSSSSS\n")
        // an exclusive group may not take hardware-shared bits
        .write("p0/schemata", "L3:0=600;1=600\n")
        .write_err("p0/mode", "exclusive\n", EINVAL, "Schemata overlaps\n")
        .done(
            "15.3 exclusive groups and new-group defaults",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "",
        )
}

/// §15.4 with the context's task ids (t0 = 1234, ..., t6 = 1240).
fn tasks(ctx: &Ctx) -> Transcript {
    let t = ctx.tasks;
    let miss = ctx.missing;
    let line = |id: u32| format!("{id}");
    B::default()
        .mkdir("p0")
        .mkdir("p1")
        .write("p0/tasks", &format!("{}\n", t[0]))
        .write("p0/tasks", &format!("{},{}\n", t[1], t[2]))
        .read("p0/tasks", &format!("{}\n{}\n{}\n", t[0], t[1], t[2]))
        .write_err(
            "p0/tasks",
            &format!("{} {}\n", t[3], t[4]),
            EINVAL,
            &format!("Task list parsing error pid {} {}\n", t[3], t[4]),
        )
        .write_err(
            "p0/tasks",
            &format!("{miss}\n"),
            ESRCH,
            &format!("No task {miss}\nError while processing task {miss}\n"),
        )
        .write_err(
            "p0/tasks",
            &format!("{},{miss},{}\n", t[5], t[6]),
            ESRCH,
            &format!("No task {miss}\nError while processing task {miss}\n"),
        )
        .read_lines("p0/tasks", &[line(t[5])], &[line(t[6])])
        .read_lines("tasks", &[], &[line(t[0]), line(t[5])])
        .write_err("p0/tasks", "-5\n", EINVAL, "Invalid pid -5\n")
        .write_err(
            "p0/tasks",
            &format!("{},,{}\n", t[3], t[4]),
            EINVAL,
            "Task list parsing error pid \n",
        )
        .read_lines("p0/tasks", &[line(t[3])], &[line(t[4])])
        .mkdir("p1/mon_groups/m1")
        .write_err(
            "p1/mon_groups/m1/tasks",
            &format!("{}\n", t[0]),
            EINVAL,
            &format!(
                "Can't move task to different control group\nError while processing task {}\n",
                t[0]
            ),
        )
        .write("p1/tasks", &format!("{}\n", t[0]))
        .write("p1/mon_groups/m1/tasks", &format!("{}\n", t[0]))
        .read("p1/tasks", &format!("{}\n", t[0]))
        .read("p1/mon_groups/m1/tasks", &format!("{}\n", t[0]))
        // already there: a no-op success
        .write("p1/mon_groups/m1/tasks", &format!("{}\n", t[0]))
        .rmdir("p1")
        .read_lines("tasks", &[line(t[0])], &[])
        .exists("p1/mon_groups/m1", false)
        .exists("p1", false)
        .done(
            "15.4 tasks",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "",
        )
}

/// §15.5 on skylake-sp: 72 CPUs, so masks have three chunks and CPU 72 is the first that
/// does not exist (the spec's `100` and `9` on 8 CPUs).
fn cpus() -> Transcript {
    let nr = 72;
    let all: Vec<u32> = (0..nr).collect();
    let root_rest: Vec<u32> = (0..nr).filter(|c| !(4..8).contains(c)).collect();
    B::default()
        .mkdir("p0")
        .write("p0/cpus", "f0\n")
        .read("p0/cpus", &format!("{}\n", mask_text(&[4, 5, 6, 7], nr)))
        .read("cpus", &format!("{}\n", mask_text(&root_rest, nr)))
        .read("p0/cpus_list", "4-7\n")
        // p0 has CLOSID 1 and RMID 1: IA32_PQR_ASSOC of CPUs 4-7
        .msr(4, PQR, (1 << 32) | 1)
        .msr(7, PQR, (1 << 32) | 1)
        .msr(3, PQR, 0)
        .write_err(
            "cpus_list",
            "0-3\n",
            EINVAL,
            "Can't drop CPUs from default group\n",
        )
        .mkdir("p0/mon_groups/m")
        .write("p0/mon_groups/m/cpus", "10\n")
        .read("p0/mon_groups/m/cpus_list", "4\n")
        // m has RMID 2 under CLOSID 1
        .msr(4, PQR, (1 << 32) | 2)
        .write_err(
            "p0/mon_groups/m/cpus",
            "01\n",
            EINVAL,
            "Can only add CPUs to mongroup that belong to parent\n",
        )
        .write("p0/cpus", "f0\n")
        .read("p0/mon_groups/m/cpus", &format!("{}\n", mask_text(&[], nr)))
        .read("p0/mon_groups/m/cpus_list", "\n")
        .msr(4, PQR, (1 << 32) | 1)
        .write_err(
            "p0/cpus",
            "100,00000000,00000000\n",
            EOVERFLOW,
            "Bad CPU list/mask\n",
        )
        .write_err("p0/cpus_list", "72\n", ERANGE, "Bad CPU list/mask\n")
        .write_err("p0/cpus", "xyz\n", EINVAL, "Bad CPU list/mask\n")
        .write("p0/cpus", "\n")
        .read("cpus", &format!("{}\n", mask_text(&all, nr)))
        .read("p0/cpus_list", "\n")
        .msr(4, PQR, 0)
        // CPUs taken by the root's own write come back from the group
        .write("p0/cpus_list", "8-11\n")
        .write("cpus_list", "0-71\n")
        .read("p0/cpus_list", "\n")
        .msr(8, PQR, 0)
        .done(
            "15.5 cpus",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "",
        )
}

/// §15.6 on skylake-sp: MB has 8 CLOSIDs, so root + 7 groups.
fn limits() -> Transcript {
    let mut b = B::default();
    for i in 1..=7 {
        b.mkdir(&format!("g{i}"));
    }
    b.mkdir_err("g8", ENOSPC, Some("Out of CLOSIDs\n"))
        .mkdir_err("mon_groups/x/y", ENOENT, None)
        .mkdir_err("g1/foo", EPERM, None)
        .mkdir_err("g1/mon_groups/mon_groups", EPERM, None)
        .mkdir_err("info/foo", super::errno::ENODEV, None)
        .mkdir_err("g1", EEXIST, None)
        .rmdir_err("mon_groups", EPERM)
        .rmdir_err("g1/mon_groups", EPERM)
        .rmdir_err("g1/mon_data", EPERM)
        .rmdir_err("info", EPERM)
        .rmdir_err("nothing", ENOENT)
        .rename_err("g1", "g9", EPERM, "Source must be a MON group\n")
        // the lowest free CLOSID is reused
        .rmdir("g3")
        .mkdir("g8")
        .read("g8/schemata", "    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n")
        .write("g8/schemata", "L3:0=1\n")
        .msr(0, L3_MASK + 3, 0x1)
        .done(
            "15.6 limits",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "",
        )
}

/// §15.7 on milan: 16 L3 domains, CDP-capable L3 (names padded to 6), no SMBA, BMEC or
/// ABMC (those rows are left out). The zero-CBM row is in [`amd_zero_cbm`].
fn amd_reference() -> Transcript {
    let doms = 16;
    let line = |name: &str, f: &dyn Fn(u32) -> String| {
        let v: Vec<String> = (0..doms).map(|d| format!("{d}={}", f(d))).collect();
        format!("{name}:{}\n", v.join(";"))
    };
    let mb_default = line("    MB", &|_| "2048".into());
    let l3_default = line("    L3", &|_| "ffff".into());
    let mb_after = line("    MB", &|d| if d == 1 { "16" } else { "2048" }.into());
    let l3_after = line("    L3", &|d| if d == 0 { "f0f" } else { "ffff" }.into());
    B::default()
        .read("schemata", &format!("{mb_default}{l3_default}"))
        .write("schemata", "MB:1=16\n")
        .read("schemata", &format!("{mb_after}{l3_default}"))
        // AMD's MBA register holds the units: 0xC000_0200 + CLOSID on a CPU of domain 1
        .msr(8, 0xC000_0200, 16)
        .write("schemata", "L3:0=f0f\n")
        .read("schemata", &format!("{mb_after}{l3_after}"))
        .msr(0, L3_MASK, 0xf0f)
        .write_err(
            "schemata",
            "MB:0=4096\n",
            EINVAL,
            "MB value 4096 out of range [0,2048]\n",
        )
        .read("info/MB/min_bandwidth", "0\n")
        .read("info/MB/bandwidth_gran", "1\n")
        .read("info/MB/delay_linear", "0\n")
        .exists("info/MB/thread_throttle_mode", false)
        .exists("info/SMBA", false)
        .read("info/L3/min_cbm_bits", "0\n")
        .read("info/L3/sparse_masks", "1\n")
        .read("info/L3/cbm_mask", "ffff\n")
        .exists("mon_data/mon_L3_15/llc_occupancy", true)
        .done("15.7 AMD reference", "milan", "")
}

/// §15.7's `echo "L3:0=0" > schemata` → ok (AMD allows an empty CBM). Not in [`all`]: the
/// model's IA32_L3_QOS_MASK_n refuses 0 on AMD too (EIO), so resctrl cannot program it.
#[must_use]
pub fn amd_zero_cbm() -> Transcript {
    B::default()
        .write("schemata", "L3:0=0\n")
        .msr(0, L3_MASK, 0)
        .done("15.7 AMD empty CBM", "milan", "")
}

/// §15.8 and §19.8: CTRL_MON = own RMID + its MON groups'; removing a MON group drops its
/// bytes from the parent's sum; numbers are plain decimals. p0's CPUs are all in its two MON
/// groups, so its own RMID counts nothing and its sum is theirs.
fn monitoring() -> Transcript {
    let d1 = "mon_data/mon_L3_01";
    let p0 = format!("p0/{d1}/mbm_total_bytes");
    let m1 = format!("p0/mon_groups/m1/{d1}/mbm_total_bytes");
    let m2 = format!("p0/mon_groups/m2/{d1}/mbm_total_bytes");
    B::default()
        .mkdir("p0")
        .mkdir("p0/mon_groups/m1")
        .mkdir("p0/mon_groups/m2")
        // CPUs 3 and 5 run the default scenario's pipeline, in L3 domain 1 (odd CPUs)
        .write("p0/cpus_list", "3,5\n")
        .write("p0/mon_groups/m1/cpus_list", "3\n")
        .write("p0/mon_groups/m2/cpus_list", "5\n")
        .read(&m1, "0\n")
        .advance(2)
        .decimal("mon_data/mon_L3_00/llc_occupancy")
        .positive(&format!("{d1}/mbm_total_bytes"))
        .positive(&m1)
        .positive(&m2)
        .positive(&format!("p0/mon_groups/m1/{d1}/llc_occupancy"))
        .sum(&p0, &[&m1, &m2])
        .sum(
            &format!("p0/{d1}/llc_occupancy"),
            &[
                &format!("p0/mon_groups/m1/{d1}/llc_occupancy"),
                &format!("p0/mon_groups/m2/{d1}/llc_occupancy"),
            ],
        )
        .read("p0/mon_data/mon_L3_00/mbm_total_bytes", "0\n")
        .save(&p0)
        .rmdir("p0/mon_groups/m2")
        .cmp(&p0, Ordering::Less)
        .sum(&p0, &[&m1])
        .advance(1)
        .greater(&m1, &p0)
        .done(
            "15.8 monitoring reads",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "",
        )
}

/// §19.4 (second half): MON groups until "Out of RMIDs"; a freed RMID waits in limbo (EBUSY)
/// until the 1 s limbo worker finds it clean.
fn out_of_rmids_and_limbo() -> Transcript {
    let mut b = B::default();
    // 144 RMIDs, RMID 0 is the root's: 143 groups.
    for i in 1..=143 {
        b.mkdir(&format!("mon_groups/m{i}"));
    }
    b.mkdir_err("mon_groups/m144", ENOSPC, Some("Out of RMIDs\n"))
        .mkdir_err("p0", ENOSPC, Some("Out of RMIDs\n"))
        .rmdir("mon_groups/m7")
        .mkdir_err("mon_groups/m144", EBUSY, Some("Out of RMIDs\n"))
        .advance(1)
        .mkdir("mon_groups/m144")
        .mkdir_err("mon_groups/m145", ENOSPC, Some("Out of RMIDs\n"))
        .done(
            "19.4 out of RMIDs, limbo",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "",
        )
}

/// §19.6: CPUs go root → group → root on rmdir, and IA32_PQR_ASSOC follows.
fn cpu_ownership_on_rmdir() -> Transcript {
    B::default()
        .mkdir("p0")
        .mkdir("p1")
        .write("p0/cpus_list", "0-3\n")
        .write("p1/cpus_list", "2-5\n")
        .read("p0/cpus_list", "0-1\n")
        .read("p1/cpus_list", "2-5\n")
        .msr(2, PQR, (2 << 32) | 2)
        .mkdir("p1/mon_groups/m")
        .write("p1/mon_groups/m/cpus_list", "4\n")
        .msr(4, PQR, (2 << 32) | 3)
        .rmdir("p1")
        .read("cpus_list", "2-71\n")
        .msr(2, PQR, 0)
        .msr(4, PQR, 0)
        .msr(0, PQR, (1 << 32) | 1)
        .rmdir("p0")
        .read("cpus_list", "0-71\n")
        .msr(0, PQR, 0)
        .done(
            "19.6 CPU ownership on rmdir",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "",
        )
}

/// §7.3 / §19.7: a MON group moves to another CTRL_MON parent with its RMID and tasks (which
/// take the new CLOSID), refused while it has CPUs. Mounted with `debug` for the hw ids.
fn mon_group_rename(ctx: &Ctx) -> Transcript {
    let t = ctx.tasks;
    let dom = "mon_data/mon_L3_00/mbm_total_bytes";
    B::default()
        .mkdir("p0")
        .mkdir("p1")
        .mkdir("p0/mon_groups/m")
        .read("p0/ctrl_hw_id", "1\n")
        .read("p1/ctrl_hw_id", "2\n")
        .read("p0/mon_groups/m/mon_hw_id", "3\n")
        .write("p0/tasks", &format!("{}\n", t[0]))
        .write("p0/mon_groups/m/tasks", &format!("{}\n", t[0]))
        .write("p0/mon_groups/m/cpus_list", "\n")
        // CPU 2 runs the pipeline, in L3 domain 0
        .write("p0/cpus_list", "2\n")
        .write("p0/mon_groups/m/cpus_list", "2\n")
        .advance(1)
        .rename_err(
            "p0/mon_groups/m",
            "p1/mon_groups/n",
            EPERM,
            "Cannot move a MON group that monitors CPUs\n",
        )
        .rename("p0/mon_groups/m", "p0/mon_groups/m2")
        .exists("p0/mon_groups/m", false)
        .write("p0/mon_groups/m2/cpus_list", "\n")
        .positive(&format!("p0/mon_groups/m2/{dom}"))
        .save(&format!("p0/mon_groups/m2/{dom}"))
        .rename("p0/mon_groups/m2", "p1/mon_groups/n")
        .read("p1/mon_groups/n/mon_hw_id", "3\n")
        .read("p1/mon_groups/n/tasks", &format!("{}\n", t[0]))
        .read("p1/tasks", &format!("{}\n", t[0]))
        .read("p0/tasks", "")
        // its counts moved with it
        .cmp(&format!("p1/mon_groups/n/{dom}"), Ordering::Equal)
        .rename_err("p1", "p2", EPERM, "Source must be a MON group\n")
        .rename_err(
            "p1/mon_groups/n",
            "p0/n",
            EPERM,
            "Destination must be a mon_groups subdirectory\n",
        )
        .rename_err(
            "p1/mon_groups/n",
            "p0/mon_groups/mon_groups",
            EPERM,
            "Destination must be a mon_groups subdirectory\n",
        )
        .rename_err(
            "p1/tasks",
            "p1/mon_groups/x",
            EPERM,
            "Source and destination must be directories",
        )
        .mkdir("p0/mon_groups/n")
        .push(
            Op::Rename("p1/mon_groups/n".into(), "p0/mon_groups/n".into()),
            Expect::Errno(EEXIST),
            None,
            "mv onto an existing group",
        )
        .done(
            "19.7 MON group rename",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "debug",
        )
}

/// §19.9 and §4.1: cleared by every command, accumulated for task errors, "ok" after a
/// failure that sets no text; reads do not clear it.
fn last_cmd_status(ctx: &Ctx) -> Transcript {
    let miss = ctx.missing;
    B::default()
        .mkdir("p0")
        .write_err(
            "p0/tasks",
            &format!("{miss}"),
            ESRCH,
            &format!("No task {miss}\nError while processing task {miss}\n"),
        )
        .read("p0/schemata", "    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n")
        .status(&format!(
            "No task {miss}\nError while processing task {miss}\n"
        ))
        .rmdir("p0")
        .status(&format!(
            "No task {miss}\nError while processing task {miss}\n"
        ))
        .mkdir("p0")
        .write_err("p0/schemata", "L3:5=1\n", EINVAL, "ok\n")
        .write_err(
            "p0/schemata",
            "L3:0=5\n",
            EINVAL,
            "The mask 5 has non-consecutive 1-bits\n",
        )
        .write("p0/cpus_list", "1\n")
        .done(
            "19.9 last_cmd_status",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "",
        )
}

/// §4 and §13.3: read-only files, page-sized writes, newline rules, `max_threshold_occupancy`.
fn file_semantics() -> Transcript {
    let long = format!("L3:0=3{}\n", ";1=3".repeat(1100));
    B::default()
        .mkdir("p0")
        .write_err("p0/schemata", &long, E2BIG, "ok\n")
        .push(
            Op::Write("p0/size".into(), b"x\n".to_vec()),
            Expect::Errno(EACCES),
            None,
            "echo x > p0/size",
        )
        .push(
            Op::Write("info/L3/cbm_mask".into(), b"1\n".to_vec()),
            Expect::Errno(EACCES),
            None,
            "echo 1 > info/L3/cbm_mask",
        )
        .push(
            Op::Write("mon_data/mon_L3_00/llc_occupancy".into(), b"0\n".to_vec()),
            Expect::Errno(EACCES),
            None,
            "echo 0 > mon_data/mon_L3_00/llc_occupancy",
        )
        .push(
            Op::Write("info/last_cmd_status".into(), b"x\n".to_vec()),
            Expect::Errno(EACCES),
            None,
            "echo x > info/last_cmd_status",
        )
        .write("p0/cpus_list", "1")
        .read("p0/cpus_list", "1\n")
        .write_err("p0/mode", "exclusive", EINVAL, "ok\n")
        .read(
            "p0/size",
            "    MB:0=100;1=100\n    L3:0=25952256;1=25952256\n",
        )
        .write("p0/schemata", "L3:0=3;1=3f\n")
        // 25952256 / 11 = 2359296 bytes per bit
        .read(
            "p0/size",
            "    MB:0=100;1=100\n    L3:0=4718592;1=14155776\n",
        )
        .write("info/L3_MON/max_threshold_occupancy", "100000\n")
        .read("info/L3_MON/max_threshold_occupancy", "73728\n")
        .write("info/L3_MON/max_threshold_occupancy", "0x30000")
        .read("info/L3_MON/max_threshold_occupancy", "147456\n")
        .push(
            Op::Write(
                "info/L3_MON/max_threshold_occupancy".into(),
                b"25952257\n".to_vec(),
            ),
            Expect::Errno(EINVAL),
            None,
            "echo 25952257 > info/L3_MON/max_threshold_occupancy (above the L3 size)",
        )
        .done(
            "13 file semantics",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "",
        )
}

/// §6.3 and §6.7 with `mba_MBps`: targets in MBps (default U32_MAX), stored while parsing.
fn mba_mbps() -> Transcript {
    B::default()
        .read(
            "schemata",
            "    MB:0=4294967295;1=4294967295\n    L3:0=7ff;1=7ff\n",
        )
        .read("mba_MBps_event", "mbm_local_bytes\n")
        .mkdir("p0")
        .write("p0/schemata", "MB:0=5000\n")
        .read(
            "p0/schemata",
            "    MB:0=5000;1=4294967295\n    L3:0=7ff;1=7ff\n",
        )
        .write_err(
            "p0/schemata",
            "MB:0=3000\nL3:0=5\n",
            EINVAL,
            "The mask 5 has non-consecutive 1-bits\n",
        )
        .read(
            "p0/schemata",
            "    MB:0=3000;1=4294967295\n    L3:0=7ff;1=7ff\n",
        )
        .read(
            "p0/size",
            "    MB:0=3000;1=4294967295\n    L3:0=25952256;1=25952256\n",
        )
        .write("p0/mba_MBps_event", "mbm_total_bytes\n")
        .read("p0/mba_MBps_event", "mbm_total_bytes\n")
        .write_err(
            "p0/mba_MBps_event",
            "mbm_totl_bytes\n",
            EINVAL,
            "Unsupported event id 'mbm_totl_bytes'\n",
        )
        .write_err(
            "p0/schemata",
            "MB:0=4294967296\n",
            EINVAL,
            "Invalid MB value 4294967296\n",
        )
        .done(
            "6.3 mba_MBps",
            "skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal",
            "mba_MBps",
        )
}

/// L2 CAT with `cdpl2` on sapphire-rapids: 80 L2 domains with sparse ids, L2 8 CLOSIDs
/// (4 with CDP) cap every group.
fn l2_cdp() -> Transcript {
    let mut b = B::default();
    b.read("info/L2CODE/num_closids", "4\n")
        .read("info/L2DATA/cbm_mask", "ffff\n")
        .read("info/L3/num_closids", "15\n")
        .mkdir("g1")
        .mkdir("g2")
        .mkdir("g3")
        .mkdir_err("g4", ENOSPC, Some("Out of CLOSIDs\n"))
        .write("g1/schemata", "L2CODE:0=ff\n")
        .write_err(
            "g1/schemata",
            "L2:0=ff\n",
            EINVAL,
            "Unknown or unsupported resource name 'L2'\n",
        )
        // IA32_L2_QOS_MASK_n at 0xD10 + n: CLOSID 1's code mask is n = 3; CPU 0 is in L2 0
        .msr(0, 0xD13, 0xff)
        .msr(0, 0xD12, 0xffff)
        .msr(0, 0xC82, 1);
    b.done("L2 CDP", "sapphire-rapids", "cdpl2")
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn decimal(fs: &mut dyn FsOps, path: &str) -> Result<u64, String> {
    let text = fs
        .read(path)
        .map_err(|e| format!("reading {path}: errno {e}"))?;
    lossy(&text)
        .strip_suffix('\n')
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("{path}: {:?} is not a decimal line", lossy(&text)))
}

fn check_step(step: &Step, fs: &mut dyn FsOps, saved: &mut Option<u64>) -> Result<(), String> {
    let got: Result<Vec<u8>, i32> = match &step.op {
        Op::Positive(p) => {
            let v = decimal(fs, p)?;
            return if v > 0 {
                Ok(())
            } else {
                Err(format!("{p} reads 0"))
            };
        }
        Op::Save(p) => {
            *saved = Some(decimal(fs, p)?);
            return Ok(());
        }
        Op::Cmp(p, ord) => {
            let v = decimal(fs, p)?;
            let was = saved.ok_or("nothing saved")?;
            return if v.cmp(&was) == *ord {
                Ok(())
            } else {
                Err(format!("{p} = {v}, expected {ord:?} than the saved {was}"))
            };
        }
        Op::Read(p) => fs.read(p),
        Op::Write(p, d) => fs.write(p, d).map(|()| Vec::new()),
        Op::Mkdir(p) => fs.mkdir(p).map(|()| Vec::new()),
        Op::Rmdir(p) => fs.rmdir(p).map(|()| Vec::new()),
        Op::Rename(a, b) => fs.rename(a, b).map(|()| Vec::new()),
        Op::Exists(p) => Ok(if fs.exists(p) {
            b"yes".to_vec()
        } else {
            b"no".to_vec()
        }),
        Op::Msr { cpu, addr } => fs.msr(*cpu, *addr).map(|v| v.to_le_bytes().to_vec()),
        Op::Advance(dt) => {
            fs.advance(*dt);
            Ok(Vec::new())
        }
        Op::Sum { whole, parts } => {
            let w = decimal(fs, whole)?;
            let mut s = 0u64;
            for p in parts {
                s = s.wrapping_add(decimal(fs, p)?);
            }
            return if w == s {
                Ok(())
            } else {
                Err(format!("{whole} = {w}, parts sum to {s}"))
            };
        }
        Op::Greater { larger, smaller } => {
            let a = decimal(fs, smaller)?;
            let b = decimal(fs, larger)?;
            return if b > a {
                Ok(())
            } else {
                Err(format!("{larger} = {b} is not above {smaller} = {a}"))
            };
        }
    };
    compare(&step.expect, got)
}

/// Whether an operation's result `got` is what `expect` says.
fn compare(expect: &Expect, got: Result<Vec<u8>, i32>) -> Result<(), String> {
    match (expect, got) {
        (Expect::Ok, Ok(_)) => Ok(()),
        (Expect::Is(want), Ok(g)) if *want == g => Ok(()),
        (Expect::Is(want), Ok(g)) => Err(format!(
            "expected {:?}\n       got {:?}",
            lossy(want),
            lossy(&g)
        )),
        (Expect::Lines { has, lacks }, Ok(g)) => {
            let text = lossy(&g);
            let lines: Vec<&str> = text.lines().collect();
            if let Some(m) = has.iter().find(|l| !lines.contains(&l.as_str())) {
                return Err(format!("line {m:?} missing from {text:?}"));
            }
            if let Some(m) = lacks.iter().find(|l| lines.contains(&l.as_str())) {
                return Err(format!("line {m:?} present in {text:?}"));
            }
            Ok(())
        }
        (Expect::Decimal, Ok(g)) => {
            let t = lossy(&g);
            if t.strip_suffix('\n')
                .is_some_and(|n| n.parse::<u64>().is_ok())
            {
                Ok(())
            } else {
                Err(format!("{t:?} is not a decimal line"))
            }
        }
        (Expect::Value(v), Ok(g)) => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&g);
            let got = u64::from_le_bytes(b);
            if got == *v {
                Ok(())
            } else {
                Err(format!("MSR reads {got:#x}, expected {v:#x}"))
            }
        }
        (Expect::Present(p), Ok(g)) => {
            if (g == b"yes") == *p {
                Ok(())
            } else {
                Err(format!("exists = {}, expected {p}", lossy(&g)))
            }
        }
        (Expect::Errno(e), Err(g)) if *e == g => Ok(()),
        (Expect::Errno(e), Err(g)) => Err(format!("errno {g}, expected {e}")),
        (Expect::Errno(e), Ok(_)) => Err(format!("succeeded, expected errno {e}")),
        (_, Err(g)) => Err(format!("failed with errno {g}")),
    }
}

/// Runs `t` on `fs` (a fresh mount of `t.model` with `t.options`); the first step that does
/// not match is reported with its number and the spec line.
///
/// # Errors
/// A description of the first mismatch.
pub fn run(t: &Transcript, fs: &mut dyn FsOps) -> Result<(), String> {
    let mut saved = None;
    for (i, step) in t.steps.iter().enumerate() {
        let at = || format!("{} [{}], step {i} `{}`", t.name, t.model, step.note);
        check_step(step, fs, &mut saved).map_err(|e| format!("{}: {e}", at()))?;
        if let Some(want) = &step.status {
            let got = fs
                .read("info/last_cmd_status")
                .map_err(|e| format!("{}: last_cmd_status: errno {e}", at()))?;
            if got != *want {
                return Err(format!(
                    "{}: last_cmd_status {:?}, expected {:?}",
                    at(),
                    lossy(&got),
                    lossy(want)
                ));
            }
        }
    }
    Ok(())
}

/// [`FsOps`] on an in-process [`Resctrl`] and its platform.
#[derive(Debug)]
pub struct InProcess {
    /// The mounted filesystem.
    pub fs: Resctrl,
    /// The platform under it.
    pub sim: SimHandle,
}

impl InProcess {
    /// Mounts a fresh `model` with `options` and registers `ctx`'s tasks as simulated ones.
    ///
    /// # Errors
    /// The model or the options are invalid, or the mount fails.
    pub fn mount(model: &str, options: &str, ctx: &Ctx) -> io::Result<Self> {
        let p = SimPlatform::builtin(model).map_err(io::Error::other)?;
        let sim = SimHandle::new(p);
        let opts: MountOptions = options.parse().map_err(super::MountError::from)?;
        let mut fs = Resctrl::mount(sim.clone(), &opts)?;
        for &t in &ctx.tasks {
            fs.add_sim_task(t);
        }
        Ok(Self { fs, sim })
    }
}

fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(-1)
}

impl FsOps for InProcess {
    fn read(&mut self, path: &str) -> Result<Vec<u8>, i32> {
        let mut out = Vec::new();
        loop {
            let off = u64::try_from(out.len()).unwrap_or(u64::MAX);
            let chunk = self.fs.read(path, off, 4096).map_err(|e| errno_of(&e))?;
            if chunk.is_empty() {
                return Ok(out);
            }
            out.extend_from_slice(&chunk);
        }
    }

    fn write(&mut self, path: &str, data: &[u8]) -> Result<(), i32> {
        self.fs
            .write(path, 0, data)
            .map(drop)
            .map_err(|e| errno_of(&e))
    }

    fn mkdir(&mut self, path: &str) -> Result<(), i32> {
        self.fs.mkdir(path).map_err(|e| errno_of(&e))
    }

    fn rmdir(&mut self, path: &str) -> Result<(), i32> {
        self.fs.rmdir(path).map_err(|e| errno_of(&e))
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), i32> {
        self.fs.rename(from, to).map_err(|e| errno_of(&e))
    }

    fn exists(&mut self, path: &str) -> bool {
        self.fs.kind(path).is_ok()
    }

    fn msr(&mut self, cpu: u32, addr: u32) -> Result<u64, i32> {
        let mut h = self.sim.clone();
        MsrIo::read(&mut h, LogicalCpu::new(cpu), MsrAddr::new(addr)).map_err(|_| super::errno::EIO)
    }

    fn advance(&mut self, dt: Duration) {
        self.sim.advance(dt);
    }
}

/// [`FsOps`] with plain file operations on a mounted tree: `resctrl` is the resctrl root
/// (`DIR/sys/fs/resctrl`), `dev_cpu` the MSR device directory (`DIR/dev/cpu`), `sim` the
/// platform behind the mount (to advance its clock; mount it with a manual clock).
#[derive(Debug)]
pub struct OverFiles {
    /// The resctrl root.
    pub resctrl: std::path::PathBuf,
    /// `dev/cpu` of the mount.
    pub dev_cpu: std::path::PathBuf,
    /// The platform served.
    pub sim: SimHandle,
}

fn os_errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(-1)
}

impl FsOps for OverFiles {
    fn read(&mut self, path: &str) -> Result<Vec<u8>, i32> {
        std::fs::read(self.resctrl.join(path)).map_err(|e| os_errno(&e))
    }

    /// Opens with `O_WRONLY|O_TRUNC` as `echo >` does and makes one `write(2)`.
    fn write(&mut self, path: &str, data: &[u8]) -> Result<(), i32> {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(self.resctrl.join(path))
            .map_err(|e| os_errno(&e))?;
        let n = f.write(data).map_err(|e| os_errno(&e))?;
        if n == data.len() { Ok(()) } else { Err(-1) }
    }

    fn mkdir(&mut self, path: &str) -> Result<(), i32> {
        std::fs::create_dir(self.resctrl.join(path)).map_err(|e| os_errno(&e))
    }

    fn rmdir(&mut self, path: &str) -> Result<(), i32> {
        std::fs::remove_dir(self.resctrl.join(path)).map_err(|e| os_errno(&e))
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), i32> {
        std::fs::rename(self.resctrl.join(from), self.resctrl.join(to)).map_err(|e| os_errno(&e))
    }

    fn exists(&mut self, path: &str) -> bool {
        std::fs::symlink_metadata(self.resctrl.join(path)).is_ok()
    }

    /// A positioned 8-byte read of `dev/cpu/N/msr` at offset `addr`.
    fn msr(&mut self, cpu: u32, addr: u32) -> Result<u64, i32> {
        use std::os::unix::fs::FileExt as _;
        let f = std::fs::File::open(self.dev_cpu.join(format!("{cpu}/msr")))
            .map_err(|e| os_errno(&e))?;
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, u64::from(addr))
            .map_err(|e| os_errno(&e))?;
        Ok(u64::from_le_bytes(b))
    }

    fn advance(&mut self, dt: Duration) {
        self.sim.advance(dt);
    }
}

/// Eight real host processes (`sleep`) to stand for the transcripts' tasks over a mount,
/// where simulated tasks cannot be registered; killed on drop.
#[derive(Debug)]
pub struct HostTasks {
    children: Vec<std::process::Child>,
}

impl HostTasks {
    /// Starts them.
    ///
    /// # Errors
    /// When `sleep` cannot be started.
    pub fn spawn() -> io::Result<Self> {
        let children = (0..8)
            .map(|_| std::process::Command::new("sleep").arg("3600").spawn())
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Self { children })
    }

    /// Their ids, and an id no host thread has.
    #[must_use]
    pub fn ctx(&self) -> Ctx {
        let mut tasks = [0u32; 8];
        for (t, c) in tasks.iter_mut().zip(&self.children) {
            *t = c.id();
        }
        let missing = (99_999..4_194_304)
            .find(|id| !tasks.contains(id) && !Path::new(&format!("/proc/{id}")).exists())
            .unwrap_or(99_999);
        Ctx { tasks, missing }
    }
}

impl Drop for HostTasks {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A one-line summary of every transcript (name, model, options, steps), for docs and logs.
#[must_use]
pub fn summary(ctx: &Ctx) -> String {
    all(ctx).iter().fold(String::new(), |mut o, t| {
        let _ = writeln!(
            o,
            "{} [{} -o {:?}]: {} steps",
            t.name,
            t.model,
            t.options,
            t.steps.len()
        );
        o
    })
}
