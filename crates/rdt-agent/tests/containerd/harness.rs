//! A node for the real-runtime tests: containerd (its own root, state, sockets and NRI
//! socket in a temp dir), crictl, runc behind `tests/containerd-tools/runc-wrapper`, and
//! `rdt-agent nri` with the DaemonSet's flags on a FUSE-mounted simulated skylake-sp.
//!
//! The tools come from `scripts/containerd-tools` (containerd and crictl built from the Go
//! module proxy into the target directory, runc from Debian), whose paths scripts/test
//! exports; without them the test runs that script itself. The image (pod sandboxes and
//! containers alike) is built here: `tests/containerd-tools/pause`, a static Go binary,
//! packed as an OCI archive by `mkimage` and imported with `ctr images import`, since no
//! image registry is reachable.
//!
//! runc joins `linux.intelRdt.closID` under the host's /sys/fs/resctrl, which the test
//! machine does not have; the wrapper records each spec runc receives and writes the
//! container's pid into the simulated group's `tasks` instead (see runc-wrapper/main.go).
//!
//! Every wait has a timeout; a dropped [`Node`] removes its pods, stops the agent and
//! containerd, kills what they left running (shims, containers: found by the node's temp
//! dir in their command line or root), unmounts what containerd mounted under the temp dir
//! and removes the pods' cgroups.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rdt_sim::fs::testing::TestMount;
use serde_json::{Value, json};

pub const AGENT: &str = env!("CARGO_BIN_EXE_rdt-agent");
/// The image's name in containerd's `k8s.io` namespace.
pub const IMAGE: &str = "rdt.invalid/pause:1";
/// goresctrl's configuration of the node: the classes the DaemonSet's `--qos-class` flags
/// name, in one partition (groups named as the classes: the DaemonSet sets no prefix).
pub const CLASSES: &str = "partitions:\n  default:\n    l3Allocation: 100%\n    mbAllocation: [100%]\n    classes:\n      gold:\n        l3Allocation: 100%\n      silver:\n        l3Allocation: 60%\n        mbAllocation: [60%]\n      bronze:\n        l3Allocation: 20%\n        mbAllocation: [20%]\n";

/// The runtime's tools.
pub struct Tools {
    /// containerd, containerd-shim-runc-v2, ctr.
    pub containerd_bin: PathBuf,
    pub crictl: PathBuf,
    pub runc: PathBuf,
    /// The Go helpers: pause, runc-wrapper, mkimage.
    pub helpers: PathBuf,
    /// The OCI archive of [`IMAGE`].
    pub image: PathBuf,
}

fn go() -> PathBuf {
    std::env::var_os("GO")
        .map(PathBuf::from)
        .into_iter()
        .chain(std::env::var_os("PATH").into_iter().flat_map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("go"))
                .collect::<Vec<_>>()
        }))
        .chain([PathBuf::from("/usr/local/go/bin/go")])
        .find(|g| g.is_file())
        .expect(
            "Go is missing: the containerd test builds containerd, crictl and its helpers with \
             Go 1.24 or newer (GO=/path/to/go, or on PATH; scripts/test installs golang-go)",
        )
}

