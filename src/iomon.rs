//! I/O RDT channel monitoring (pqos `--mon-channel`, `--mon-dev`; intel-cmt-cat v26.03
//! `lib/hw_monitoring.c` `hw_mon_start_channels`, `hw_mon_stop`, `hw_mon_reset`, read for
//! facts): a group holds one RMID, unused by every CPU and group in every L3 domain
//! ([`rdt_msr::MsrBackend::start_rmid_group`]), and each of its channels' RMID tagging
//! registers is set to it ([`IoRdtOps::set_channel_rmid`]); the L3 then counts the
//! channels' I/O occupancy and bandwidth under that RMID, read through IA32_QM_EVTSEL /
//! IA32_QM_CTR with the same arithmetic as a CPU group's ([`rdt_core::MonAccumulator`]).
//! Stopping the group tags its channels with RMID 0 again before the RMID is given back; a
//! monitoring reset (`-r`, [`Reset::Monitoring`]) does so for every channel that tags RMIDs,
//! which is also how the channels of a run killed before it stopped are freed (as pqos,
//! a channel whose tag is not RMID 0 is "already monitored" until then).
//!
//! Built on the MSR interface; the MMIO interface's monitoring (region counters) does not
//! take channel groups yet and refuses them, as does the OS interface (resctrl cannot reach
//! the links).

use rdt_core::{Backend, ChannelId, IoRdtOps, MonEvents, MonGroupId, RequestError, Reset, Rmid};

use crate::{Error, Inner, Rdt};

impl Rdt {
    /// [`Backend::start_channel_monitoring`] of the facade: starts monitoring `events` (LLC occupancy, local and total MBM) of the I/O RDT
    /// `channels` as one group: polled, read ([`Backend::values`]) and stopped
    /// ([`Backend::stop_monitoring`]) like any group. Every channel is checked before any
    /// register is written; a failed tagging puts the channels already tagged back on RMID 0
    /// and gives the RMID back.
    ///
    /// # Errors
    /// [`RequestError::EmptyGroup`] for no channel; [`RequestError::IoRdt`] without I/O RDT
    /// on this interface, for a channel the IRDT lacks, listed twice or whose link does not
    /// tag RMIDs; [`RequestError::AlreadyMonitored`] for a channel whose tag is not RMID 0
    /// (a group of this or another run); the errors of
    /// [`rdt_msr::MsrBackend::start_rmid_group`]; a register access.
    pub(crate) fn start_channels(
        &mut self,
        channels: &[ChannelId],
        events: MonEvents,
    ) -> Result<MonGroupId, Error> {
        if channels.is_empty() {
            return Err(RequestError::EmptyGroup.into());
        }
        let (Inner::Msr(msr), Some(io)) = (&mut self.backend, self.iordt.as_mut()) else {
            return Err(RequestError::IoRdt(
                "I/O RDT channel monitoring needs a platform with I/O RDT (an ACPI IRDT table) \
                 on the MSR interface (--iface=msr); this one has none or is opened otherwise"
                    .to_owned(),
            )
            .into());
        };
        let ops: &mut dyn IoRdtOps<Error> = io;
        let known = ops.io_channels();
        let mut taken = Vec::new();
        for (i, &ch) in channels.iter().enumerate() {
            let info = known.iter().find(|c| c.id == ch).ok_or_else(|| {
                RequestError::IoRdt(format!(
                    "channel {ch} is not in the ACPI IRDT table (`--print-io-devs` lists them)"
                ))
            })?;
            if channels[..i].contains(&ch) {
                return Err(RequestError::IoRdt(format!("channel {ch} is listed twice")).into());
            }
            if !info.rmid_tagging {
                return Err(RequestError::IoRdt(format!(
                    "channel {ch} does not support monitoring (its link does not tag RMIDs)"
                ))
                .into());
            }
        }
        for c in known.iter().filter(|c| c.rmid_tagging) {
            if let Some(r) = ops.channel_rmid(c.id)?.filter(|r| r.get() != 0) {
                if channels.contains(&c.id) {
                    return Err(RequestError::AlreadyMonitored {
                        what: format!("channel {}", c.id),
                        by: Some(format!("RMID {r}")),
                    }
                    .into());
                }
                taken.push(r.get());
            }
        }
        let (group, rmid) = msr.start_rmid_group(events, &taken)?;
        for (i, &ch) in channels.iter().enumerate() {
            if let Err(e) = ops.set_channel_rmid(ch, Rmid::new(rmid)) {
                for &done in &channels[..i] {
                    let _ = ops.set_channel_rmid(done, Rmid::new(0)); // best-effort rollback
                }
                let _ = msr.stop_monitoring(group);
                return Err(e);
            }
        }
        self.channel_groups.push((group, channels.to_vec()));
        Ok(group)
    }

    /// The channels of `group` when it is a channel group of this platform.
    #[must_use]
    pub fn group_channels(&self, group: MonGroupId) -> Option<&[ChannelId]> {
        self.channel_groups
            .iter()
            .find(|(g, _)| *g == group)
            .map(|(_, c)| c.as_slice())
    }

    /// Before a group stops: a channel group's channels back on RMID 0 (pqos `hw_mon_stop`).
    /// Every channel is attempted; the first error is returned.
    pub(crate) fn untag_group_channels(&mut self, group: MonGroupId) -> Result<(), Error> {
        let Some(i) = self.channel_groups.iter().position(|(g, _)| *g == group) else {
            return Ok(());
        };
        let (_, channels) = self.channel_groups.remove(i);
        self.untag(&channels)
    }

    /// Before a monitoring reset: every channel that tags RMIDs back on RMID 0 (pqos
    /// `hw_mon_reset` with I/O RDT), the channel groups forgotten.
    pub(crate) fn untag_every_channel(&mut self, what: Reset) -> Result<(), Error> {
        if !matches!(what, Reset::Monitoring(_)) {
            return Ok(());
        }
        self.channel_groups.clear();
        let Some(io) = self.io_rdt() else {
            return Ok(());
        };
        let all: Vec<ChannelId> = io
            .io_channels()
            .into_iter()
            .filter(|c| c.rmid_tagging)
            .map(|c| c.id)
            .collect();
        self.untag(&all)
    }

    /// The non-zero RMID tags of every channel that tags RMIDs (none without I/O RDT).
    pub(crate) fn channel_rmid_tags(&mut self) -> Result<Vec<u32>, Error> {
        let Some(io) = self.io_rdt() else {
            return Ok(Vec::new());
        };
        let mut tags = Vec::new();
        for c in io.io_channels().into_iter().filter(|c| c.rmid_tagging) {
            if let Some(r) = io.channel_rmid(c.id)?.filter(|r| r.get() != 0) {
                tags.push(r.get());
            }
        }
        Ok(tags)
    }

    fn untag(&mut self, channels: &[ChannelId]) -> Result<(), Error> {
        let Some(io) = self.io_rdt() else {
            return Ok(());
        };
        let mut first = Ok(());
        for &ch in channels {
            let r = io.set_channel_rmid(ch, Rmid::new(0));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}
