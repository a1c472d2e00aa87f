//! pqos's predefined L3 CAT allocation profiles: `-H` lists them, `-c PROFILE` applies one.
//!
//! Each profile gives four classes (COS0-COS3) for an L3 of 11, 12, 15, 16 or 20 ways (the
//! CBM length). The tables are the ones of intel-cmt-cat's `pqos/profiles.c` (read there,
//! written down here as data): the same masks, ids and descriptions, so `pqos -c CFG1` sets
//! the same classes with either tool. A profile applies as the `-e llc:COS=MASK` items it
//! lists, after the command line's `-e` items, as pqos does; it needs at least 4 classes
//! and a table for the platform's CBM length, else pqos's `Allocation profile '%s' not found
//! or cache allocation not supported!`.

use std::fmt::Write as _;

use rdt_pqos::Capabilities;

use crate::grammar::ClassDef;

/// One profile: an id, a description and the class masks per CBM length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    /// `CFG0`..`CFG3` (matched case-insensitively).
    pub id: &'static str,
    /// What the layout does.
    pub description: &'static str,
    /// (CBM length in ways, the masks of COS0..COS3).
    pub tables: [(u32, [u64; 4]); 5],
}

/// The profiles of pqos/profiles.c, in its order.
pub const PROFILES: [Profile; 4] = [
    Profile {
        id: "CFG0",
        description: "non-overlapping, ways equally divided",
        tables: [
            (11, [0x007, 0x038, 0x1C0, 0x600]),
            (12, [0x007, 0x038, 0x1C0, 0xE00]),
            (15, [0x000F, 0x00F0, 0x0F00, 0x7000]),
            (16, [0x000F, 0x00F0, 0x0F00, 0xF000]),
            (20, [0x0001F, 0x003E0, 0x07C00, 0xF8000]),
        ],
    },
    Profile {
        id: "CFG1",
        description: "non-overlapping, ways unequally divided",
        tables: [
            (11, [0x01F, 0x060, 0x180, 0x600]),
            (12, [0x03F, 0x0C0, 0x300, 0xC00]),
            (15, [0x01FF, 0x0600, 0x1800, 0x6000]),
            (16, [0x03FF, 0x0C00, 0x3000, 0xC000]),
            (20, [0x000FF, 0x00F00, 0x0F000, 0xF0000]),
        ],
    },
    Profile {
        id: "CFG2",
        description: "overlapping, ways unequally divided, class 0 can access all ways",
        tables: [
            (11, [0x7FF, 0x060, 0x180, 0x600]),
            (12, [0xFFF, 0x0C0, 0x300, 0xC00]),
            (15, [0x7FFF, 0x0600, 0x1800, 0x6000]),
            (16, [0xFFFF, 0x0C00, 0x3000, 0xC000]),
            (20, [0xFFFFF, 0x0C000, 0x30000, 0xC0000]),
        ],
    },
    Profile {
        id: "CFG3",
        description: "ways unequally divided, overlapping access for higher classes",
        tables: [
            (11, [0x7FF, 0x7F0, 0x700, 0x600]),
            (12, [0xFFF, 0xFF0, 0xF00, 0xC00]),
            (15, [0x7FFF, 0x7F00, 0x7000, 0x6000]),
            (16, [0xFFFF, 0xFF00, 0xF000, 0xC000]),
            (20, [0xFFFFF, 0xFF000, 0xF0000, 0xC0000]),
        ],
    },
];

/// pqos needs this many L3 classes for any profile (`PROFILES_MIN_COS`).
const MIN_CLASSES: u32 = 4;

/// The text of `pqos -H`, as pqos's `profile_l3ca_list()` prints it.
#[must_use]
pub fn list_text() -> String {
    let mut out = String::new();
    for (i, p) in PROFILES.iter().enumerate() {
        let _ = write!(
            out,
            "{})\n      Config ID: {}\n    Description: {}\n Configurations:\n",
            i + 1,
            p.id,
            p.description
        );
        for (ways, masks) in &p.tables {
            let _ = writeln!(
                out,
                "\tnumber of classes = {}, number of cache ways = {ways}",
                masks.len()
            );
        }
    }
    out
}

/// The `-e` items of profile `name` for this platform's L3 (`llc:0=0x7`, ...), or pqos's
/// error when there is no such profile, no L3 CAT, fewer than 4 classes or no table for
/// the CBM length.
///
/// # Errors
/// `Allocation profile '%s' not found or cache allocation not supported!`, with the reason.
pub fn class_defs(name: &str, caps: &Capabilities) -> Result<Vec<ClassDef>, String> {
    let fail = |why: String| {
        format!("Allocation profile '{name}' not found or cache allocation not supported! ({why})")
    };
    let Some(profile) = PROFILES.iter().find(|p| p.id.eq_ignore_ascii_case(name)) else {
        let ids: Vec<&str> = PROFILES.iter().map(|p| p.id).collect();
        return Err(fail(format!(
            "the profiles are {}; pqos -H lists them",
            ids.join(", ")
        )));
    };
    let Some(l3) = caps.l3_cat.get() else {
        return Err(fail("this platform has no L3 CAT".into()));
    };
    if l3.num_classes < MIN_CLASSES {
        return Err(fail(format!(
            "profiles need {MIN_CLASSES} L3 classes, this platform has {}",
            l3.num_classes
        )));
    }
    let Some((_, masks)) = profile.tables.iter().find(|(ways, _)| *ways == l3.cbm_len) else {
        let ways: Vec<String> = profile.tables.iter().map(|(w, _)| w.to_string()).collect();
        return Err(fail(format!(
            "{} has tables for {} cache ways, this L3 has {}",
            profile.id,
            ways.join(", "),
            l3.cbm_len
        )));
    };
    masks
        .iter()
        .enumerate()
        .map(|(cos, mask)| {
            format!("llc:{cos}={mask:#x}")
                .parse::<ClassDef>()
                .map_err(|e| e.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_matches_pqos_layout() {
        let text = list_text();
        assert!(text.starts_with(
            "1)\n      Config ID: CFG0\n    Description: non-overlapping, ways equally divided\n \
             Configurations:\n\tnumber of classes = 4, number of cache ways = 11\n"
        ));
        assert!(text.ends_with("\tnumber of classes = 4, number of cache ways = 20\n"));
        assert_eq!(text.matches("Config ID: CFG").count(), 4);
        assert_eq!(text.lines().count(), 4 * (4 + 5));
    }

    #[test]
    fn every_table_has_four_disjoint_or_documented_masks_within_its_ways() {
        for p in PROFILES {
            for (ways, masks) in p.tables {
                for m in masks {
                    assert!(m != 0 && m >> ways == 0, "{} {ways}: {m:#x}", p.id);
                    assert!(rdt_pqos::CacheBitmask::new(m).unwrap().is_contiguous());
                }
                let overlapping = masks
                    .iter()
                    .enumerate()
                    .any(|(i, a)| masks[i + 1..].iter().any(|b| a & b != 0));
                assert_eq!(
                    overlapping,
                    p.description.starts_with("overlapping") || p.id == "CFG3",
                    "{} {ways}",
                    p.id
                );
            }
        }
    }
}
