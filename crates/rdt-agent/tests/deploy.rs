//! `deploy/`: every manifest and snippet parses as its consumer reads it, the agent's
//! DaemonSet passes only flags `rdt-agent` (and `rdt-agent nri`) has, mounts what those
//! flags name with the least privileges, its classes plan on simulated Intel and AMD nodes,
//! and its NRI socket is the one the containerd and CRI-O snippets enable.
//! (The exporter's manifest is checked against `rdt-exporter`'s flags in
//! crates/rdt-exporter/tests/deploy.rs.)

use serde_json::Value;

#[path = "../../../tests/support/deploy.rs"]
mod deploy;

const AGENT: &str = env!("CARGO_BIN_EXE_rdt-agent");

#[test]
fn every_file_of_deploy_parses_as_its_consumer_reads_it() {
    let mut parsed = Vec::new();
    for (name, text) in deploy::files() {
        let Some(docs) = deploy::parse(&name, &text) else {
            assert!(
                deploy::has_ext(&name, "service"),
                "{name}: a file of unknown kind"
            );
            continue;
        };
        assert!(!docs.is_empty(), "{name}");
        // goresctrl's class file for CRI-O nodes: read as CRI-O and the plugin read it
        if docs[0]["partitions"].is_object() {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join(&name);
            std::fs::write(&path, &text).expect("write");
            let file =
                rdt_pqos::config::ConfigFile::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                matches!(file, rdt_pqos::config::ConfigFile::Goresctrl(_)),
                "{name}"
            );
            parsed.push(name);
            continue;
        }
        if deploy::has_ext(&name, "yaml") {
            for d in &docs {
                assert!(
                    d["apiVersion"].is_string() && d["kind"].is_string(),
                    "{name}: a Kubernetes object: {d}"
                );
            }
        }
        parsed.push(name);
    }
    for f in [
        "rdt-agent-daemonset.yaml",
        "rdt-exporter-daemonset.yaml",
        "containerd-nri.toml",
        "crio-nri.conf",
        "crio-rdt-classes.yaml",
        "rdt-agent-crio-patch.yaml",
        "rdt-agent-policy.toml",
    ] {
        assert!(parsed.iter().any(|p| p == f), "{f} in {parsed:?}");
    }
}

#[test]
fn the_agents_containers_pass_only_flags_rdt_agent_has() {
    let agents: Vec<_> = deploy::containers()
        .into_iter()
        .filter(|c| c.image.starts_with("rdt-agent:"))
        .collect();
    let names: Vec<(&str, &str)> = agents
        .iter()
        .map(|c| (c.manifest.as_str(), c.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("rdt-agent-crio-patch.yaml", "rdt-agent"),
            ("rdt-agent-daemonset.yaml", "nfd-features"),
            ("rdt-agent-daemonset.yaml", "rdt-agent"),
            ("rdt-agent-daemonset.yaml", "rdt-controller"),
        ]
    );
    for c in &agents {
        let checked = deploy::check_flags(AGENT, c);
        assert!(!checked.is_empty(), "{}", c.name);
    }
}

/// The hostPath of the volume mounted at `path` in container `c`.
fn host_path_at(c: &deploy::Container, path: &str) -> Option<(String, bool)> {
    let mount = c.spec["volumeMounts"]
        .as_array()?
        .iter()
        .find(|m| m["mountPath"] == path)?;
    let volume = c.pod["volumes"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == mount["name"])?;
    Some((
        volume["hostPath"]["path"].as_str()?.to_owned(),
        mount["readOnly"] == true,
    ))
}

/// The text of the ConfigMap key the file `--flag=PATH` of `c` names (its directory
/// mounted from a ConfigMap of the manifest), with the key.
fn config_map_file(c: &deploy::Container, flag: &str) -> (String, String) {
    let path = c
        .args
        .iter()
        .find_map(|a| a.strip_prefix(&format!("{flag}=")))
        .unwrap_or_else(|| panic!("{}: {flag}=FILE", c.name));
    let (dir, key) = path.rsplit_once('/').expect("a path");
    let mount = c.spec["volumeMounts"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["mountPath"] == dir))
        .unwrap_or_else(|| panic!("{}: {dir} is mounted", c.name));
    assert_eq!(mount["readOnly"], true, "{}: {dir}", c.name);
    let volume = c.pod["volumes"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == mount["name"]))
        .expect("volume");
    let text = std::fs::read_to_string(deploy::dir().join(&c.manifest)).expect("read");
    let docs = deploy::parse(&c.manifest, &text).expect("YAML");
    let map = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == volume["configMap"]["name"])
        .expect("the ConfigMap");
    let text = map["data"][key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in the ConfigMap"));
    (key.to_owned(), text.to_owned())
}

