//! `deploy/`: the exporter's containers pass only flags `rdt-exporter` has. (Every file's
//! parsing and the agent's manifest: crates/rdt-agent/tests/deploy.rs.)

#[path = "../../../tests/support/deploy.rs"]
mod deploy;

const EXPORTER: &str = env!("CARGO_BIN_EXE_rdt-exporter");

#[test]
fn the_exporters_containers_pass_only_flags_rdt_exporter_has() {
    let exporters: Vec<_> = deploy::containers()
        .into_iter()
        .filter(|c| c.image.starts_with("rdt-exporter:"))
        .collect();
    assert_eq!(exporters.len(), 1, "{exporters:?}");
    for c in &exporters {
        let checked = deploy::check_flags(EXPORTER, c);
        assert_eq!(checked, ["--listen", "--iface"], "{}", c.name);
    }
}
