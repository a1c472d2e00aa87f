//! The controller stops when its [`Stopper`] is stopped, whatever it is doing: during its
//! start-up (before it makes its classes, after it started monitoring), during a step
//! (the decisions of that interval not made yet are not made) and while it waits for the
//! next interval. On the fake backend, the stop asked from inside a backend call (as a
//! signal arriving then would) by a wrapper.

use std::time::{Duration, Instant};

use rdt_config::policy::Policy;
use rdt_control::{Agent, AgentError, RunOptions, Stopper};
use rdt_core::fake::FakeBackend;
use rdt_core::{
    Backend, CacheDomain, CatClass, CatResource, ClassId, CpuSet, GroupStartError, Interface,
    LogicalCpu, MbaClass, MbaResource, MonEvents, MonGroupId, MonValues, NamedClasses, Reset, Rmid,
    Writers,
};
use rdt_host::proc::ProcFs;

/// Contended from the first interval (an IPC target no CPU of the fake reaches): the
/// controller acts every interval it may.
fn policy(interval_ms: u32) -> Policy {
    let text = format!(
        "interval_ms = {interval_ms}\ncontended_below = 1.0\n\
         [[protected]]\nname = \"p\"\ncpus = \"0-3\"\ntarget = {{ ipc = 60 }}\n\
         [[best_effort]]\nname = \"b\"\ncpus = \"4-7\"\nmin_ways = 1\n"
    );
    Policy::parse_toml(&text, "p.toml").expect("policy")
}

/// Where the wrapper asks for the stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    Never,
    /// The first read of the classes' masks, limits or CPUs (the start-up's plan reads
    /// them).
    FirstRead,
    /// When monitoring has started.
    MonitoringStarted,
    /// The first poll of the counters (inside the first step).
    FirstPoll,
}

/// The fake backend, stopping `stopper` at `at`.
struct Stopping {
    inner: FakeBackend,
    stopper: Stopper,
    at: At,
}

impl Stopping {
    fn hit(&self, here: At) {
        if self.at == here {
            self.stopper.stop();
        }
    }
}

impl Backend for Stopping {
    type Error = <FakeBackend as Backend>::Error;

