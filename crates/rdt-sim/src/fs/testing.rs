//! [`TestMount`]: a simulated platform mounted in a fresh temporary directory for one test.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::{Mount, MountConfig};
use crate::{SimHandle, SimPlatform};

/// A simulated platform mounted in a fresh directory under the temp dir, for a test.
///
/// Dropping it (at the end of the test, or while a failing test unwinds) unmounts first and
/// then removes the directory, only if it is empty: a directory that is still a mount point
/// is never deleted through. Panics with a message saying what to install when the mount
/// cannot be made: the FUSE tests of this workspace must fail loudly, never skip, on a
/// machine without FUSE.
///
/// # Examples
/// ```no_run
/// use rdt_sim::fs::testing::TestMount;
///
/// let m = TestMount::builtin("broadwell-ep");
/// let online = std::fs::read_to_string(m.path("sys/devices/system/cpu/online")).unwrap();
/// assert_eq!(online, "0-55\n");
/// ```
#[derive(Debug)]
pub struct TestMount {
    // Field order is drop order: the mount goes before the directory is removed.
    mount: Option<Mount>,
    dir: PathBuf,
}

impl TestMount {
    /// Mounts a fresh built-in model with the default [`MountConfig`].
    ///
    /// # Panics
    /// For an unknown model, or when the mount cannot be made (see [`TestMount::new`]).
    #[must_use]
    pub fn builtin(model: &str) -> Self {
        let p =
            SimPlatform::builtin(model).unwrap_or_else(|e| panic!("built-in model {model}: {e}"));
        Self::new(SimHandle::new(p), MountConfig::default())
    }

    /// Mounts `platform` with `config` in a new directory of the temp dir, named after the
    /// running test (`rdt-sim-test-<test>-<pid>-<n>-<µs>`), so a leaked mount names its test.
    ///
    /// # Panics
    /// When the directory cannot be made or the mount fails (no `/dev/fuse`, not root): the
    /// message says so and how to fix it.
    #[must_use]
    pub fn new(platform: SimHandle, config: MountConfig) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let base = std::env::temp_dir();
        // The time in the name: a later run whose pid is reused gets another directory, so
        // state kept per mount point outside it (the facade's `/run/rdt/sysroot-<hash>` run
        // directories) is never a former run's.
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        let test = test_label();
        let dir = loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let d = base.join(format!(
                "rdt-sim-test-{test}-{}-{n}-{stamp}",
                std::process::id()
            ));
            match std::fs::create_dir(&d) {
                Ok(()) => break d,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => panic!("creating the mount point {}: {e}", d.display()),
            }
        };
        match Mount::new(platform, &dir, config) {
            Ok(mount) => Self {
                mount: Some(mount),
                dir,
            },
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                panic!(
                    "{e:?}\nThe FUSE tests need /dev/fuse (`modprobe fuse`; package fuse3 on \
                     Debian) and root; .ci/run sets this up."
                )
            }
        }
    }

    /// The mount point.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.dir
    }

    /// `rel` under the mount point.
    #[must_use]
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// The model served.
    ///
    /// # Panics
    /// Never: the mount lives as long as `self`.
    #[must_use]
    pub fn platform(&self) -> &SimHandle {
        self.mount().platform()
    }

    /// The mount.
    ///
    /// # Panics
    /// Never: the mount lives as long as `self`.
    #[must_use]
    pub fn mount(&self) -> &Mount {
        self.mount.as_ref().expect("mounted until drop")
    }
}

/// The running test's name as a file-name part: the test harness names each test's thread
/// after the test (`module::test_name`); `::` becomes `.`, anything but ASCII letters, digits,
/// `_` and `.` becomes `_`, cut to 80 bytes. `scripts/test` reads it back from a leaked mount
/// point to name the test that leaked it. `unnamed` outside a named thread.
fn test_label() -> String {
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("unnamed").replace("::", ".");
    name.chars()
        .take(80)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Drop for TestMount {
    /// Unmounts, removes the mount point, and first the host's run directory of this
    /// platform (`rdt_host::runfile::sysroot_run_dir`: named classes, a killed run's journal
    /// or lock a test left), so that test runs leave nothing in `/run/rdt`.
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(rdt_host::runfile::sysroot_run_dir(&self.dir));
        if let Some(m) = self.mount.take()
            && let Err(e) = m.unmount()
        {
            eprintln!("rdt-sim: unmounting {}: {e}", self.dir.display());
        }
        // Only an empty directory goes: after a failed unmount it is still a mount point.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_label_is_the_running_tests_name() {
        // The harness names this thread `fs::testing::tests::the_label_is_...`.
        assert_eq!(
            super::test_label(),
            "fs.testing.tests.the_label_is_the_running_tests_name"
        );
        let other = std::thread::Builder::new()
            .name("a b/c::d\n".into())
            .spawn(super::test_label)
            .expect("spawn")
            .join()
            .expect("join");
        assert_eq!(other, "a_b_c.d_");
        let unnamed = std::thread::spawn(super::test_label).join().expect("join");
        assert_eq!(unnamed, "unnamed");
    }
}