fn daemonset() -> Vec<deploy::Container> {
    deploy::containers()
        .into_iter()
        .filter(|c| c.manifest == "rdt-agent-daemonset.yaml")
        .collect()
}

fn container<'a>(all: &'a [deploy::Container], name: &str) -> &'a deploy::Container {
    all.iter().find(|c| c.name == name).expect(name)
}

#[test]
fn the_agent_daemonset_mounts_what_its_flags_name_with_the_least_privileges() {
    let containers = daemonset();
    let nfd = container(&containers, "nfd-features");
    // the feature file lands in NFD's features.d on the host, under a name NFD reads
    let file = nfd
        .args
        .iter()
        .find_map(|a| a.strip_prefix("--nfd="))
        .expect("--nfd=FILE");
    let (dir, name) = file.rsplit_once('/').expect("a path");
    assert!(!name.starts_with('.'), "NFD skips dot files");
    assert_eq!(dir, rdt_pqos::nfd::FEATURES_DIR);
    assert_eq!(
        host_path_at(nfd, dir),
        Some((rdt_pqos::nfd::FEATURES_DIR.to_owned(), false))
    );
    assert_eq!(
        host_path_at(nfd, "/sys/fs/resctrl"),
        Some(("/sys/fs/resctrl".to_owned(), true)),
        "the init container only reads resctrl"
    );
    // the NRI plugin and the controller: resctrl read-write, the run directory kept on the
    // host (their journals, and one writers' lock between them)
    for name in ["rdt-agent", "rdt-controller"] {
        let c = container(&containers, name);
        assert_eq!(
            host_path_at(c, "/sys/fs/resctrl"),
            Some(("/sys/fs/resctrl".to_owned(), false)),
            "{name}"
        );
        assert_eq!(
            host_path_at(c, rdt_pqos::runfile::HOST_RUN_DIR),
            Some((rdt_pqos::runfile::HOST_RUN_DIR.to_owned(), false)),
            "{name}"
        );
    }
    // the plugin's socket is in the mounted NRI directory of the host
    let agent = container(&containers, "rdt-agent");
    let socket = agent
        .args
        .iter()
        .find_map(|a| a.strip_prefix("--socket="))
        .expect("--socket=PATH");
    let (socket_dir, _) = socket.rsplit_once('/').expect("a path");
    assert_eq!(
        host_path_at(agent, socket_dir),
        Some((socket_dir.to_owned(), false))
    );
    // the controller's policy is deploy/rdt-agent-policy.toml
    let (_, policy) = config_map_file(container(&containers, "rdt-controller"), "--policy");
    assert_eq!(
        policy,
        std::fs::read_to_string(deploy::dir().join("rdt-agent-policy.toml")).expect("policy"),
        "the ConfigMap holds deploy/rdt-agent-policy.toml"
    );
    // least privileges: uid 0 (resctrl is root's) and nothing else
    for c in &containers {
        let s = &c.spec["securityContext"];
        assert_eq!(s["runAsUser"], 0, "{}", c.name);
        assert_eq!(s["privileged"], false, "{}", c.name);
        assert_eq!(s["allowPrivilegeEscalation"], false, "{}", c.name);
        assert_eq!(s["readOnlyRootFilesystem"], true, "{}", c.name);
        assert_eq!(
            s["capabilities"]["drop"],
            serde_json::json!(["ALL"]),
            "{}",
            c.name
        );
        assert!(s["capabilities"]["add"].is_null(), "{}", c.name);
        assert_eq!(c.pod["hostNetwork"], Value::Null, "{}", c.name);
    }
}