/// The tools, built once per test binary.
pub fn tools() -> &'static Tools {
    static TOOLS: OnceLock<Tools> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut vars: BTreeMap<String, String> = ["RDT_TEST_CONTAINERD_BIN", "RDT_TEST_CRICTL", "RDT_TEST_RUNC"]
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
            .collect();
        if vars.len() < 3 {
            // not run by scripts/test: the same script, which builds only what is missing
            let script = manifest.join("../../scripts/containerd-tools");
            let out = Command::new("bash")
                .arg(&script)
                .env("GO", go())
                .stderr(Stdio::inherit())
                .output()
                .expect("running scripts/containerd-tools");
            assert!(
                out.status.success(),
                "scripts/containerd-tools failed (exit {:?}): the containerd test needs containerd, crictl and runc",
                out.status.code()
            );
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                if let Some((k, v)) = line.split_once('=') {
                    vars.insert(k.to_owned(), v.trim_matches('\'').to_owned());
                }
            }
        }
        let var = |k: &str| PathBuf::from(vars.get(k).unwrap_or_else(|| panic!("{k}")));
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let helpers = tmp.join("containerd-tools");
        let status = Command::new(go())
            .args(["build", "-buildvcs=false", "-o"])
            // (a directory: with a trailing slash, Go writes each package's binary into it)
            .arg(format!("{}/", helpers.display()))
            .args(["./pause", "./runc-wrapper", "./mkimage"])
            .current_dir(manifest.join("tests/containerd-tools"))
            .env("GOCACHE", tmp.join("go-build-cache"))
            .env("CGO_ENABLED", "0")
            .env("GOFLAGS", "-mod=readonly")
            .status()
            .expect("go build of tests/containerd-tools");
        assert!(status.success(), "go build of tests/containerd-tools failed");
        let image = tmp.join("pause-image.tar");
        let status = Command::new(helpers.join("mkimage"))
            .arg(helpers.join("pause"))
            .arg(IMAGE)
            .arg(&image)
            .status()
            .expect("mkimage");
        assert!(status.success(), "mkimage failed");
        let tools = Tools {
            containerd_bin: var("RDT_TEST_CONTAINERD_BIN"),
            crictl: var("RDT_TEST_CRICTL"),
            runc: var("RDT_TEST_RUNC"),
            helpers,
            image,
        };
        for bin in [
            tools.containerd_bin.join("containerd"),
            tools.containerd_bin.join("containerd-shim-runc-v2"),
            tools.containerd_bin.join("ctr"),
            tools.crictl.clone(),
            tools.runc.clone(),
        ] {
            assert!(bin.is_file(), "{} is missing (scripts/containerd-tools builds it)", bin.display());
        }
        tools
    })
}

/// Runs `cmd` for at most `limit`; its stdout, or an error with its stderr.
pub fn run_for(mut cmd: Command, limit: Duration) -> Result<String, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    let (mut out, mut err) = (
        child.stdout.take().expect("piped"),
        child.stderr.take().expect("piped"),
    );
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut stdout = String::new();
    let t0 = Instant::now();
    let outer = std::thread::spawn(move || {
        let _ = out.read_to_string(&mut stdout);
        stdout
    });
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{cmd:?}: still running after {limit:?}: killed"));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = outer.join().unwrap_or_default();
    let stderr = reader.join().unwrap_or_default();
    if status.success() {
        Ok(stdout)
    } else {
        Err(format!("{status}: {}", stderr.trim()))
    }
}

/// crictl on one containerd; cheap to clone into a thread.
#[derive(Clone)]
pub struct Cri {
    crictl: PathBuf,
    endpoint: String,
    config: PathBuf,
    /// Where pod and container configurations are written.
    dir: PathBuf,
    /// Every pod's cgroup parent, removed with the node.
    parents: Arc<Mutex<Vec<String>>>,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// What a pod asks for.
#[derive(Clone, Debug)]
pub struct PodSpec {
    /// Kubernetes QoS class by the pod's cgroup parent (kubelet's layout): guaranteed,
    /// burstable, besteffort.
    pub qos: &'static str,
    pub pod_annotations: Vec<(String, String)>,
    pub container_annotations: Vec<(String, String)>,
}

impl PodSpec {
    pub fn qos(qos: &'static str) -> Self {
        Self {
            qos,
            pod_annotations: vec![],
            container_annotations: vec![],
        }
    }
    pub fn pod_annotation(mut self, k: &str, v: &str) -> Self {
        self.pod_annotations.push((k.to_owned(), v.to_owned()));
        self
    }
    pub fn container_annotation(mut self, k: &str, v: &str) -> Self {
        self.container_annotations
            .push((k.to_owned(), v.to_owned()));
        self
    }
    /// The six forms the tests cycle through: the three annotation forms, the three QoS
    /// classes; with the group each container must end in.
    pub fn forms() -> Vec<(Self, &'static str)> {
        vec![
            (
                Self::qos("besteffort")
                    .pod_annotation("rdt.resources.beta.kubernetes.io/pod", "gold"),
                "gold",
            ),
            (
                Self::qos("besteffort")
                    .pod_annotation("rdt.resources.beta.kubernetes.io/container.c", "silver"),
                "silver",
            ),
            (
                Self::qos("guaranteed")
                    .container_annotation("io.kubernetes.cri.rdt-class", "bronze"),
                "bronze",
            ),
            (Self::qos("guaranteed"), "gold"),
            (Self::qos("burstable"), "silver"),
            (Self::qos("besteffort"), "bronze"),
        ]
    }
}

/// A running container.
#[derive(Clone, Debug)]
pub struct Ctr {
    pub pod: String,
    pub id: String,
    pub pid: u32,
    /// The group it must be in.
    pub group: String,
}

impl Cri {
    pub fn crictl(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = Command::new(&self.crictl);
        cmd.arg("--config")
            .arg(&self.config)
            .args([
                "--runtime-endpoint",
                &self.endpoint,
                "--image-endpoint",
                &self.endpoint,
            ])
            .args(["--timeout", "20s"])
            .args(args);
        run_for(cmd, Duration::from_secs(30)).map(|s| s.trim().to_owned())
    }

