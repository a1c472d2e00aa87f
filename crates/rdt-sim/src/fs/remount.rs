//! resctrl's place in the mount: `sys/fs/resctrl` can be mounted, unmounted and remounted
//! with other options while the simulated platform stays mounted, as `mount -t resctrl` and
//! `umount /sys/fs/resctrl` do on a host.
//!
//! This is the simulated side of a client's mount seam: a host tool remounts with
//! `umount2(2)` + `mount(2)`; against the simulated platform the same request is a line
//! written to `DIR/.sim/resctrl_mount`:
//!
//! ```text
//! remount OPTS    unmount if mounted, then mount with OPTS (`cdp,mba_MBps`; empty: defaults)
//! mount OPTS      mount; EBUSY when mounted
//! umount          unmount; EINVAL when not mounted
//! ```
//!
//! Options are validated before anything is unmounted: an option the platform cannot honour
//! (`cdp` without CDP, `mba_MBps` without MBM and linear MBA, an unknown option) fails the
//! write with EINVAL and leaves the current mount as it was; `.sim/status` then says why.
//! Reading the file gives the options in force as one line (`cdp,mba_MBps`, an empty line for
//! the defaults), or `unmounted`. Unmounting has the kernel's effects (every group gone,
//! control registers back to their defaults, CDP off).

use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::SimHandle;
use crate::resctrl::{MountOptions, Resctrl};
use crate::vfs::errno::{EBUSY, EINVAL, ENOENT};
use crate::vfs::{NodeKind, Tree, err};

/// What `sys/fs/resctrl` holds now.
struct Slot {
    platform: SimHandle,
    mounted: Option<(MountOptions, Resctrl)>,
}

/// The shared handle on resctrl's place: the filesystem's view and the control file both
/// hold one.
#[derive(Clone)]
pub(crate) struct ResctrlSlot(Arc<Mutex<Slot>>);

impl std::fmt::Debug for ResctrlSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResctrlSlot")
            .field("options", &self.options())
            .finish_non_exhaustive()
    }
}

