//! `rdt-agent nri`: the NRI plugin (`rdt_nri`): makes the node's classes from `--config`
//! as one transaction (again on SIGHUP), then lives beside the runtime
//! ([`rdt_nri::Lifecycle`]: connects, registers, puts every container in its class, and
//! connects again after every loss of the runtime) until SIGTERM or SIGINT.
//! `rdt-agent nri --check [--live]` is the DaemonSet's probe ([`rdt_nri::ready`]). This
//! file only turns flags into the library's options.
//!
//! Exit status: 0 stopped by SIGTERM or SIGINT (or `--check`: ready, live); 1 `--check`:
//! not ready, not live; 2 a configuration error (flags, the class file, an option naming
//! a class the file lacks, a plugin name or index NRI refuses); 3 a platform error at start
//! (resctrl cannot be opened, the classes cannot be made, the run directory cannot be
//! written); 4 the runtime refused the registration 5 times in a row.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use rdt_nri::ready::{Probe, StateFile};
use rdt_nri::{
    Lifecycle, NodeSession, NriError, OnUnknown, Options, Plugin, Qos, Registration, Reload,
    ResctrlPlacer,
};
use rdt_pqos::config::ConfigFile;
use rdt_pqos::config::goresctrl::GroupOptions;
use rdt_pqos::proc::ProcFs;
use rdt_pqos::{Iface, OpenOptions};

/// Exit status of a configuration error.
const EXIT_CONFIG: u8 = 2;
/// Exit status of a platform error at start.
const EXIT_PLATFORM: u8 = 3;
/// Exit status of registrations refused by the runtime.
const EXIT_REFUSED: u8 = 4;

