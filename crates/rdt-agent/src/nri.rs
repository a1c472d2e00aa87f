//! `rdt-agent nri`: the NRI plugin (`rdt_nri`): makes the node's classes from `--config`
//! as one transaction (again on SIGHUP), registers on the runtime's NRI socket and puts
//! every container in its class until the runtime closes the connection. This file only turns flags into the
//! library's options.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use rdt_nri::{OnUnknown, Options, Plugin, Qos, Registration};
use rdt_pqos::config::ConfigFile;
use rdt_pqos::config::goresctrl::GroupOptions;
use rdt_pqos::proc::ProcFs;
use rdt_pqos::{Iface, OpenOptions, Rdt};

/// `rdt-agent nri`: an NRI plugin that puts each container in its RDT class.
#[derive(Debug, Parser)]
#[command(name = "rdt-agent nri", bin_name = "rdt-agent nri", version)]
struct NriArgs {
    /// The node's classes: named classes (TOML) or goresctrl's YAML, made as one
    /// transaction at start.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The runtime's NRI socket.
    #[arg(long, value_name = "PATH", default_value = rdt_nri::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Interface: auto, msr or os (the plugin's containers join resctrl groups: os).
    #[arg(long, value_name = "IFACE", default_value = "os")]
    iface: Iface,
    /// Host root holding sys/fs/resctrl, sys/devices/system/cpu, dev/cpu.
    #[arg(long, value_name = "DIR", env = "RDT_SYSROOT")]
    sysroot: Option<PathBuf>,
    /// goresctrl's group prefix: class `gold` is group PREFIX`gold` (YAML only).
    #[arg(long, value_name = "PREFIX", default_value = "")]
    group_prefix: String,
    /// The class of a QoS class: `guaranteed=NAME`, `burstable=NAME`, `besteffort=NAME`
    /// (repeatable).
    #[arg(long, value_name = "QOS=CLASS", value_parser = parse_qos)]
    qos_class: Vec<(Qos, String)>,
    /// The class of a container nothing else places (none: it stays in the root group).
    #[arg(long, value_name = "CLASS")]
    default_class: Option<String>,
    /// A class annotation naming a class the node lacks: fail the container's creation,
    /// or place it as if it had no annotation.
    #[arg(long, value_name = "WHAT", default_value = "fail", value_parser = parse_on_unknown)]
    on_unknown: OnUnknown,
    /// Each container gets a monitoring group of its own in its class (runc names it
    /// after the container id).
    #[arg(long)]
    monitoring: bool,
    /// The plugin's name in the runtime.
    #[arg(long, value_name = "NAME", default_value = "rdt")]
    plugin_name: String,
    /// The plugin's index (two digits): plugins are called in ascending order.
    #[arg(long, value_name = "NN", default_value = "10")]
    plugin_index: String,
}

fn parse_qos(s: &str) -> Result<(Qos, String), String> {
    let (q, class) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected QOS=CLASS"))?;
    let qos = match q.to_ascii_lowercase().as_str() {
        "guaranteed" => Qos::Guaranteed,
        "burstable" => Qos::Burstable,
        "besteffort" => Qos::BestEffort,
        _ => {
            return Err(format!(
                "`{q}`: not a QoS class (guaranteed, burstable, besteffort)"
            ));
        }
    };
    Ok((qos, class.to_owned()))
}

fn parse_on_unknown(s: &str) -> Result<OnUnknown, String> {
    match s {
        "fail" => Ok(OnUnknown::Fail),
        "default" => Ok(OnUnknown::Default),
        _ => Err(format!("`{s}`: expected fail or default")),
    }
}

/// Prints the library's records on stderr (info and above).
struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Info
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("rdt-agent nri: {}: {}", r.level(), r.args());
        }
    }
    fn flush(&self) {}
}

/// Runs `rdt-agent nri` with the arguments after `nri`.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args = NriArgs::parse_from(args);
    if log::set_logger(&Stderr).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &NriArgs) -> Result<()> {
    let file = ConfigFile::load(&args.config)?;
    if matches!(file, ConfigFile::Classes(_)) && !args.group_prefix.is_empty() {
        bail!(
            "--group-prefix is goresctrl's: {} names its groups itself",
            args.config.display()
        );
    }
    let groups = GroupOptions {
        prefix: args.group_prefix.clone(),
        prune: false,
    };
    let mut opts = OpenOptions::new(args.iface);
    if let Some(root) = &args.sysroot {
        opts = opts.sysroot(root);
    }
    let mut rdt = opts.open().context("opening the platform")?;
    let applied = rdt_nri::apply_classes(&mut rdt, &file, &groups, &ProcFs::host())
        .with_context(|| format!("making the classes of {}", args.config.display()))?;
    eprintln!(
        "rdt-agent nri: classes {} ({} write(s))",
        names(&applied.classes),
        applied.writes
    );
    let options = Options {
        qos: args.qos_class.iter().cloned().collect(),
        default: args.default_class.clone(),
        on_unknown: args.on_unknown,
        monitoring: args.monitoring,
    };
    let plugin = Arc::new(Mutex::new(Plugin::new(applied.classes, options)?));
    // SIGHUP: the configuration again, as one transaction, then its classes
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&hup))
        .context("handling SIGHUP")?;
    {
        let plugin = Arc::clone(&plugin);
        let config = args.config.clone();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(100));
                if hup.swap(false, Ordering::Relaxed)
                    && let Err(e) = reload(&mut rdt, &config, &groups, &plugin)
                {
                    eprintln!("rdt-agent nri: reload failed, the classes stay: {e:#}");
                }
            }
        });
    }
    let stream = UnixStream::connect(&args.socket)
        .with_context(|| format!("connecting to the NRI socket {}", args.socket.display()))?;
    let registration = Registration {
        name: args.plugin_name.clone(),
        index: args.plugin_index.clone(),
    };
    rdt_nri::serve(stream, &registration, |method, payload| {
        plugin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .handle(method, payload)
    })?;
    eprintln!("rdt-agent nri: the runtime closed the connection");
    Ok(())
}

/// Makes the classes of `config` (read again) and gives them to the plugin.
fn reload(
    rdt: &mut Rdt,
    config: &Path,
    groups: &GroupOptions,
    plugin: &Mutex<Plugin>,
) -> Result<()> {
    let file = ConfigFile::load(config)?;
    let applied = rdt_nri::apply_classes(rdt, &file, groups, &ProcFs::host())
        .with_context(|| format!("making the classes of {}", config.display()))?;
    eprintln!(
        "rdt-agent nri: reloaded: classes {} ({} write(s))",
        names(&applied.classes),
        applied.writes
    );
    plugin
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .set_classes(applied.classes)?;
    Ok(())
}

/// `name=group` of each class, space-separated.
fn names(classes: &[rdt_nri::Class]) -> String {
    let names: Vec<String> = classes
        .iter()
        .map(|c| format!("{}={}", c.name, c.group.as_deref().unwrap_or("(root)")))
        .collect();
    names.join(" ")
}
