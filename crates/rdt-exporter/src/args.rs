//! The command line: `rdt-exporter [--sysroot DIR] [--listen ADDR:PORT] [--iface auto|os|msr|mmio]
//! [--rescan-interval SECS] [--monitor-cores LIST]... [--monitor-pids LIST]...
//! [--max-connections N] [--header-timeout SECS]`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use rdt_pqos::{CpuSet, Iface, TaskId};

/// The default listen address: loopback only (a host's RDT data is not for the network
/// unless the operator says so), port 9479.
///
/// Port 9479: the Prometheus exporters' range 9100-9999 is fully allocated in the project's
/// "default port allocations" list; 9479 is not used by any exporter we know of, and
/// `--listen` changes it.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9479";

/// Serve Intel RDT / AMD PQoS telemetry (LLC occupancy, memory bandwidth, cache and
/// bandwidth allocation of every resctrl group) as OpenMetrics text at /metrics.
#[derive(Parser, Debug)]
#[command(name = "rdt-exporter", version)]
pub struct Args {
    /// The directory holding the platform's dev/cpu, sys/devices/system and sys/fs/resctrl
    /// (a mounted simulated platform, a container's view of the host); `/` when absent.
    #[arg(long, value_name = "DIR", env = "RDT_SYSROOT")]
    pub sysroot: Option<PathBuf>,

    /// Address and port to serve /metrics on.
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,

    /// The interface: `os` reads every resctrl group; `msr` only monitors the groups given
    /// with --monitor-cores; `mmio` (RDT 1.3) monitors them as `msr` does, their local
    /// traffic per memory region (`region` label); `auto` (pqos's rule) is `os` where
    /// resctrl is mounted.
    #[arg(long, value_name = "IFACE", default_value = "auto")]
    pub iface: Iface,

    /// Scan the resctrl groups again at least every SECS seconds (changes seen through
    /// inotify are picked up at the next scrape anyway).
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = parse_secs)]
    pub rescan_interval: Duration,

    /// A group of CPUs (kernel list form, `0-3,8`) this exporter monitors itself, on
    /// either interface; repeat for more groups. Released when the exporter exits.
    #[arg(long = "monitor-cores", value_name = "LIST")]
    pub monitor_cores: Vec<CpuSet>,

    /// A group of processes (`1234,5678`) this exporter monitors itself (OS interface
    /// only); repeat for more groups. Released when the exporter exits.
    #[arg(long = "monitor-pids", value_name = "LIST", value_parser = parse_pids)]
    pub monitor_pids: Vec<Vec<TaskId>>,

    /// Connections open at once, at most; lowered to a quarter of the descriptor limit
    /// (RLIMIT_NOFILE). At the cap, connections with no request in flight are closed.
    #[arg(long, value_name = "N", default_value = "256", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max_connections: u32,

    /// Seconds a connection may take to send a request's complete head, counted from its
    /// accept and from each response (so also the keep-alive idle timeout).
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_secs)]
    pub header_timeout: Duration,

    /// procfs to read tasks' cgroups from (tests).
    #[arg(long, value_name = "DIR", default_value = "/proc", hide = true)]
    pub proc_root: PathBuf,
}

fn parse_secs(s: &str) -> Result<Duration, String> {
    let n: u64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number of seconds"))?;
    if n == 0 {
        return Err("must be at least 1 second".into());
    }
    if n > 86_400 {
        return Err(format!("`{s}` seconds is more than a day"));
    }
    Ok(Duration::from_secs(n))
}

fn parse_pids(s: &str) -> Result<Vec<TaskId>, String> {
    let pids: Result<Vec<TaskId>, _> = s.split(',').map(|p| p.trim().parse()).collect();
    match pids {
        Ok(p) if !p.is_empty() => Ok(p),
        Ok(_) => Err("an empty process list".into()),
        Err(e) => Err(format!("`{s}`: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_is_well_formed_and_defaults_are_loopback_and_auto() {
        Args::command().debug_assert();
        let a = Args::try_parse_from(["rdt-exporter"]).unwrap();
        assert_eq!(a.listen.to_string(), DEFAULT_LISTEN);
        assert!(a.listen.ip().is_loopback());
        assert_eq!(a.iface, Iface::Auto);
        assert_eq!(a.rescan_interval, Duration::from_mins(1));
        assert_eq!(a.max_connections, 256);
        assert_eq!(a.header_timeout, Duration::from_secs(10));
    }

    #[test]
    fn groups_repeat_and_bad_values_are_refused() {
        let a = Args::try_parse_from([
            "rdt-exporter",
            "--monitor-cores",
            "0-3",
            "--monitor-cores",
            "8",
            "--monitor-pids",
            "1,2",
            "--iface",
            "msr",
            "--rescan-interval",
            "5",
        ])
        .unwrap();
        assert_eq!(a.monitor_cores.len(), 2);
        assert_eq!(a.monitor_pids, [vec![TaskId::new(1), TaskId::new(2)]]);
        assert_eq!(a.iface, Iface::Msr);
        assert_eq!(a.rescan_interval, Duration::from_secs(5));
        for bad in [
            &["--rescan-interval", "0"][..],
            &["--monitor-pids", "x"],
            &["--monitor-cores", "3-1"],
            &["--iface", "pci"],
            &["--listen", "localhost"],
            &["--max-connections", "0"],
            &["--max-connections", "-1"],
            &["--header-timeout", "0"],
            &["--header-timeout", "99999999999999999999"],
        ] {
            let argv = std::iter::once("rdt-exporter").chain(bad.iter().copied());
            assert!(Args::try_parse_from(argv).is_err(), "{bad:?}");
        }
    }
}