    /// containerd answers CRI.
    pub fn ready(&self) -> bool {
        self.crictl(&["version"]).is_ok()
    }

    /// A pod (host network, the QoS class's cgroup parent) and its one container `c`,
    /// created and started; `Err` names the step that failed.
    pub fn run_pod(&self, spec: &PodSpec, group: &str) -> Result<Ctr, String> {
        let (pod, id) = self.create_pod(spec)?;
        self.start(&pod, &id, group)
    }

    /// Starts container `id` of `pod`, which must end in `group`.
    pub fn start(&self, pod: &str, id: &str, group: &str) -> Result<Ctr, String> {
        self.crictl(&["start", id])
            .map_err(|e| format!("start: {e}"))?;
        let pid = self.pid(id)?;
        Ok(Ctr {
            pod: pod.to_owned(),
            id: id.to_owned(),
            pid,
            group: group.to_owned(),
        })
    }

    /// The pod of [`Cri::run_pod`] and its container, created (not started): (pod id,
    /// container id).
    pub fn create_pod(&self, spec: &PodSpec) -> Result<(String, String), String> {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let uid = format!("rdt-e2e-{}-{n}", std::process::id());
        let parent = match spec.qos {
            "guaranteed" => format!("/kubepods/pod{uid}"),
            q => format!("/kubepods/{q}/pod{uid}"),
        };
        let ann = |a: &[(String, String)]| a.iter().cloned().collect::<BTreeMap<_, _>>();
        let pod = json!({
            "metadata": {"name": format!("p{n}"), "namespace": "default", "uid": uid, "attempt": 0},
            "annotations": ann(&spec.pod_annotations),
            "log_directory": self.dir.join(format!("logs-{uid}")),
            "linux": {
                "cgroup_parent": parent,
                "security_context": {"namespace_options": {"network": 2, "pid": 1, "ipc": 1}}
            }
        });
        let ctr = json!({
            "metadata": {"name": "c", "attempt": 0},
            "image": {"image": IMAGE},
            "log_path": "c.log",
            "annotations": ann(&spec.container_annotations),
            "linux": {}
        });
        self.parents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(parent.clone());
        let pod_file = self.dir.join(format!("pod-{uid}.json"));
        let ctr_file = self.dir.join(format!("ctr-{uid}.json"));
        std::fs::write(&pod_file, pod.to_string()).map_err(|e| e.to_string())?;
        std::fs::write(&ctr_file, ctr.to_string()).map_err(|e| e.to_string())?;
        let (pf, cf) = (
            pod_file.to_str().ok_or("a non-UTF-8 path")?,
            ctr_file.to_str().ok_or("a non-UTF-8 path")?,
        );
        let pod_id = self
            .crictl(&["runp", pf])
            .map_err(|e| format!("runp: {e}"))?;
        let created = self
            .crictl(&["create", &pod_id, cf, pf])
            .map_err(|e| format!("create: {e}"));
        match created {
            Ok(id) => Ok((pod_id, id)),
            Err(e) => {
                let _ = self.crictl(&["rmp", "-f", &pod_id]);
                Err(e)
            }
        }
    }

