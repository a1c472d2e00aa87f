//! The mount options in force and the seam that changes them.
//!
//! CDP (`cdp`, `cdpl2`) and the MBA software controller (`mba_MBps`) are resctrl mount
//! options: the only way to change them is to unmount and mount again, which deletes every
//! group and resets every control register (spec §2.3). [`MountControl`] is that seam:
//! [`KernelMount`] reads `/proc/mounts` and calls `umount2(2)` + `mount(2)` as pqos does
//! (`lib/resctrl.c`); [`ControlFileMount`] asks a control file to do it (the simulated
//! platform's `.sim/resctrl_mount`).

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub use rdt_core::MountOptions;

/// Reads and changes how resctrl is mounted.
pub trait MountControl: fmt::Debug + Send {
    /// The options resctrl is mounted with, `None` when it is not mounted.
    ///
    /// # Errors
    /// The source of the information cannot be read.
    fn options(&self) -> io::Result<Option<MountOptions>>;

    /// Unmounts resctrl (if mounted) and mounts it again with `new`. Every group is gone
    /// afterwards and every control value is back to its default.
    ///
    /// # Errors
    /// EBUSY when the mount is in use (an open file under it), EINVAL when the platform
    /// cannot do an option, EPERM without CAP_SYS_ADMIN.
    fn remount(&self, new: &MountOptions) -> io::Result<()>;
}

impl<T: MountControl + ?Sized> MountControl for Box<T> {
    fn options(&self) -> io::Result<Option<MountOptions>> {
        (**self).options()
    }

    fn remount(&self, new: &MountOptions) -> io::Result<()> {
        (**self).remount(new)
    }
}

/// The resctrl entry for `root` in the text of `/proc/mounts`: its options, or `None` when
/// no `resctrl` filesystem is mounted there. Octal escapes of the mount point (`\040` for a
/// space) are decoded.
#[must_use]
pub fn parse_proc_mounts(text: &str, root: impl AsRef<Path>) -> Option<MountOptions> {
    let root = root.as_ref();
    let want = root.to_string_lossy();
    let want = want.trim_end_matches('/');
    text.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        let (_src, dir, fstype, opts) = (f.next()?, f.next()?, f.next()?, f.next()?);
        let dir = unescape(dir);
        (fstype == "resctrl" && dir.trim_end_matches('/') == want)
            .then(|| MountOptions::from_mount_entry(opts))
    })
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        // the kernel's `mangle` writes a byte as `\ooo`: the first digit is at most 3
        if b[i] == b'\\'
            && i + 3 < b.len()
            && (b'0'..=b'3').contains(&b[i + 1])
            && b[i + 2..=i + 3].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The host's resctrl mount: options from `/proc/mounts`, remount with `umount2(2)` and
/// `mount("resctrl", root, "resctrl", 0, options)` (pqos `resctrl_mount`).
#[derive(Clone, Debug)]
pub struct KernelMount {
    root: PathBuf,
    proc_mounts: PathBuf,
}

impl KernelMount {
    /// The mount at `root`, looked up in `proc_mounts` (normally `/proc/mounts`).
    #[must_use]
    pub fn new(root: impl Into<PathBuf>, proc_mounts: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            proc_mounts: proc_mounts.into(),
        }
    }
}

impl MountControl for KernelMount {
    fn options(&self) -> io::Result<Option<MountOptions>> {
        let text =
            rdt_host::file::read_text(&self.proc_mounts, rdt_host::file::MAX_KERNEL_TEXT_BYTES)?;
        Ok(parse_proc_mounts(&text, &self.root))
    }

    fn remount(&self, new: &MountOptions) -> io::Result<()> {
        use nix::mount::{MntFlags, MsFlags, mount, umount2};
        if self.options()?.is_some() {
            umount2(&self.root, MntFlags::empty()).map_err(io::Error::from)?;
        }
        let data = new.to_string();
        mount(
            Some("resctrl"),
            &self.root,
            Some("resctrl"),
            MsFlags::empty(),
            Some(data.as_str()),
        )
        .map_err(io::Error::from)
    }
}

/// A resctrl mount served by a control file: reading it gives the options as one line
/// (`cdp,mba_MBps`; an empty line for the defaults; `unmounted`), writing
/// `remount OPTS` remounts. The simulated platform serves one at `DIR/.sim/resctrl_mount`.
#[derive(Clone, Debug)]
pub struct ControlFileMount {
    path: PathBuf,
}