#[test]
fn the_nri_plugins_classes_plan_on_intel_and_amd_nodes_and_its_qos_classes_exist() {
    let containers = daemonset();
    let agent = container(&containers, "rdt-agent");
    let (key, text) = config_map_file(agent, "--config");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(&key);
    std::fs::write(&path, &text).expect("write");
    let file = rdt_pqos::config::ConfigFile::load(&path).expect("the classes parse");
    let rdt_pqos::config::ConfigFile::Classes(config) = &file else {
        panic!("named classes")
    };
    for arg in &agent.args {
        if let Some(q) = arg.strip_prefix("--qos-class=") {
            let (_, class) = q.split_once('=').expect("QOS=CLASS");
            assert!(config.class(class).is_some(), "{arg}: a class of {key}");
        }
    }
    for model in ["skylake-sp:rdt=l3cat", "sapphire-rapids", "genoa", "turin"] {
        let session = rdt_pqos::sim::SessionOptions {
            state: Some(dir.path().join(format!("{model}.json"))),
            ..rdt_pqos::sim::SessionOptions::new(model)
        };
        let mut rdt = rdt_pqos::OpenOptions::simulate(
            rdt_pqos::OpenOptions::new(rdt_pqos::Iface::Os).rdt_iface(None),
            session,
        )
        .open()
        .expect("open");
        if let Err(e) = file.plan(&mut rdt, &rdt_pqos::proc::ProcFs::host()) {
            panic!("{model}: {e}");
        }
    }
}

#[test]
fn the_runtime_snippets_enable_nri_on_the_socket_the_daemonset_mounts() {
    let read = |f: &str| {
        let text = std::fs::read_to_string(deploy::dir().join(f)).expect("read");
        deploy::toml_value(&text).unwrap_or_else(|e| panic!("{f}: {e}"))
    };
    let containerd = read("containerd-nri.toml");
    let nri = &containerd["plugins"]["io.containerd.nri.v1.nri"];
    assert_eq!(nri["disable"], false, "{containerd}");
    assert_eq!(nri["disable_connections"], false);
    assert_eq!(nri["socket_path"], "/var/run/nri/nri.sock");
    let crio = read("crio-nri.conf");
    assert_eq!(crio["crio"]["nri"]["enable_nri"], true, "{crio}");
    assert_eq!(crio["crio"]["nri"]["nri_listen"], "/var/run/nri/nri.sock");
    assert_eq!(crio["crio"]["nri"]["nri_disable_connections"], false);
}

/// containerd 2.x resolves goresctrl's annotations in its CRI before NRI is asked: with its
/// RDT off, annotated pods fail ("RDT not initialized") unless the errors are ignored, the
/// class left to the plugin. CRI-O has no such switch: its RDT is pointed at the classes.
#[test]
fn the_runtime_snippets_let_annotated_pods_through_to_the_plugin() {
    let read = |f: &str| {
        let text = std::fs::read_to_string(deploy::dir().join(f)).expect("read");
        deploy::toml_value(&text).unwrap_or_else(|e| panic!("{f}: {e}"))
    };
    let containerd = read("containerd-nri.toml");
    assert_eq!(containerd["version"], 3, "a containerd 2.x config");
    let cri = &containerd["plugins"]["io.containerd.cri.v1.runtime"]["containerd"];
    assert_eq!(cri["ignore_rdt_not_enabled_errors"], true, "{containerd}");
    let crio = read("crio-nri.conf");
    let rdt = crio["crio"]["runtime"]["rdt_config_file"]
        .as_str()
        .expect("rdt_config_file");
    assert!(
        std::path::Path::new(rdt).is_absolute() && deploy::has_ext(rdt, "yaml"),
        "goresctrl's YAML: {rdt}"
    );
}

