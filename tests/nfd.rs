//! `rdt_pqos::nfd`: the feature file of each simulated model (in process), written as
//! `rdt-agent --nfd` writes it and read back the way Node Feature Discovery reads it. The
//! reader below restates NFD's rules (not its code) from
//! - `source/local/local.go` (`getFeaturesFromFiles`, `parseFeatureFile`, `updateFeatures`):
//!   files whose name starts with `.` are skipped, files over `MaxFeatureFileSize` (65536
//!   bytes) are ignored whole; the file is split on `\n`, each line trimmed of white space,
//!   empty lines skipped, lines starting with `#` are comments (`# +` directives:
//!   `expiry-time`, `no-label`, `no-feature`); `key=value` splits at the first `=`, a line
//!   without `=` is `key=true`;
//! - `pkg/apis/nfd/validate/validate.go` (`Label`): the key is a Kubernetes qualified name
//!   (`k8s.io/apimachinery` `IsQualifiedName`: an optional DNS-1123 subdomain prefix of at
//!   most 253 characters and `/`, then a name of at most 63 characters,
//!   `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`), the prefix is required, a
//!   `kubernetes.io` namespace only as `feature.node.kubernetes.io` (or a
//!   `*.feature.node.kubernetes.io` one), and the value a label value (`IsValidLabelValue`:
//!   at most 63 characters, empty or `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`).

use std::collections::BTreeMap;
use std::path::Path;

use rdt_pqos::nfd::{LABEL_PREFIX, MAX_FILE_BYTES, NodeFeatures};
use rdt_pqos::sim::SessionOptions;
use rdt_pqos::{Capabilities, CpuidDump, Iface, OpenOptions};

/// NFD's `local` source over a `features.d` directory: the node labels, or why a line
/// would be refused by nfd-master's validation.
fn nfd_read(dir: &Path) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("features.d") {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let bytes = std::fs::read(entry.path()).expect("read");
        if bytes.len() > MAX_FILE_BYTES {
            continue;
        }
        let text = String::from_utf8(bytes).expect("UTF-8");
        for line in text.split('\n').map(str::trim) {
            if line.is_empty() {
                continue;
            }
            if let Some(directive) = line.strip_prefix("# +") {
                panic!("{name}: a directive we do not write: {directive}");
            }
            if line.starts_with('#') {
                continue;
            }
            let (key, value) = line.split_once('=').unwrap_or((line, "true"));
            validate_label(key, value).unwrap_or_else(|e| panic!("{name}: {line}: {e}"));
            labels.insert(key.to_owned(), value.to_owned());
        }
    }
    labels
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most `max` characters.
fn is_label_name(s: &str, max: usize) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.len() <= max
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars()
            .all(|c| alnum(c) || c == '-' || c == '_' || c == '.')
}

/// A DNS-1123 subdomain: dot-separated labels of `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most
/// 253 characters.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && l.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
}

fn validate_label(key: &str, value: &str) -> Result<(), String> {
    let Some((ns, name)) = key.split_once('/') else {
        return Err("unprefixed keys are not allowed".into());
    };
    if !is_dns_subdomain(ns) || !is_label_name(name, 63) {
        return Err(format!("invalid label key {key:?}"));
    }
    if (ns == "kubernetes.io" || ns.ends_with(".kubernetes.io"))
        && ns != "feature.node.kubernetes.io"
        && !ns.ends_with(".feature.node.kubernetes.io")
    {
        return Err("namespace is not allowed".into());
    }
    if !value.is_empty() && !is_label_name(value, 63) {
        return Err(format!("invalid value {value:?}"));
    }
    Ok(())
}

/// The in-process simulated `model` on `iface`, its features written to a fresh
/// `features.d` and read back as NFD reads them, without the prefix.
fn labels_of(model: &str, iface: Iface) -> BTreeMap<String, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let session = SessionOptions {
        state: Some(dir.path().join("state.json")),
        ..SessionOptions::new(model)
    };
    let opts = OpenOptions::simulate(OpenOptions::new(iface).rdt_iface(None), session);
    let features = NodeFeatures::discover(&opts).expect("capabilities");
    read_back(&features)
}