impl ControlFileMount {
    /// The control file at `path`.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }
}

impl MountControl for ControlFileMount {
    fn options(&self) -> io::Result<Option<MountOptions>> {
        let text = rdt_host::file::read_text(&self.path, rdt_host::file::MAX_KERNEL_TEXT_BYTES)?;
        let line = text.trim();
        if line == "unmounted" {
            return Ok(None);
        }
        Ok(Some(MountOptions::from_mount_entry(line)))
    }

    fn remount(&self, new: &MountOptions) -> io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).open(&self.path)?;
        let line = format!("remount {new}\n");
        let n = f.write(line.as_bytes())?;
        if n == line.len() {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::WriteZero, "short write"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_resctrl_entry_of_the_root_only() {
        let text = "sysfs /sys sysfs rw,nosuid 0 0\n\
                    resctrl /sys/fs/resctrl resctrl rw,relatime,cdp,mba_MBps 0 0\n\
                    resctrl /mnt/my\\040rdt resctrl rw,cdpl2 0 0\n";
        let o = parse_proc_mounts(text, Path::new("/sys/fs/resctrl/")).unwrap();
        assert_eq!(o.to_string(), "cdp,mba_MBps");
        let o = parse_proc_mounts(text, Path::new("/mnt/my rdt")).unwrap();
        assert!(o.cdpl2 && !o.cdp);
        assert_eq!(parse_proc_mounts(text, Path::new("/sys")), None);
    }

    #[test]
    fn a_fifo_or_device_as_proc_mounts_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("mounts");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = KernelMount::new("/sys/fs/resctrl", &fifo)
            .options()
            .unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = KernelMount::new("/sys/fs/resctrl", "/dev/zero")
            .options()
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }

    #[test]
    fn control_file_reads_options_and_writes_one_remount_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("resctrl_mount");
        let m = ControlFileMount::new(&p);
        std::fs::write(&p, "cdp,mba_MBps\n").unwrap();
        assert_eq!(
            m.options().unwrap(),
            Some(MountOptions {
                cdp: true,
                mba_mbps: true,
                ..MountOptions::default()
            })
        );
        std::fs::write(&p, "\n").unwrap();
        assert_eq!(m.options().unwrap(), Some(MountOptions::default()));
        std::fs::write(&p, "unmounted\n").unwrap();
        assert_eq!(m.options().unwrap(), None);
        m.remount(&"cdpl2".parse().unwrap()).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "remount cdpl2\n");
    }

    /// `\777` is not an escape the kernel writes (a byte is at most `\377`): kept as text,
    /// where it overflowed a byte (found by the fuzz test below).
    #[test]
    fn an_escape_above_a_byte_is_text_not_an_overflow() {
        let text = "resctrl /mnt/a\\777b resctrl rw 0 0\nresctrl /mnt/c\\101 resctrl rw,cdp 0 0\n";
        assert!(parse_proc_mounts(text, Path::new("/mnt/a\\777b")).is_some());
        assert!(parse_proc_mounts(text, Path::new("/mnt/cA")).is_some_and(|o| o.cdp));
    }

    /// Any `/proc/mounts` text gives the root's options or `None`, never a panic; any
    /// option list parses or is an error naming the option.
    #[test]
    fn fuzz_proc_mounts_and_mount_options_never_panic() {
        use proptest::prelude::*;
        use rdt_core::fake::fuzz::{fuzz, text};
        const WORDS: &[&str] = &[
            "resctrl",
            " ",
            "/sys/fs/resctrl",
            "\\040",
            "\\",
            "rw",
            ",",
            "cdp",
            "cdpl2",
            "mba_MBps",
            "debug",
            "=",
            "0",
            "\n",
            "\t",
        ];
        fuzz("parse_proc_mounts", text(WORDS, 20), |t| {
            let _ = parse_proc_mounts(&t, Path::new("/sys/fs/resctrl"));
            Ok(())
        });
        fuzz("MountOptions::from_str", text(WORDS, 10), |t| {
            if let Err(e) = t.parse::<MountOptions>() {
                let m = e.to_string();
                prop_assert!(
                    t.trim_end_matches('\n').split(',').any(|o| {
                        let name = o.split('=').next().unwrap_or(o);
                        (!name.is_empty() && m.contains(name)) || (!o.is_empty() && m.contains(o))
                    }),
                    "{m} for {t:?}"
                );
            }
            Ok(())
        });
    }
}