/// `rdt-agent nri`: an NRI plugin that puts each container in its RDT class.
#[derive(Debug, Parser)]
#[command(name = "rdt-agent nri", bin_name = "rdt-agent nri", version)]
struct NriArgs {
    /// The node's classes: named classes (TOML) or goresctrl's YAML, made as one
    /// transaction at start.
    #[arg(long, value_name = "FILE", required_unless_present = "check")]
    config: Option<PathBuf>,
    /// The runtime's NRI socket (waited for while it is not there).
    #[arg(long, value_name = "PATH", default_value = rdt_nri::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Interface: auto, msr or os (the plugin's containers join resctrl groups: os).
    #[arg(long, value_name = "IFACE", default_value = "os")]
    iface: Iface,
    /// Host root holding sys/fs/resctrl, sys/devices/system/cpu, dev/cpu.
    #[arg(long, value_name = "DIR", env = "RDT_SYSROOT")]
    sysroot: Option<PathBuf>,
    /// Where the cgroup (v2) hierarchy is mounted: a container found outside its class
    /// has the processes of its cgroup moved into it.
    #[arg(long, value_name = "DIR", default_value = rdt_nri::CGROUP_ROOT)]
    cgroup_root: PathBuf,
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
    /// Each pod gets a monitor group of its own in its class's group,
    /// `<group>/mon_groups/<pod-uid>`, holding its containers' tasks (made and removed by
    /// the plugin; recorded in the run directory's nri-pods.json).
    #[arg(long)]
    monitoring: bool,
    /// The plugin's name in the runtime (`[a-zA-Z0-9_.+-]+`).
    #[arg(long, value_name = "NAME", default_value = "rdt")]
    plugin_name: String,
    /// The plugin's index (two digits): plugins are called in ascending order.
    #[arg(long, value_name = "NN", default_value = "10")]
    plugin_index: String,
    /// Probe the running plugin of this name (and --sysroot) and exit: 0 when it is
    /// registered with the runtime (readiness), 1 when not.
    #[arg(long)]
    check: bool,
    /// With --check: 0 when the plugin lives and its loop is not stuck, registered or not
    /// (liveness).
    #[arg(long, requires = "check")]
    live: bool,
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

/// A failure, with the exit status it means.
struct Failure {
    code: u8,
    error: anyhow::Error,
}

fn fail<E: Into<anyhow::Error>>(code: u8) -> impl FnOnce(E) -> Failure {
    move |e| Failure {
        code,
        error: e.into(),
    }
}

/// Runs `rdt-agent nri` with the arguments after `nri`.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args = match NriArgs::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_CONFIG } else { 0 });
        }
    };
    if log::set_logger(&Stderr).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
    if args.check {
        let probe = if args.live { Probe::Live } else { Probe::Ready };
        return match rdt_nri::ready::check(&run_dir(&args), &args.plugin_name, probe) {
            Ok(state) => {
                println!("{state}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("rdt-agent nri --check: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}

/// The run directory of the platform the flags name (where the state file is).
fn run_dir(args: &NriArgs) -> PathBuf {
    match &args.sysroot {
        Some(root) => rdt_pqos::runfile::sysroot_run_dir(root),
        None => PathBuf::from(rdt_pqos::runfile::HOST_RUN_DIR),
    }
}

/// Whether NRI takes `name` as a plugin name (`[a-zA-Z0-9_.+-]+`, NRI
/// `pkg/adaptation/plugin.go`) and `index` as an index (two digits).
fn check_registration(name: &str, index: &str) -> Result<(), String> {
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.+-".contains(&b));
    if !name_ok {
        return Err(format!(
            "--plugin-name {name:?}: a plugin name is [a-zA-Z0-9_.+-]+"
        ));
    }
    if index.len() != 2 || !index.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("--plugin-index {index:?}: two digits"));
    }
    Ok(())
}

fn run(args: &NriArgs) -> Result<(), Failure> {
    let Some(config) = &args.config else {
        return Err(fail(EXIT_CONFIG)(anyhow::anyhow!(
            "--config FILE is required"
        )));
    };
    check_registration(&args.plugin_name, &args.plugin_index)
        .map_err(|e| fail(EXIT_CONFIG)(anyhow::anyhow!(e)))?;
    let stop = Arc::new(AtomicBool::new(false));
    let hup = Arc::new(AtomicBool::new(false));
    for (sig, flag) in [
        (signal_hook::consts::SIGTERM, &stop),
        (signal_hook::consts::SIGINT, &stop),
        (signal_hook::consts::SIGHUP, &hup),
    ] {
        signal_hook::flag::register(sig, Arc::clone(flag))
            .map_err(|e| fail(EXIT_PLATFORM)(anyhow::Error::new(e).context("handling signals")))?;
    }
    let file = ConfigFile::load(config).map_err(fail(EXIT_CONFIG))?;
    if matches!(file, ConfigFile::Classes(_)) && !args.group_prefix.is_empty() {
        return Err(fail(EXIT_CONFIG)(anyhow::anyhow!(
            "--group-prefix is goresctrl's: {} names its groups itself",
            config.display()
        )));
    }
    let groups = GroupOptions {
        prefix: args.group_prefix.clone(),
        prune: false,
    };
    let mut opts = OpenOptions::new(args.iface);
    if let Some(root) = &args.sysroot {
        opts = opts.sysroot(root);
    }
    let mut rdt = opts
        .open()
        .map_err(|e| fail(EXIT_PLATFORM)(anyhow::Error::new(e).context("opening the platform")))?;
    let applied =
        rdt_nri::apply_classes(&mut rdt, &file, &groups, &ProcFs::host()).map_err(|e| {
            let code = if matches!(e, rdt_nri::ClassesError::Config(_)) {
                EXIT_CONFIG
            } else {
                EXIT_PLATFORM
            };
            fail(code)(
                anyhow::Error::new(e)
                    .context(format!("making the classes of {}", config.display())),
            )
        })?;
    eprintln!(
        "rdt-agent nri: classes {} ({} write(s))",
        rdt_nri::class_list(&applied.classes),
        applied.writes
    );
    let options = Options {
        qos: args.qos_class.iter().cloned().collect(),
        default: args.default_class.clone(),
        on_unknown: args.on_unknown,
        monitoring: args.monitoring,
    };
    let plugin = Plugin::new(applied.classes, options).map_err(fail(EXIT_CONFIG))?;
    let state = StateFile::create(&run_dir(args), &args.plugin_name).map_err(|e| {
        fail(EXIT_PLATFORM)(anyhow::Error::new(e).context("writing the state file"))
    })?;
    let placer = ResctrlPlacer {
        backend: rdt,
        proc: ProcFs::host(),
        cgroup_root: args.cgroup_root.clone(),
    };
    let mut session = NodeSession::new(plugin, placer)
        .with_reload(Reload {
            flag: hup,
            config: config.clone(),
            groups,
        })
        .with_state_file(state)
        .with_pod_record(run_dir(args));
    let registration = Registration {
        name: args.plugin_name.clone(),
        index: args.plugin_index.clone(),
    };
    let ran = Lifecycle::new(&args.socket, registration).run(&stop, &mut session);
    session.finish();
    match ran {
        Ok(()) => {
            eprintln!("rdt-agent nri: stopped");
            Ok(())
        }
        Err(e @ NriError::Registration { .. }) => Err(fail(EXIT_REFUSED)(e)),
        Err(e) => Err(fail(EXIT_PLATFORM)(e)),
    }
}
