//! `rdt-agent --nfd FILE`: the node's RDT features for Node Feature Discovery
//! (`rdt_pqos::nfd`), written once.

use std::path::Path;

use anyhow::{Context, Result};
use rdt_pqos::OpenOptions;
use rdt_pqos::nfd::NodeFeatures;

/// Reads the capabilities of the platform `opts` opens and writes them to `path` in NFD's
/// feature-file format; a CPU without RDT gets a file without labels.
pub fn write(opts: &OpenOptions, path: &Path) -> Result<()> {
    let features = NodeFeatures::discover(opts).context("reading the capabilities")?;
    features
        .write(path)
        .with_context(|| format!("--nfd {}", path.display()))?;
    let labels: Vec<String> = features.labels().map(|(k, v)| format!("{k}={v}")).collect();
    eprintln!("{}: {}", path.display(), labels.join(" "));
    Ok(())
}
