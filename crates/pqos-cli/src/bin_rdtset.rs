//! `rdtset`: run a command in a class of service of its own, then give the class back
//! (intel-cmt-cat's rdtset; grammar in `pqos_cli::rdtset`, the class in the library's
//! `rdt_pqos::lease`).
//!
//! How the command gets into its class before it runs, without `fork` hooks: rdtset starts
//! itself again (`--exec-in-class N`, hidden) with the command; that process moves itself
//! into class N (OS interface: the transaction's task change), sets its CPU affinity (`-c`)
//! and then `exec`s the command, which so starts inside its class. rdtset forwards SIGINT,
//! SIGTERM and SIGHUP to the command, waits for it, gives the class back (unless `--keep`)
//! and exits with the command's exit status (128 + N for a command killed by signal N).
//!
//! Each class is a [`Lease`] with a record in the run directory: if rdtset is killed
//! (SIGKILL), the next open of the platform (any rdtset or pqos) gives the class back, and
//! moves the command, if it is still running, back to COS0. A command whose rdtset ended
//! before it entered its class does not run. `--keep` and `-p` keep the class on purpose:
//! its record goes, and `pqos -R` (or `-e`/`-a`) changes it as any other class.
//!
//! `-r CPULIST` (with `-p`, as intel-cmt-cat's rdtset) first puts those CPUs back in COS0.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use pqos_cli::rdtset::{ClassSpec, RdtsetArgs};
use rdt_pqos::lease::{self, Lease};
use rdt_pqos::transaction::{self, Change};
use rdt_pqos::{Backend, ClassId, Interface, OpenOptions, Rdt, TaskId};