    /// The container's init pid (`crictl inspect`'s info.pid).
    pub fn pid(&self, id: &str) -> Result<u32, String> {
        let out = self
            .crictl(&["inspect", id])
            .map_err(|e| format!("inspect: {e}"))?;
        let v: Value = serde_json::from_str(&out).map_err(|e| format!("inspect: {e}: {out}"))?;
        v["info"]["pid"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("inspect {id}: no pid"))
    }
}

/// A child process killed (and reaped) when dropped.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).expect("pid"))
    }
    /// `sig`, then waits up to `limit` for the exit; SIGKILL after that.
    pub fn stop(mut self, sig: Signal, limit: Duration) -> Option<std::process::ExitStatus> {
        let _ = kill(self.pid(), sig);
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    /// Still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The node: simulated platform, containerd, the agent.
pub struct Node {
    pub mount: TestMount,
    pub dir: tempfile::TempDir,
    pub cri: Cri,
    pub containerd: Option<Proc>,
    pub agent: Option<Proc>,
    containerd_starts: u32,
    agent_starts: u32,
}

/// Merges `over` into `base`, objects key by key, `over` winning.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o,
    }
}

/// `v` (an object of scalars, arrays of scalars and objects) as TOML: each object a
/// `[table]` under its dotted, quoted path. (The workspace's `toml` only parses.)
fn to_toml(v: &Value) -> String {
    fn scalar(v: &Value) -> String {
        match v {
            // a JSON string is a TOML basic string (the same escapes)
            Value::Array(a) => format!("[{}]", a.iter().map(scalar).collect::<Vec<_>>().join(", ")),
            Value::Object(_) | Value::Null => panic!("not a TOML scalar: {v}"),
            v => v.to_string(),
        }
    }
    fn table(path: &[String], v: &serde_json::Map<String, Value>, out: &mut String) {
        if !path.is_empty() {
            let header: Vec<String> = path
                .iter()
                .map(|k| Value::from(k.as_str()).to_string())
                .collect();
            out.push_str(&format!("\n[{}]\n", header.join(".")));
        }
        for (k, x) in v.iter().filter(|(_, x)| !x.is_object()) {
            out.push_str(&format!("{} = {}\n", Value::from(k.as_str()), scalar(x)));
        }
        for (k, x) in v {
            if let Value::Object(o) = x {
                let mut p = path.to_vec();
                p.push(k.clone());
                table(&p, o, out);
            }
        }
    }
    let mut out = String::new();
    table(&[], v.as_object().expect("a table"), &mut out);
    out
}

