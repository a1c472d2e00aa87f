//! RMID claims: which CPUs' RMIDs a process's monitoring groups hold, in a file that
//! outlives the process, so that the next process to open the platform can give back the
//! RMIDs of a run that was killed before it stopped (IA32_PQR_ASSOC is per CPU and keeps
//! its RMID after the process is gone; nothing else tells who set it).
//!
//! A process that monitors keeps `<dir>/msr-mon-<pid>` open with an exclusive `flock` for
//! as long as it lives, and rewrites it whenever its groups change: one `<cpu> <rmid>` line
//! per CPU it tagged. The file appears whole (written under a temporary name, locked, then
//! renamed) and goes away when the last group stops. A process that can take the lock of
//! such a file knows its writer has ended (the kernel drops `flock`s with the last file
//! descriptor, on SIGKILL too); it then puts each listed CPU back on RMID 0, but only where
//! IA32_PQR_ASSOC still holds the listed RMID, so a CPU someone tagged since is left alone.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use rdt_core::{CpuSet, LogicalCpu, Reclaimed};
use rdt_host::runfile::{RunFile, dead_run_files};

use crate::regs::{self, IA32_PQR_ASSOC};
use crate::{MsrError, MsrIo};

/// The file name prefix of claim files.
const PREFIX: &str = "msr-mon-";
/// The most of a claim file read: a line per CPU is far below this; anything longer is not
/// a claim file this library wrote.
const MAX_CLAIM_BYTES: u64 = 1 << 20;

/// This process's RMID claims under a directory.
#[derive(Debug)]
pub(crate) struct Claims {
    dir: PathBuf,
    /// The claim file, locked, while there are claims.
    file: Option<RunFile>,
    entries: BTreeMap<LogicalCpu, u32>,
}

impl Claims {
    /// Claims kept in `dir` (created, mode 0700, when the first claim is written).
    pub(crate) fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            file: None,
            entries: BTreeMap::new(),
        }
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    #[cfg(test)]
    fn path(&self) -> PathBuf {
        self.dir.join(format!("{PREFIX}{}", std::process::id()))
    }

    fn error(&self, source: io::Error) -> MsrError {
        MsrError::Claims {
            path: self.dir.join(format!("{PREFIX}{}", std::process::id())),
            source,
        }
    }

    /// Adds `(cpu, rmid)` claims and writes the file, synced, before returning.
    pub(crate) fn add(
        &mut self,
        claims: impl IntoIterator<Item = (LogicalCpu, u32)>,
    ) -> Result<(), MsrError> {
        self.entries.extend(claims);
        self.store().map_err(|e| self.error(e))
    }

    /// Drops the claims of `cpus`; the file goes when none is left.
    pub(crate) fn remove(
        &mut self,
        cpus: impl IntoIterator<Item = LogicalCpu>,
    ) -> Result<(), MsrError> {
        for cpu in cpus {
            self.entries.remove(&cpu);
        }
        self.store().map_err(|e| self.error(e))
    }

    /// Drops every claim (a monitoring reset gave every RMID back).
    pub(crate) fn clear(&mut self) -> Result<(), MsrError> {
        self.entries.clear();
        self.store().map_err(|e| self.error(e))
    }

    fn text(&self) -> String {
        let mut t = format!(
            "# RMIDs that process {} gave CPUs (<cpu> <rmid>); rdt, crates/rdt-msr/src/claims.rs\n",
            std::process::id()
        );
        for (cpu, rmid) in &self.entries {
            t.push_str(&format!("{cpu} {rmid}\n"));
        }
        t
    }

    fn store(&mut self) -> io::Result<()> {
        if self.entries.is_empty() {
            return self.file.take().map_or(Ok(()), RunFile::remove);
        }
        let text = self.text();
        if let Some(f) = &mut self.file {
            return f.rewrite(text.as_bytes());
        }
        self.file = Some(RunFile::create(&self.dir, PREFIX, text.as_bytes())?);
        Ok(())
    }
}

/// The `(cpu, rmid)` lines of a claim file; lines that do not parse are skipped.
fn parse(text: &str) -> Vec<(LogicalCpu, u32)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (cpu, rmid) = l.trim().split_once(' ')?;
            Some((
                LogicalCpu::new(cpu.parse().ok()?),
                rmid.trim().parse().ok()?,
            ))
        })
        .collect()
}