fn main() -> ExitCode {
    let args: RdtsetArgs = match pqos_cli::parse_args() {
        Ok(a) => a,
        Err(code) => return code,
    };
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rdtset: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn open(args: &RdtsetArgs) -> Result<Rdt> {
    let mut opts = OpenOptions::new(args.iface().map_err(|e| anyhow!(e))?);
    if let Some(dir) = &args.sysroot {
        opts = opts.sysroot(dir);
    }
    // -p places processes (OS interface), except with -r alone, where it only names the
    // process whose CPUs are reset (rdtset's `-r CPULIST -p PID`).
    if !args.pid.is_empty() && !args.set.is_empty() {
        opts = opts.needs_os("-p/--pid");
    }
    let rdt = opts.open().context("opening the platform")?;
    for notice in rdt.notices() {
        // A class a killed rdtset leased, given back (the library's WARN record; rdtset
        // has no logger).
        if let rdt_pqos::Notice::Reclaimed(r) = notice {
            eprintln!("rdtset: {r}");
        }
    }
    Ok(rdt)
}

fn run(args: &RdtsetArgs) -> Result<ExitCode> {
    if let Some(class) = args.exec_in_class {
        return Err(exec_in_class(args, ClassId::new(class)));
    }
    if args.command.is_empty() && args.pid.is_empty() {
        bail!("nothing to run: give a command (rdtset -t ... CMD ARGS) or -p PIDLIST");
    }
    // From here on a stop signal is noted, not fatal: the class is given back first.
    let stop = [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ]
    .map(|sig| {
        let flag = Arc::new(AtomicBool::new(false));
        let _ = signal_hook::flag::register(sig, Arc::clone(&flag));
        (sig, flag)
    });
    if !args.pid.is_empty() && args.set.len() > 1 {
        bail!("-p places processes in one class: give one -t");
    }
    if args.set.is_empty() && args.reset.is_none() {
        bail!("no class: give -t FEATURES, e.g. -t 'l3=0xf;cpu=2-3'");
    }
    let mut rdt = open(args)?;
    if let Some(cpus) = &args.reset {
        // rdtset -r: the CPUs back in COS0, as one transaction, before anything else.
        let changes: Vec<Change> = cpus
            .iter()
            .map(|cpu| Change::cpu(cpu, ClassId::new(0)))
            .collect();
        transaction::run(&mut rdt, &changes)
            .map_err(|e| anyhow!(e))?
            .into_result()
            .map_err(|e| anyhow!(e))
            .with_context(|| format!("resetting the allocation of CPUs {cpus}"))?;
        if args.verbose {
            eprintln!("rdtset: CPUs `{cpus}` back in COS0");
        }
        if args.set.is_empty() {
            if args.command.is_empty() {
                return Ok(ExitCode::SUCCESS);
            }
            // rdtset -r CPUS -c CPUS CMD: the command with its affinity, in no class of
            // its own (COS0 is where it starts)
            let status = launch(args, ClassId::new(0), rdt.interface(), &stop)?;
            return Ok(exit_code(status));
        }
    }
    if rdt.interface() != Interface::Os && args.set.iter().any(|spec| spec.0.cpus.is_empty()) {
        bail!(
            "`-t` without cpu= needs the OS interface (-I): on the MSR interface a class \
             holds CPUs, not processes"
        );
    }
    if !args.pid.is_empty() {
        // rdtset -p: the processes join the class, which stays. A process that cannot be
        // placed gives the class back (the lease's drop) with the ones placed before it.
        let mut lease = take(&mut rdt, &args.set[0], args.verbose)?;
        let class = lease.class();
        for pid in args.pids() {
            lease
                .add_task(pid)
                .with_context(|| format!("placing process {pid} in COS{class}"))?;
        }
        lease
            .keep()
            .with_context(|| format!("keeping COS{class}"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let iface = rdt.interface();
    let status = with_leases(&mut rdt, &args.set, args, &mut Vec::new(), &mut |classes| {
        launch(args, classes[0], iface, &stop)
    })?;
    Ok(exit_code(status))
}

/// rdtset's exit code for the command's `status`: its own, or 128 + the signal that ended
/// it (as a shell reports it).
fn exit_code(status: ExitStatus) -> ExitCode {
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Takes a class for `spec` ([`Lease::take`]; its record makes the next open give it back
/// if rdtset is killed).
fn take<'a>(rdt: &'a mut Rdt, spec: &ClassSpec, verbose: bool) -> Result<Lease<'a, Rdt>> {
    let lease =
        Lease::take(rdt, &spec.0).map_err(|e| anyhow!(e).context("taking a class of service"))?;
    if verbose {
        eprintln!(
            "rdtset: took COS{} for CPUs `{}`",
            lease.class(),
            lease.cpus()
        );
    }
    Ok(lease)
}

/// Takes a class for each of `specs`, each lease from the previous one's backend, runs
/// `job` with the classes (in the order of `-t`), then gives them back, newest first, or
/// keeps them (`--keep`). A class that cannot be taken gives back those taken before it.
fn with_leases(
    rdt: &mut Rdt,
    specs: &[ClassSpec],
    args: &RdtsetArgs,
    classes: &mut Vec<ClassId>,
    job: &mut dyn FnMut(&[ClassId]) -> Result<ExitStatus>,
) -> Result<ExitStatus> {
    let Some((spec, rest)) = specs.split_first() else {
        return job(classes);
    };
    let mut lease = take(rdt, spec, args.verbose)?;
    let class = lease.class();
    classes.push(class);
    let status = with_leases(lease.backend_mut(), rest, args, classes, job);
    if args.keep {
        match lease.keep() {
            Ok(_) if args.verbose => eprintln!("rdtset: keeping COS{class}"),
            Ok(_) => {}
            Err(e) => eprintln!("rdtset: keeping COS{class}: {e:#}"),
        }
    } else {
        match lease.release() {
            Ok(()) if args.verbose => eprintln!("rdtset: gave COS{class} back"),
            Ok(()) => {}
            Err(e) => eprintln!("rdtset: giving COS{class} back: {e:#}"),
        }
    }
    status
}

/// Starts the command through `--exec-in-class`, forwarding stop signals, and waits. A
/// stop signal that came before the command started is passed on to it at once.
fn launch(
    args: &RdtsetArgs,
    class: ClassId,
    iface: Interface,
    stop: &[(i32, Arc<AtomicBool>); 3],
) -> Result<ExitStatus> {
    let me = std::env::current_exe().context("finding rdtset's own executable")?;
    let mut cmd = Command::new(me);
    cmd.arg("--exec-in-class").arg(class.get().to_string());
    cmd.arg("--iface").arg(match iface {
        Interface::Os => "os",
        Interface::Msr => "msr",
        Interface::Mmio => "mmio",
    });
    if let Some(cpus) = &args.cpu {
        cmd.arg("-c").arg(cpus.to_string());
    }
    if let Some(dir) = &args.sysroot {
        cmd.arg("--sysroot").arg(dir);
    }
    if args.sudo_keep {
        cmd.arg("-k");
    }
    cmd.arg("--").args(&args.command);
    let mut child = cmd.spawn().context("starting the command")?;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    loop {
        if let Some(status) = child.try_wait().context("waiting for the command")? {
            return Ok(status);
        }
        for (sig, flag) in stop {
            if flag.swap(false, Ordering::Relaxed)
                && let Ok(signal) = nix::sys::signal::Signal::try_from(*sig)
            {
                let _ = nix::sys::signal::kill(pid, signal);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The child side: into the class (OS interface), CPU affinity, then the command. Returns
/// only on failure.
fn exec_in_class(args: &RdtsetArgs, class: ClassId) -> anyhow::Error {
    let placed = (|| -> Result<()> {
        // COS0 (after `-r` without `-t`) is where the command starts: nothing to enter
        if class.get() != 0 && args.iface() == Ok(rdt_pqos::Iface::Os) {
            let mut rdt = open(args)?;
            let me = TaskId::new(std::process::id());
            let rdtset = std::os::unix::process::parent_id();
            let entered = transaction::with_writers(&mut rdt, |rdt| -> Result<()> {
                // Under the writers' lock, as the next open's reclaim: a class given back
                // because rdtset was killed before the command entered it stays free.
                if lease::held_by(rdt, class, rdtset) == Some(false) {
                    bail!(
                        "rdtset (process {rdtset}) no longer holds COS{class}: it ended \
                         before the command started"
                    );
                }
                transaction::run(rdt, &[Change::task(me, class)])
                    .map_err(|e| anyhow!(e))?
                    .into_result()
                    .map_err(|e| anyhow!(e))
                    .with_context(|| format!("entering COS{class}"))?;
                Ok(())
            });
            entered.map_err(|e| anyhow!(e))??;
        }
        if let Some(cpus) = &args.cpu {
            let mut set = nix::sched::CpuSet::new();
            for cpu in cpus.iter() {
                set.set(cpu.get() as usize)
                    .with_context(|| format!("CPU {cpu} is beyond what affinity can name"))?;
            }
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
                .with_context(|| format!("setting the CPU affinity to {cpus}"))?;
        }
        if !args.sudo_keep {
            drop_sudo()?;
        }
        Ok(())
    })();
    if let Err(e) = placed {
        return e;
    }
    let Some((program, rest)) = args.command.split_first() else {
        return anyhow!("no command to run");
    };
    let e = Command::new(program).args(rest).exec();
    anyhow!(e).context(format!("running `{program}`"))
}

/// Becomes the user who ran sudo, once the class is entered (rdtset.c `sudo_drop`): group
/// list and group first, then the user, so that nothing of root's stays.
fn drop_sudo() -> Result<()> {
    let ids = pqos_cli::rdtset::sudo_ids(|k| std::env::var(k).ok()).map_err(|e| anyhow!(e))?;
    let Some((uid, gid)) = ids else {
        return Ok(());
    };
    let gid = nix::unistd::Gid::from_raw(gid);
    nix::unistd::setgroups(&[gid]).context("dropping sudo's supplementary groups")?;
    nix::unistd::setgid(gid).with_context(|| format!("becoming group {gid} (SUDO_GID)"))?;
    nix::unistd::setuid(nix::unistd::Uid::from_raw(uid))
        .with_context(|| format!("becoming user {uid} (SUDO_UID)"))?;
    Ok(())
}