impl Node {
    /// The mounted platform and the temp dir; nothing runs yet.
    pub fn new() -> Self {
        let t = tools();
        let mount = crate::support::mount_with_foreign_group();
        let dir = tempfile::Builder::new()
            .prefix("rdt-ctrd")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let d = dir.path();
        for sub in ["specs", "logs", "cri"] {
            std::fs::create_dir(d.join(sub)).expect("mkdir");
        }
        std::fs::write(d.join("crictl.yaml"), "").expect("write");
        std::fs::write(d.join("classes.yaml"), CLASSES).expect("write");
        // the runtime binary: the wrapper with this node's record and resctrl directories
        let wrapper = format!(
            "#!/bin/sh\nexec '{}' -runc '{}' -record '{}' -resctrl '{}' -- \"$@\"\n",
            t.helpers.join("runc-wrapper").display(),
            t.runc.display(),
            d.join("specs").display(),
            mount.root().join("sys/fs/resctrl").display()
        );
        std::fs::write(d.join("runc"), wrapper).expect("write");
        std::fs::set_permissions(
            d.join("runc"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        let config = Self::containerd_config(d);
        std::fs::write(d.join("config.toml"), config).expect("write");
        let cri = Cri {
            crictl: t.crictl.clone(),
            endpoint: format!("unix://{}", d.join("containerd.sock").display()),
            config: d.join("crictl.yaml"),
            dir: d.join("cri"),
            parents: Arc::default(),
        };
        Self {
            mount,
            dir,
            cri,
            containerd: None,
            agent: None,
            containerd_starts: 0,
            agent_starts: 0,
        }
    }

    /// deploy/containerd-nri.toml as written, merged with this node's paths and the CRI
    /// settings a test machine needs (the local sandbox image: no registry; the native
    /// snapshotter; the wrapper as runc; `restrict_oom_score_adj`: the sandbox's -998 needs
    /// CAP_SYS_RESOURCE, which the test machine's root lacks), in the names of the shipped
    /// file's config version.
    fn containerd_config(d: &Path) -> String {
        let shipped_path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/containerd-nri.toml");
        let shipped = std::fs::read_to_string(&shipped_path).expect("deploy/containerd-nri.toml");
        let mut config =
            crate::deploy::toml_value(&shipped).expect("deploy/containerd-nri.toml parses");
        let version = config["version"].as_i64().unwrap_or(1);
        let p = |s: &str| d.join(s).display().to_string();
        let runc = json!({
            "runtime_type": "io.containerd.runc.v2",
            "options": {"BinaryName": p("runc"), "Root": p("runc-root"), "SystemdCgroup": false}
        });
        let cni = json!({"bin_dir": p("cni-bin"), "conf_dir": p("cni-conf")});
        let mut plugins = json!({
            "io.containerd.nri.v1.nri": {
                "socket_path": p("nri.sock"),
                "plugin_path": p("nri-plugins"),
                "plugin_config_path": p("nri-conf"),
            },
            "io.containerd.internal.v1.opt": {"path": p("opt")},
        });
        if version >= 3 {
            plugins["io.containerd.cri.v1.images"] = json!({
                "snapshotter": "native",
                "pinned_images": {"sandbox": IMAGE},
            });
            plugins["io.containerd.cri.v1.runtime"] = json!({
                "restrict_oom_score_adj": true,
                "containerd": {"default_runtime_name": "runc", "runtimes": {"runc": runc}},
                "cni": cni,
            });
        } else {
            plugins["io.containerd.grpc.v1.cri"] = json!({
                "sandbox_image": IMAGE,
                "restrict_oom_score_adj": true,
                "containerd": {"snapshotter": "native", "default_runtime_name": "runc", "runtimes": {"runc": runc}},
                "cni": cni,
            });
        }
        let over = json!({
            "root": p("root"),
            "state": p("state"),
            "grpc": {"address": p("containerd.sock")},
            "ttrpc": {"address": p("containerd.sock.ttrpc")},
            "plugins": plugins,
        });
        let path_keys = ["socket_path", "plugin_path", "plugin_config_path"];
        // the shipped file's own settings stay, but its host paths become this node's
        let nri = config["plugins"]["io.containerd.nri.v1.nri"]
            .as_object()
            .expect("the shipped file configures NRI");
        for (k, v) in nri {
            if v.as_str().is_some_and(|s| s.starts_with('/')) {
                assert!(
                    path_keys.contains(&k.as_str()),
                    "a host path in the shipped NRI section the test does not move: {k} = {v}"
                );
            }
        }
        merge(&mut config, over);
        to_toml(&config)
    }

    pub fn containerd_log(&self) -> String {
        self.containerd
            .as_ref()
            .map(Proc::log_text)
            .unwrap_or_default()
    }

    /// Starts containerd and waits until it answers CRI (at most 30 s); imports the image
    /// on the first start.
    pub fn start_containerd(&mut self) -> Duration {
        assert!(self.containerd.is_none(), "containerd runs already");
        let t = tools();
        let d = self.dir.path();
        self.containerd_starts += 1;
        let log = d.join(format!("logs/containerd-{}.log", self.containerd_starts));
        let file = std::fs::File::create(&log).expect("log");
        let path = format!(
            "{}:{}",
            t.containerd_bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let child = Command::new(t.containerd_bin.join("containerd"))
            .arg("--config")
            .arg(d.join("config.toml"))
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("containerd");
        let t0 = Instant::now();
        self.containerd = Some(Proc { child, log });
        while !self.cri.ready() {
            let c = self.containerd.as_mut().expect("containerd");
            assert!(c.alive(), "containerd exited at start:\n{}", c.log_text());
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "containerd does not answer CRI after 30 s:\n{}",
                c.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let ready = t0.elapsed();
        if self.containerd_starts == 1 {
            let mut ctr = Command::new(t.containerd_bin.join("ctr"));
            ctr.arg("--address")
                .arg(d.join("containerd.sock"))
                .args(["-n", "k8s.io", "images", "import", "--local"])
                .arg(&t.image);
            run_for(ctr, Duration::from_mins(1)).expect("ctr images import");
        }
        ready
    }

    /// SIGTERM to containerd; SIGKILL if it has not exited within 10 s.
    pub fn stop_containerd(&mut self) {
        if let Some(c) = self.containerd.take() {
            c.stop(Signal::SIGTERM, Duration::from_secs(10));
        }
    }

    /// The DaemonSet's `rdt-agent` container's arguments, its host paths moved into the
    /// node's temp dir: `--config` the goresctrl classes, `--socket` containerd's NRI
    /// socket, any other absolute path but `--cgroup-root` under the temp dir; plus
    /// `--sysroot`, the mount.
    pub fn agent_args(&self) -> Vec<String> {
        let d = self.dir.path();
        let ds = crate::deploy::containers()
            .into_iter()
            .find(|c| c.manifest == "rdt-agent-daemonset.yaml" && c.name == "rdt-agent")
            .expect("the DaemonSet's rdt-agent container");
        assert_eq!(
            ds.args.first().map(String::as_str),
            Some("nri"),
            "{:?}",
            ds.args
        );
        let mut args: Vec<String> = ds
            .args
            .iter()
            .map(|a| match a.split_once('=') {
                Some(("--config", _)) => format!("--config={}", d.join("classes.yaml").display()),
                Some(("--socket", _)) => format!("--socket={}", d.join("nri.sock").display()),
                // the host's cgroups, where runc puts the containers here too
                Some(("--cgroup-root", _)) => a.clone(),
                Some((k, v)) if v.starts_with('/') => {
                    format!("{k}={}", d.join("agent-root").join(&v[1..]).display())
                }
                _ => a.clone(),
            })
            .collect();
        args.push(format!("--sysroot={}", self.mount.root().display()));
        args
    }

    /// Starts `rdt-agent nri` (does not wait for its registration).
    pub fn start_agent(&mut self) {
        assert!(self.agent.is_none(), "the agent runs already");
        self.agent_starts += 1;
        let log = self
            .dir
            .path()
            .join(format!("logs/agent-{}.log", self.agent_starts));
        let file = std::fs::File::create(&log).expect("log");
        let child = Command::new(AGENT)
            .args(self.agent_args())
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("rdt-agent");
        self.agent = Some(Proc { child, log });
    }

    /// The DaemonSet's probe: `rdt-agent nri --check` (readiness: registered) or with
    /// `--live` (liveness) on this node's platform; whether it passed.
    pub fn probe(&self, live: bool) -> bool {
        let mut cmd = Command::new(AGENT);
        cmd.args(["nri", "--check"])
            .args(live.then_some("--live"))
            .arg(format!("--sysroot={}", self.mount.root().display()));
        run_for(cmd, Duration::from_secs(10)).is_ok()
    }

    /// Waits up to `limit` for the probe to give `want`.
    pub fn wait_probe(&self, live: bool, want: bool, limit: Duration) -> bool {
        let t0 = Instant::now();
        loop {
            if self.probe(live) == want {
                return true;
            }
            if t0.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How many times a plugin connected and synchronized with the running containerd
    /// (NRI's own log line, `pkg/adaptation/adaptation.go`).
    pub fn registrations(&self) -> usize {
        self.containerd_log()
            .matches("connected and synchronized")
            .count()
    }

    /// Waits until the running containerd has seen `n` registrations; the time it took, or
    /// `None` after `limit`.
    pub fn wait_registrations(&self, n: usize, limit: Duration) -> Option<Duration> {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if self.registrations() >= n {
                return Some(t0.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Both logs, for a failure message.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        let d = self.dir.path().join("logs");
        let mut files: Vec<_> = std::fs::read_dir(&d)
            .map(|r| r.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let name = f
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            out.push_str(&format!("--- {name} (last {} lines)\n", tail.len()));
            for l in tail.into_iter().rev() {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    /// The closID of the spec runc received for container `id` (`None`: no
    /// `linux.intelRdt`).
    pub fn spec_closid(&self, id: &str) -> Option<String> {
        let raw = std::fs::read(self.dir.path().join(format!("specs/{id}.json"))).ok()?;
        let v: Value = serde_json::from_slice(&raw).ok()?;
        v["linux"]["intelRdt"]["closID"].as_str().map(str::to_owned)
    }

    /// The pids in `group`'s `tasks` of the simulated resctrl tree.
    pub fn tasks(&self, group: &str) -> Vec<u32> {
        std::fs::read_to_string(
            self.mount
                .root()
                .join("sys/fs/resctrl")
                .join(group)
                .join("tasks"),
        )
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
    }

    /// Each container not in its class's group, named with where it is.
    pub fn misplaced(&self, ctrs: &[Ctr]) -> Vec<String> {
        let mut tasks: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        ctrs.iter()
            .filter_map(|c| {
                let t = tasks
                    .entry(c.group.clone())
                    .or_insert_with(|| self.tasks(&c.group));
                (!t.contains(&c.pid)).then(|| {
                    format!(
                        "container {} (pid {}) not in group {} (its spec's closID: {:?})",
                        c.id,
                        c.pid,
                        c.group,
                        self.spec_closid(&c.id)
                    )
                })
            })
            .collect()
    }

    /// Waits up to `limit` until every container is in its class; what is still wrong.
    pub fn settle(&self, ctrs: &[Ctr], limit: Duration) -> Vec<String> {
        let t0 = Instant::now();
        loop {
            let wrong = self.misplaced(ctrs);
            if wrong.is_empty() || t0.elapsed() > limit {
                return wrong;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The agent's resident set and its peak, KiB (`VmRSS`, `VmHWM` of /proc/PID/status).
    pub fn agent_rss(&self) -> Option<(u64, u64)> {
        let pid = self.agent.as_ref()?.child.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        };
        Some((field("VmRSS:")?, field("VmHWM:")?))
    }

    /// Processes this node left: any whose command line or root names its temp dir (the
    /// shims, the containers), not this process.
    fn stragglers(&self) -> Vec<i32> {
        let d = self.dir.path().to_string_lossy().into_owned();
        let me = std::process::id();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return vec![];
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| *pid != me)
            .filter(|pid| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let root = std::fs::read_link(format!("/proc/{pid}/root")).unwrap_or_default();
                String::from_utf8_lossy(&cmd).contains(&d) || root.starts_with(&d)
            })
            .filter_map(|pid| i32::try_from(pid).ok())
            .collect()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.containerd.is_some() {
            let _ = self.cri.crictl(&["rmp", "-fa"]);
        }
        if let Some(a) = self.agent.take() {
            a.stop(Signal::SIGTERM, Duration::from_secs(3));
        }
        self.stop_containerd();
        for _ in 0..3 {
            let left = self.stragglers();
            if left.is_empty() {
                break;
            }
            for pid in left {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        // containerd's mounts under the temp dir (sandbox /dev/shm, rootfs), deepest first
        let d = self.dir.path().to_string_lossy().into_owned();
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let mut under: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter(|m| m.starts_with(&d))
            .collect();
        under.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in under {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
        if std::env::var_os("RDT_TEST_KEEP").is_some() {
            // a post-mortem: the logs, specs and configuration stay
            let kept = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir"));
            eprintln!(
                "RDT_TEST_KEEP: the node's files stay in {}",
                kept.keep().display()
            );
        }
        // the pods' cgroups (the kubepods parents only when empty)
        let cgroups = Path::new("/sys/fs/cgroup");
        let hierarchies: Vec<PathBuf> = std::fs::read_dir(cgroups)
            .map(|r| r.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        let parents = self
            .cri
            .parents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        for parent in &parents {
            for h in hierarchies.iter().chain([&cgroups.to_path_buf()]) {
                let pod = h.join(parent.trim_start_matches('/'));
                // the container cgroups runc left (normally none), then the pod's
                if let Ok(r) = std::fs::read_dir(&pod) {
                    for e in r.filter_map(Result::ok) {
                        if e.path().is_dir() {
                            let _ = std::fs::remove_dir(e.path());
                        }
                    }
                }
                let _ = std::fs::remove_dir(&pod);
            }
        }
    }
}