/// The plugin's probes are `rdt-agent nri --check` (readiness: registered) and `--check
/// --live` (liveness), commands the image has; they read the state file in the run
/// directory the plugin's container mounts; the host's cgroups are mounted read-only for
/// the repairs.
#[test]
fn the_plugins_probes_run_its_check_and_its_cgroups_are_mounted_read_only() {
    let text =
        std::fs::read_to_string(deploy::dir().join("rdt-agent-daemonset.yaml")).expect("read");
    let docs = deploy::parse("rdt-agent-daemonset.yaml", &text).expect("yaml");
    let ds = docs
        .iter()
        .find(|d| d["kind"] == "DaemonSet")
        .expect("DaemonSet");
    let plugin = ds["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == "rdt-agent")
        .expect("the plugin's container");
    let command = |probe: &str| -> Vec<String> {
        plugin[probe]["exec"]["command"]
            .as_array()
            .unwrap_or_else(|| panic!("{probe}: an exec probe"))
            .iter()
            .map(|v| v.as_str().expect("a string").to_owned())
            .collect()
    };
    assert_eq!(command("readinessProbe"), ["rdt-agent", "nri", "--check"]);
    assert_eq!(
        command("livenessProbe"),
        ["rdt-agent", "nri", "--check", "--live"]
    );
    // the flags exist: with no plugin running, --check fails (1) rather than being a
    // usage error (2)
    for probe in ["readinessProbe", "livenessProbe"] {
        let args = command(probe);
        let run = std::process::Command::new(AGENT)
            .args(&args[1..])
            .arg("--sysroot")
            .arg(tempfile::tempdir().expect("tempdir").path())
            .output()
            .expect("run");
        assert_eq!(run.status.code(), Some(1), "{probe}: {run:?}");
    }
    let containers = daemonset();
    let c = container(&containers, "rdt-agent");
    assert_eq!(
        host_path_at(c, "/sys/fs/cgroup"),
        Some(("/sys/fs/cgroup".to_owned(), true))
    );
    assert_eq!(
        host_path_at(c, "/run/rdt").map(|(p, _)| p),
        Some("/run/rdt".to_owned())
    );
}

/// CRI-O reads its class file from the host (rdt_config_file); the DaemonSet's CRI-O patch
/// gives the plugin that same file (the host directory mounted read-only, --config in it),
/// so both make the same groups; the file shipped for it names the QoS mapping's classes
/// and plans on Intel and AMD nodes.
#[test]
fn on_crio_the_plugin_reads_the_class_file_crio_reads() {
    let read = |f: &str| {
        let text = std::fs::read_to_string(deploy::dir().join(f)).expect("read");
        deploy::toml_value(&text).unwrap_or_else(|e| panic!("{f}: {e}"))
    };
    let crio = read("crio-nri.conf");
    let rdt = crio["crio"]["runtime"]["rdt_config_file"]
        .as_str()
        .expect("rdt_config_file")
        .to_owned();
    let patch: Vec<_> = deploy::containers()
        .into_iter()
        .filter(|c| c.manifest == "rdt-agent-crio-patch.yaml")
        .collect();
    let plugin = container(&patch, "rdt-agent");
    let config = plugin
        .args
        .iter()
        .find_map(|a| a.strip_prefix("--config="))
        .expect("--config=FILE");
    let (dir, file) = config.rsplit_once('/').expect("a path");
    let (host, read_only) = host_path_at(plugin, dir).expect("--config's directory from the host");
    assert!(read_only, "{dir}");
    assert_eq!(
        format!("{host}/{file}"),
        rdt,
        "the plugin's file is CRI-O's"
    );
    // the same prefix as CRI-O's goresctrl (none)
    assert!(
        !plugin.args.iter().any(|a| a.starts_with("--group-prefix")),
        "{:?}",
        plugin.args
    );
    // the rest of the plugin's flags as the DaemonSet's, but --config
    let shipped = daemonset();
    let base = container(&shipped, "rdt-agent");
    let without = |args: &[String]| -> Vec<String> {
        args.iter()
            .filter(|a| !a.starts_with("--config="))
            .cloned()
            .collect()
    };
    assert_eq!(without(&plugin.args), without(&base.args));
    assert!(!deploy::check_flags(AGENT, plugin).is_empty());
    // the shipped class file: goresctrl's, the QoS mapping's classes, plans everywhere
    let shipped_file = deploy::dir().join("crio-rdt-classes.yaml");
    let file = rdt_pqos::config::ConfigFile::load(&shipped_file).expect("the classes parse");
    let classes = rdt_nri::classes_of(&file, &rdt_pqos::config::goresctrl::GroupOptions::default());
    for arg in &plugin.args {
        if let Some(q) = arg.strip_prefix("--qos-class=") {
            let (_, class) = q.split_once('=').expect("QOS=CLASS");
            let c = classes.iter().find(|c| c.name == class);
            assert_eq!(
                c.and_then(|c| c.group.as_deref()),
                Some(class),
                "{arg}: a class of the file, its group named after it"
            );
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for model in ["skylake-sp:rdt=l3cat", "sapphire-rapids", "genoa", "turin"] {
        let session = rdt_pqos::sim::SessionOptions {
            state: Some(dir.path().join(format!("{model}.json"))),
            ..rdt_pqos::sim::SessionOptions::new(model)
        };
        let mut rdt = rdt_pqos::OpenOptions::simulate(
            rdt_pqos::OpenOptions::new(rdt_pqos::Iface::Os).rdt_iface(None),
            session,
        )
        .open()
        .expect("open");
        if let Err(e) = file.plan(&mut rdt, &rdt_pqos::proc::ProcFs::host()) {
            panic!("{model}: {e}");
        }
    }
}