impl ResctrlSlot {
    /// resctrl's place on `platform`, mounted with `options` or empty.
    pub(crate) fn new(platform: SimHandle, options: Option<&MountOptions>) -> io::Result<Self> {
        let slot = Self(Arc::new(Mutex::new(Slot {
            platform,
            mounted: None,
        })));
        if let Some(o) = options {
            slot.mount(*o)?;
        }
        Ok(slot)
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The options in force, `None` when unmounted.
    pub(crate) fn options(&self) -> Option<MountOptions> {
        self.lock().mounted.as_ref().map(|(o, _)| *o)
    }

    /// Checks `options` against the platform (`InvalidInput` naming the option).
    fn validate(slot: &Slot, options: MountOptions) -> io::Result<()> {
        let caps = slot.platform.lock().capabilities().clone();
        options
            .check(&caps, false)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    }

    /// Mounts resctrl. `EBUSY` when mounted; `InvalidInput` for options the platform cannot
    /// honour.
    pub(crate) fn mount(&self, options: MountOptions) -> io::Result<()> {
        let mut slot = self.lock();
        if slot.mounted.is_some() {
            return Err(err(EBUSY));
        }
        Self::validate(&slot, options)?;
        let fs = Resctrl::mount(slot.platform.clone(), &options)?;
        slot.mounted = Some((options, fs));
        Ok(())
    }

    /// Unmounts resctrl (the kernel's teardown). `EINVAL` when not mounted.
    pub(crate) fn umount(&self) -> io::Result<()> {
        let old = self.lock().mounted.take().ok_or_else(|| err(EINVAL))?;
        drop(old); // Resctrl's drop is the teardown
        Ok(())
    }

    /// Validates `options`, then unmounts (if mounted) and mounts with them.
    pub(crate) fn remount(&self, options: MountOptions) -> io::Result<()> {
        let mut slot = self.lock();
        Self::validate(&slot, options)?;
        drop(slot.mounted.take());
        let fs = Resctrl::mount(slot.platform.clone(), &options)?;
        slot.mounted = Some((options, fs));
        Ok(())
    }

    /// Runs `f` on the mounted resctrl, or on an empty directory when unmounted.
    pub(crate) fn with_tree<T>(
        &self,
        f: impl FnOnce(&mut dyn Tree) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut slot = self.lock();
        match slot.mounted.as_mut() {
            Some((_, fs)) => f(fs),
            None => f(&mut EmptyDir),
        }
    }

    /// The mounted resctrl's state ([`Resctrl::state`]), `None` when unmounted.
    pub(crate) fn state(&self) -> Option<crate::resctrl::ResctrlState> {
        self.lock().mounted.as_ref().map(|(_, fs)| fs.state())
    }

    /// Mounts resctrl again from a parked state ([`Resctrl::restore`]). `EBUSY` when
    /// mounted.
    pub(crate) fn restore(&self, state: &crate::resctrl::ResctrlState) -> io::Result<()> {
        let mut slot = self.lock();
        if slot.mounted.is_some() {
            return Err(err(EBUSY));
        }
        let fs = Resctrl::restore(slot.platform.clone(), state)?;
        slot.mounted = Some((*fs.options(), fs));
        Ok(())
    }

    /// Takes the mount out without the unmount's effects ([`Resctrl::park`]).
    pub(crate) fn park(&self) -> Option<crate::resctrl::ResctrlState> {
        let taken = self.lock().mounted.take();
        taken.map(|(_, fs)| fs.park())
    }

    /// The text of `.sim/resctrl_mount`.
    pub(crate) fn describe(&self) -> String {
        match self.options() {
            Some(o) => format!("{o}\n"),
            None => "unmounted\n".into(),
        }
    }

    /// Carries out one command written to `.sim/resctrl_mount` (grammar in the module docs);
    /// `Err((errno, message))` for `.sim/status`.
    pub(crate) fn command(&self, text: &str) -> Result<(), (i32, String)> {
        let line = text.trim_end_matches('\n');
        let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
        let parse = |s: &str| {
            s.trim()
                .parse::<MountOptions>()
                .map_err(|e| (EINVAL, format!("{line}: {e}")))
        };
        let io = |e: io::Error| {
            let errno = e.raw_os_error().unwrap_or(EINVAL);
            (errno, format!("{line}: {e}"))
        };
        match verb {
            "remount" => self.remount(parse(rest)?).map_err(io),
            "mount" => self.mount(parse(rest)?).map_err(io),
            "umount" if rest.trim().is_empty() => self.umount().map_err(io),
            _ => Err((
                EINVAL,
                format!("{line}: expected `remount OPTS`, `mount OPTS` or `umount`"),
            )),
        }
    }
}

/// The view at `sys/fs/resctrl`: the mounted resctrl, or an empty directory.
#[derive(Debug)]
pub(crate) struct ResctrlView(pub(crate) ResctrlSlot);

impl ResctrlView {
    fn with<T>(&self, f: impl FnOnce(&mut dyn Tree) -> io::Result<T>) -> io::Result<T> {
        self.0.with_tree(f)
    }
}

impl Tree for ResctrlView {
    fn kind(&self, path: &str) -> io::Result<NodeKind> {
        self.with(|t| t.kind(path))
    }
    fn list(&self, path: &str) -> io::Result<Vec<(String, NodeKind)>> {
        self.with(|t| t.list(path))
    }
    fn read(&mut self, path: &str, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        self.with(|t| t.read(path, offset, size))
    }
    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> io::Result<usize> {
        self.with(|t| t.write(path, offset, data))
    }
    fn write_by(
        &mut self,
        path: &str,
        offset: u64,
        data: &[u8],
        writer: Option<u32>,
    ) -> io::Result<usize> {
        self.with(|t| t.write_by(path, offset, data, writer))
    }
    fn mkdir(&mut self, path: &str) -> io::Result<()> {
        self.with(|t| t.mkdir(path))
    }
    fn rmdir(&mut self, path: &str) -> io::Result<()> {
        self.with(|t| t.rmdir(path))
    }
    fn rename(&mut self, from: &str, to: &str) -> io::Result<()> {
        self.with(|t| t.rename(from, to))
    }
}

/// An empty directory (`sys/fs/resctrl` where resctrl is not mounted).
#[derive(Debug)]
struct EmptyDir;

impl Tree for EmptyDir {
    fn kind(&self, path: &str) -> io::Result<NodeKind> {
        if path.is_empty() {
            Ok(NodeKind::Dir)
        } else {
            Err(err(ENOENT))
        }
    }

    fn list(&self, path: &str) -> io::Result<Vec<(String, NodeKind)>> {
        self.kind(path).map(|_| Vec::new())
    }

    fn read(&mut self, _path: &str, _offset: u64, _size: u32) -> io::Result<Vec<u8>> {
        Err(err(ENOENT))
    }

    fn write(&mut self, _path: &str, _offset: u64, _data: &[u8]) -> io::Result<usize> {
        Err(err(ENOENT))
    }
}