    fn interface(&self) -> Interface {
        self.inner.interface()
    }
    fn capabilities(&self) -> &rdt_core::Capabilities {
        self.inner.capabilities()
    }
    fn topology(&self) -> &rdt_core::Topology {
        self.inner.topology()
    }
    fn cat_classes_in(
        &mut self,
        resource: CatResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<CatClass>>, Self::Error> {
        self.hit(At::FirstRead);
        self.inner.cat_classes_in(resource, domains)
    }
    fn set_cat_masks(
        &mut self,
        resource: CatResource,
        masks: &[(CacheDomain, CatClass)],
    ) -> Result<(), Self::Error> {
        self.inner.set_cat_masks(resource, masks)
    }
    fn bandwidth_classes_in(
        &mut self,
        resource: MbaResource,
        domains: &[CacheDomain],
    ) -> Result<Vec<Vec<MbaClass>>, Self::Error> {
        self.hit(At::FirstRead);
        self.inner.bandwidth_classes_in(resource, domains)
    }
    fn set_bandwidth_limits(
        &mut self,
        resource: MbaResource,
        limits: &[(CacheDomain, MbaClass)],
    ) -> Result<Vec<(CacheDomain, MbaClass)>, Self::Error> {
        self.inner.set_bandwidth_limits(resource, limits)
    }
    #[allow(clippy::type_complexity)] // the trait's
    fn associations_in(
        &mut self,
        cpus: &CpuSet,
    ) -> Result<Vec<(LogicalCpu, Result<(ClassId, Option<Rmid>), Self::Error>)>, Self::Error> {
        self.hit(At::FirstRead);
        self.inner.associations_in(cpus)
    }
    fn associate_cpus(&mut self, cpus: &CpuSet, class: ClassId) -> Result<(), Self::Error> {
        self.inner.associate_cpus(cpus, class)
    }
    fn reset(&mut self, what: &Reset) -> Result<(), Self::Error> {
        self.inner.reset(what)
    }
    fn start_monitoring_many(
        &mut self,
        groups: &[(CpuSet, MonEvents)],
    ) -> Result<Vec<MonGroupId>, GroupStartError<Self::Error>> {
        let started = self.inner.start_monitoring_many(groups);
        self.hit(At::MonitoringStarted);
        started
    }
    fn poll(&mut self) -> Result<(), Self::Error> {
        self.hit(At::FirstPoll);
        self.at = At::Never;
        self.inner.poll()
    }
    fn values(&self, group: MonGroupId) -> Option<&MonValues> {
        self.inner.values(group)
    }
    fn stop_monitoring(&mut self, group: MonGroupId) -> Result<(), Self::Error> {
        self.inner.stop_monitoring(group)
    }
    fn writers(&mut self) -> Option<&mut dyn Writers<Self::Error>> {
        self.inner.writers()
    }
    fn names(&mut self) -> Option<&mut dyn NamedClasses<Self::Error>> {
        self.inner.names()
    }
}

fn platform(at: At) -> (Stopping, Stopper) {
    let stopper = Stopper::new();
    let b = Stopping {
        inner: FakeBackend::intel_1s(),
        stopper: stopper.clone(),
        at,
    };
    (b, stopper)
}

#[test]
fn a_stop_during_start_up_ends_it_before_the_next_step() {
    // before it makes its classes: nothing is written
    let (mut b, stopper) = platform(At::FirstRead);
    let e = Agent::start_stoppable(&mut b, policy(100), &ProcFs::host(), false, &stopper)
        .expect_err("stopped");
    assert!(matches!(e, AgentError::Stopped), "{e}");
    assert!(b.inner.writes.is_empty(), "{:?}", b.inner.writes);
    assert_eq!(b.inner.running_groups(), 0);
    // once monitoring started: the groups go again
    let (mut b, stopper) = platform(At::MonitoringStarted);
    let e = Agent::start_stoppable(&mut b, policy(100), &ProcFs::host(), false, &stopper)
        .expect_err("stopped");
    assert!(matches!(e, AgentError::Stopped), "{e}");
    assert_eq!(b.inner.running_groups(), 0, "{:?}", b.inner.writes);
    // not stopped: it starts, and runs
    let (mut b, stopper) = platform(At::Never);
    let agent = Agent::start_stoppable(&mut b, policy(100), &ProcFs::host(), false, &stopper)
        .expect("start");
    assert_eq!(b.inner.running_groups(), 2);
    agent.stop(&mut b).expect("stop");
}

#[test]
fn a_stop_during_a_step_ends_the_run_after_it_without_its_decisions() {
    // the reference: the same run not stopped squeezes the best-effort class at once
    let (mut b, stopper) = platform(At::Never);
    let mut agent = Agent::start_stoppable(&mut b, policy(100), &ProcFs::host(), false, &stopper)
        .expect("start");
    let writes = b.inner.writes.len();
    let mut events = 0;
    let opts = RunOptions {
        duration: Some(Duration::from_millis(100)),
        advance: Some(|b: &mut Stopping, dt| b.inner.advance(dt)),
    };
    let t = agent
        .run(&mut b, &opts, |tick| {
            events += tick.events.len();
            Ok(())
        })
        .expect("run");
    assert_eq!(t, Duration::from_millis(100));
    assert_eq!(events, 1, "one squeeze");
    assert!(b.inner.writes.len() > writes, "made");
    agent.stop(&mut b).expect("stop");

    // stopped during the first step's poll: that step decides, makes nothing, and the run
    // ends there (not at its 60 s)
    let (mut b, stopper) = platform(At::FirstPoll);
    let mut agent = Agent::start_stoppable(&mut b, policy(100), &ProcFs::host(), false, &stopper)
        .expect("start");
    let writes = b.inner.writes.clone();
    let mut ticks = 0;
    let opts = RunOptions {
        duration: Some(Duration::from_mins(1)),
        advance: Some(|b: &mut Stopping, dt| b.inner.advance(dt)),
    };
    let t = agent
        .run(&mut b, &opts, |tick| {
            ticks += 1;
            assert!(tick.events.is_empty(), "{:?}", tick.events);
            Ok(())
        })
        .expect("run");
    assert_eq!((t, ticks), (Duration::from_millis(100), 1));
    assert_eq!(b.inner.writes, writes, "nothing made after the stop");
    agent.stop(&mut b).expect("stop");
    assert_eq!(b.inner.running_groups(), 0);
}

#[test]
fn a_stop_while_it_waits_ends_the_run_at_once() {
    // a 10 s interval on the wall clock, stopped 100 ms into the first wait
    let (mut b, stopper) = platform(At::Never);
    let mut agent =
        Agent::start_stoppable(&mut b, policy(10_000), &ProcFs::host(), false, &stopper)
            .expect("start");
    let other = agent.stopper();
    let stop = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        other.stop();
    });
    let started = Instant::now();
    let t = agent
        .run(&mut b, &RunOptions::default(), |_| Ok(()))
        .expect("run");
    let took = started.elapsed();
    assert_eq!(t, Duration::ZERO, "no interval ran");
    assert!(took < Duration::from_secs(5), "stopped after {took:?}");
    assert!(stopper.is_stopped());
    stop.join().unwrap();
    agent.stop(&mut b).expect("stop");
}