/// Gives back the RMIDs of every claim file in `dir` whose process has ended
/// ([`dead_run_files`]): each listed CPU whose IA32_PQR_ASSOC still holds the listed RMID
/// goes back to RMID 0, its COS kept, and `release(io, cpu, rmid)` gives back what else the
/// run held for it (AMD ABMC counters); the file is removed. A directory that does not
/// exist holds no claims.
///
/// # Errors
/// The directory cannot be listed; a register access fails (the claim file is kept, so
/// the next open tries again).
pub(crate) fn reclaim<M: MsrIo>(
    dir: &Path,
    io: &mut M,
    release: &mut dyn FnMut(&mut M, LogicalCpu, u32) -> Result<(), MsrError>,
) -> Result<Vec<Reclaimed>, MsrError> {
    let dead = dead_run_files(dir, PREFIX, MAX_CLAIM_BYTES).map_err(|source| MsrError::Claims {
        path: dir.to_owned(),
        source,
    })?;
    let mut out = Vec::new();
    for file in dead {
        let mut cpus = CpuSet::default();
        for (cpu, rmid) in parse(&file.text) {
            let Ok(v) = io.read(cpu, IA32_PQR_ASSOC) else {
                continue; // a CPU that is gone keeps nothing
            };
            if regs::pqr_rmid(v) == rmid && rmid != 0 {
                io.write(cpu, IA32_PQR_ASSOC, regs::pqr_with_rmid(v, 0))?; // RMID bits 9:0
                release(io, cpu, rmid)?;
                cpus.insert(cpu);
            }
        }
        let pid = file.pid;
        let _ = file.remove();
        if !cpus.is_empty() {
            out.push(Reclaimed::Rmids { cpus, pid });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeMsrs;
    use std::fs;

    const PQR: crate::MsrAddr = IA32_PQR_ASSOC;

    #[test]
    fn a_live_claim_is_left_and_a_dead_one_is_given_back_where_the_rmid_is_still_set() {
        // arrange: this process claims CPUs 1-3 with RMID 5
        let dir = tempfile::tempdir().unwrap();
        let mut io = FakeMsrs::new();
        for c in 1..=3 {
            io.set(LogicalCpu::new(c), PQR, regs::pqr_assoc(2, 5));
        }
        let mut claims = Claims::new(dir.path());
        claims
            .add((1..=3).map(|c| (LogicalCpu::new(c), 5)))
            .unwrap();
        // act + assert: alive (this process holds the lock): nothing happens
        assert_eq!(
            reclaim(dir.path(), &mut io, &mut |_, _, _| Ok(())).unwrap(),
            []
        );
        assert_eq!(regs::pqr_rmid(io.get(LogicalCpu::new(1), PQR).unwrap()), 5);
        // the process "dies" (as process 4242): its file stays, its lock goes
        let path = claims.path();
        drop(claims);
        let dead = dir.path().join(format!("{PREFIX}4242"));
        fs::rename(&path, &dead).unwrap();
        // someone else tagged CPU 3 since: it keeps its RMID
        io.set(LogicalCpu::new(3), PQR, regs::pqr_assoc(1, 7));
        let got = reclaim(dir.path(), &mut io, &mut |_, _, _| Ok(())).unwrap();
        assert_eq!(
            got,
            [Reclaimed::Rmids {
                cpus: "1-2".parse().unwrap(),
                pid: 4242
            }]
        );
        assert_eq!(
            io.get(LogicalCpu::new(1), PQR).unwrap(),
            regs::pqr_assoc(2, 0),
            "COS kept"
        );
        assert_eq!(regs::pqr_rmid(io.get(LogicalCpu::new(3), PQR).unwrap()), 7);
        assert!(!dead.exists());
    }

    #[test]
    fn the_file_follows_the_claims_and_goes_with_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let mut claims = Claims::new(dir.path().join("run"));
        claims.add([(LogicalCpu::new(4), 9)]).unwrap();
        let path = claims.path();
        assert!(fs::read_to_string(&path).unwrap().ends_with("4 9\n"));
        claims.add([(LogicalCpu::new(5), 9)]).unwrap();
        claims.remove([LogicalCpu::new(4)]).unwrap();
        assert_eq!(
            parse(&fs::read_to_string(&path).unwrap()),
            [(LogicalCpu::new(5), 9)]
        );
        claims.remove([LogicalCpu::new(5)]).unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn hostile_files_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(format!("{PREFIX}1")), "garbage\n\u{0}\n7\n").unwrap();
        fs::write(dir.path().join("other"), "1 1\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join(format!("{PREFIX}2"))).unwrap();
        let mut io = FakeMsrs::new();
        assert_eq!(
            reclaim(dir.path(), &mut io, &mut |_, _, _| Ok(())).unwrap(),
            []
        );
        assert_eq!(io.writes(), 0);
    }
}