fn read_back(features: &NodeFeatures) -> BTreeMap<String, String> {
    let d = tempfile::tempdir().expect("tempdir");
    let features_d = d.path().join("features.d");
    std::fs::create_dir(&features_d).expect("features.d");
    features.write(features_d.join("rdt")).expect("write");
    let labels = nfd_read(&features_d);
    assert_eq!(
        std::fs::read_dir(&features_d).expect("ls").count(),
        1,
        "no temporary file left"
    );
    labels
        .into_iter()
        .map(|(k, v)| {
            let short = k
                .strip_prefix(LABEL_PREFIX)
                .unwrap_or_else(|| panic!("{k}: not under {LABEL_PREFIX}"));
            (short.to_owned(), v)
        })
        .collect()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn intel_models_get_nfd_names_with_their_classes_and_ways() {
    // E5-2650L v4: 20-way L3, 16 classes, CMT and MBM, no MBA
    assert_eq!(
        labels_of("broadwell-ep", Iface::Msr),
        map(&[
            ("RDTMON", "true"),
            ("RDTCMT", "true"),
            ("RDTMBM", "true"),
            ("RDTL3CA", "true"),
            ("RDTL3CA_NUM_CLOSID", "15"),
            ("RDTL3CA_NUM_WAYS", "20"),
        ])
    );
    // Xeon Max 9460: L2 CAT (16 bits, 8 classes), 15-bit L3, MBA with 15 classes
    let spr = labels_of("sapphire-rapids", Iface::Msr);
    assert_eq!(spr["RDTL2CA"], "true");
    assert_eq!(spr["RDTL2CA_NUM_CLOSID"], "7");
    assert_eq!(spr["RDTL2CA_NUM_WAYS"], "16");
    assert_eq!(spr["RDTL3CA_NUM_WAYS"], "15");
    assert_eq!(spr["RDTMBA"], "true");
    assert_eq!(spr["RDTMBA_NUM_CLOSID"], "14");
    assert!(!spr.contains_key("RDTSMBA"));
}

#[test]
fn on_the_os_interface_the_labels_are_what_resctrl_offers() {
    // Stock skylake-sp: the kernel's Skylake-SP quirk hides L3 CAT, CMT and MBM from
    // resctrl; its MBA is left.
    let stock = labels_of("skylake-sp", Iface::Os);
    assert!(!stock.contains_key("RDTL3CA"), "{stock:?}");
    assert!(!stock.contains_key("RDTMON"), "{stock:?}");
    assert_eq!(stock.get("RDTMBA").map(String::as_str), Some("true"));
    // Booted with rdt=l3cat,...: L3 CAT is back, its classes the kernel's (the fewest of
    // all resources: L3 and MBA).
    let booted = labels_of("skylake-sp:rdt=l3cat,cmt,mbmtotal,mbmlocal", Iface::Os);
    assert_eq!(booted["RDTL3CA"], "true");
    assert_eq!(booted["RDTL3CA_NUM_WAYS"], "11");
    assert_eq!(booted["RDTCMT"], "true");
    let msr = labels_of("skylake-sp", Iface::Msr);
    let n = |l: &BTreeMap<String, String>, k: &str| l[k].parse::<u32>().expect("a number");
    assert_eq!(
        n(&booted, "RDTL3CA_NUM_CLOSID"),
        n(&msr, "RDTMBA_NUM_CLOSID").min(n(&msr, "RDTL3CA_NUM_CLOSID"))
    );
}

#[test]
fn amd_models_label_bandwidth_allocation_that_nfds_cpuid_source_cannot_see() {
    for model in ["milan", "genoa", "turin"] {
        let l = labels_of(model, Iface::Msr);
        assert_eq!(l["RDTL3CA"], "true", "{model}: {l:?}");
        // one L3 per CCX: 16 ways (32 MiB, 16-way), 16 classes
        assert_eq!(l["RDTL3CA_NUM_WAYS"], "16", "{model}");
        assert_eq!(l["RDTL3CA_NUM_CLOSID"], "15", "{model}");
        assert_eq!(l["RDTMBA"], "true", "{model}");
        assert_eq!(l["RDTCMT"], "true", "{model}");
        assert_eq!(l["RDTMBM"], "true", "{model}");
        assert!(!l.contains_key("RDTL2CA"), "{model}");
    }
    assert!(!labels_of("milan", Iface::Msr).contains_key("RDTSMBA"));
    for model in ["genoa", "turin"] {
        assert_eq!(labels_of(model, Iface::Msr)["RDTSMBA"], "true", "{model}");
    }
}

#[test]
fn a_cpu_without_rdt_gets_a_file_without_labels() {
    // The simulator models only RDT parts; these are real dumps of CPUs without RDT
    // (tests/data/cpuid/PROVENANCE.md), decoded as the opener decodes the host's CPUID.
    for dump in [
        "intel-xeon-e5-4620v2_ivy-bridge-ep__hwloc.txt",
        "intel-core-i7-12700k_alder-lake__raw-cpuid.txt",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/cpuid")
            .join(dump);
        let text = std::fs::read_to_string(&path).expect("dump");
        let cpuid = CpuidDump::parse(&text).expect("parse");
        let caps = Capabilities::detect(&cpuid);
        assert!(!caps.has_rdt(), "{dump}");
        let features = NodeFeatures::from_capabilities(&caps);
        assert_eq!(features, NodeFeatures::none());
        assert!(read_back(&features).is_empty(), "{dump}");
    }
}

#[test]
fn writing_again_replaces_the_file_whole() {
    let d = tempfile::tempdir().expect("tempdir");
    let path = d.path().join("rdt");
    let none = NodeFeatures::none();
    let genoa = {
        let dir = tempfile::tempdir().expect("tempdir");
        let session = SessionOptions {
            state: Some(dir.path().join("state.json")),
            ..SessionOptions::new("genoa")
        };
        NodeFeatures::discover(&OpenOptions::simulate(
            OpenOptions::new(Iface::Msr).rdt_iface(None),
            session,
        ))
        .expect("genoa")
    };
    genoa.write(&path).expect("write");
    assert!(nfd_read(d.path()).len() > 5);
    none.write(&path).expect("write");
    assert!(nfd_read(d.path()).is_empty(), "no label left behind");
}
