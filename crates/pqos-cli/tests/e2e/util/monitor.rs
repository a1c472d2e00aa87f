//! Reading pqos's monitoring text output back into numbers.

use std::collections::BTreeMap;

/// One row of a monitoring table: the columns by header name (`IPC`, `MISSES`, `LLC[KB]`,
/// `MBL[MB/s]`, `MBR[MB/s]`), with the `k` suffix of MISSES removed.
pub type Row = BTreeMap<String, f64>;

/// The samples (`TIME` blocks) of pqos's text output, each a map from group (the CORE cell)
/// to its row; blank cells (an event the group does not monitor, no PMU) are left out.
/// What comes before the first `TIME` line (v25.04's `NOTE:` banner) is skipped. Panics on
/// output that does not have pqos's layout: every header cell and every value cell is 12
/// characters wide, the group cell 8 (pqos/monitor_text.c).
pub fn parse_text(stdout: &str) -> Vec<BTreeMap<String, Row>> {
    let mut samples = Vec::new();
    let mut header: Vec<String> = Vec::new();
    let first_time = stdout.find("TIME ").unwrap_or(stdout.len());
    for line in stdout[first_time..].lines() {
        if line.starts_with("TIME ") {
            samples.push(BTreeMap::new());
            continue;
        }
        if line.trim_start().starts_with("CORE") {
            assert_eq!(
                line.len() % 12,
                8,
                "header cells are 12 wide after an 8-wide CORE: {line:?}"
            );
            header = (0..(line.len() - 8) / 12)
                .map(|i| line[8 + i * 12..8 + (i + 1) * 12].trim().to_owned())
                .collect();
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        assert_eq!(
            line.len(),
            8 + 12 * header.len(),
            "row has pqos's cell widths: {line:?}"
        );
        let group = line[..8].trim().to_owned();
        let row = header
            .iter()
            .enumerate()
            .filter_map(|(i, name)| {
                let cell = line[8 + i * 12..8 + (i + 1) * 12].trim();
                let number = cell.strip_suffix('k').unwrap_or(cell);
                (!cell.is_empty()).then(|| {
                    (
                        name.clone(),
                        number
                            .parse()
                            .unwrap_or_else(|_| panic!("cell {cell:?} in {line:?}")),
                    )
                })
            })
            .collect();
        samples
            .last_mut()
            .expect("a row after a TIME line")
            .insert(group, row);
    }
    samples
}

/// The number after `label` on the first line of `text` that contains it (`Way size: N bytes`).
pub fn number_after(text: &str, label: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.contains(label))
        .unwrap_or_else(|| panic!("{label} in\n{text}"));
    let rest = &line[line.find(label).expect("label") + label.len()..];
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("number after {label} in {line:?}"))
}
