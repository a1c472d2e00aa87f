//! What every ACPI table shares: the 36-byte System Description Table header, the 4-byte
//! sub-table header of the RDT tables (`type: u16, length: u16`, ACPICA's
//! `acpi_subtbl_hdr_16`), and [`Bytes`], the one bounds-checked little-endian reader every
//! parser of this crate goes through, so that no read of a table can index past its end.
//!
//! # References
//! - ACPI Specification 6.5, 5.2.6 "System Description Table Header".
//! - ACPICA `include/acpi/actbl1.h` (`struct acpi_subtbl_hdr_16`).

use std::fmt;

/// Length of the ACPI System Description Table header, in bytes.
pub const HEADER_LEN: usize = 36;

/// The largest table this crate reads, in bytes (1 MiB). The tables it parses describe a
/// few domains, ranges and devices: a real ERDT of a two-socket part is a few KiB.
pub const MAX_TABLE_LEN: usize = 1 << 20;

/// The common header of an ACPI table (ACPI 6.5, 5.2.6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcpiHeader {
    /// Four ASCII characters (`ERDT`, `MRRM`, `IRDT`).
    pub signature: [u8; 4],
    /// Length of the whole table including this header, in bytes.
    pub length: u32,
    /// Revision of the table's layout.
    pub revision: u8,
    /// Whether all bytes of the table sum to zero modulo 256. Linux only warns about a bad
    /// checksum (`acpi_tb_verify_checksum`), and so does this crate: a table is checked by its
    /// lengths, not trusted by its checksum.
    pub checksum_ok: bool,
    /// OEM id (6 bytes, space padded).
    pub oem_id: [u8; 6],
    /// OEM table id (8 bytes).
    pub oem_table_id: [u8; 8],
    /// OEM revision.
    pub oem_revision: u32,
    /// Vendor id of the tool that made the table.
    pub creator_id: u32,
    /// Revision of that tool.
    pub creator_revision: u32,
}

/// What is wrong with a table, at the place [`TableError`] names.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// A field or structure reaches past the end of the bytes available to it.
    Truncated {
        /// Bytes the field or structure needs from its offset.
        need: u64,
        /// Bytes there are from that offset to the end of its parent.
        have: u64,
    },
    /// A length field is smaller than the structure's fixed part.
    TooShort {
        /// The length field.
        length: u64,
        /// The fixed part's size.
        min: u64,
    },
    /// A structure's length does not fit its own rule (a whole number of entries).
    BadLength {
        /// The length field.
        length: u64,
        /// The rule it broke.
        rule: &'static str,
    },
    /// The table's signature is not the one asked for.
    Signature {
        /// What the bytes say.
        found: [u8; 4],
    },
    /// The file holds more bytes than the header's length.
    Trailing {
        /// The header's length.
        length: u64,
        /// The file's size.
        size: u64,
    },
    /// The table is larger than [`MAX_TABLE_LEN`].
    TooLarge {
        /// The header's length.
        length: u64,
    },
    /// A structure's type is not the one allowed at this place.
    Type {
        /// The type found.
        found: u16,
        /// What the place allows.
        expected: &'static str,
    },
    /// A value breaks a rule of the specification.
    Value {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The rule.
        rule: &'static str,
    },
    /// A structure that may appear once appears again.
    Duplicate {
        /// What is duplicated (a sub-table, a domain id).
        what: String,
        /// Offset of the first one.
        first: usize,
    },
    /// Two address ranges overlap.
    Overlap {
        /// Offset of the other structure.
        other: usize,
        /// What overlaps.
        what: &'static str,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated { need, have } => {
                write!(f, "truncated: needs {need} bytes, only {have} remain")
            }
            Self::TooShort { length, min } => {
                write!(
                    f,
                    "length {length} is less than the {min} bytes of its fixed part"
                )
            }
            Self::BadLength { length, rule } => write!(f, "length {length}: {rule}"),
            Self::Signature { found } => {
                write!(f, "signature is \"{}\"", found.escape_ascii())
            }
            Self::Trailing { length, size } => write!(
                f,
                "the header says {length} bytes but the file holds {size}"
            ),
            Self::TooLarge { length } => write!(
                f,
                "length {length} is more than the {MAX_TABLE_LEN} bytes this reader accepts"
            ),
            Self::Type { found, expected } => {
                write!(f, "type {found} where {expected} is expected")
            }
            Self::Value { field, value, rule } => write!(f, "{field} = {value:#x}: {rule}"),
            Self::Duplicate { what, first } => {
                write!(f, "a second {what} (the first is at byte {first:#x})")
            }
            Self::Overlap { other, what } => {
                write!(f, "{what} overlaps the one at byte {other:#x}")
            }
        }
    }
}

/// A table that cannot be used: which table, which structure in it, at which byte offset
/// from the start of the table, and why. Displays as
/// `ERDT: MMRC at byte 0x9a: length 40 is less than the 56 bytes of its fixed part`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{table}: {structure} at byte {offset:#x}: {problem}")]
pub struct TableError {
    /// The table's signature (`ERDT`, `MRRM`, `IRDT`).
    pub table: &'static str,
    /// The structure (`header`, `RMDD`, `CACD`, `memory range entry`, `RCS`, ...).
    pub structure: &'static str,
    /// Offset of the structure or field from the start of the table, in bytes.
    pub offset: usize,
    /// What is wrong.
    pub problem: Problem,
}

/// A bounds-checked view of part of a table: every read names the structure it is for, and
/// a read past the view's end is a [`TableError`] at the absolute offset, never a panic.
#[derive(Clone, Copy, Debug)]
pub struct Bytes<'a> {
    table: &'static str,
    data: &'a [u8],
    /// Offset of `data[0]` from the start of the table.
    base: usize,
}

impl<'a> Bytes<'a> {
    /// A view of a whole table.
    #[must_use]
    pub const fn new(table: &'static str, data: &'a [u8]) -> Self {
        Self {
            table,
            data,
            base: 0,
        }
    }

    /// Bytes in the view.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the view is empty.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Offset of the view's first byte from the start of the table.
    #[must_use]
    pub const fn base(&self) -> usize {
        self.base
    }

    /// The error `problem` for `structure` at `offset` within this view.
    #[must_use]
    pub fn error(&self, structure: &'static str, offset: usize, problem: Problem) -> TableError {
        TableError {
            table: self.table,
            structure,
            offset: self.base.saturating_add(offset),
            problem,
        }
    }

    /// The sub-view `[offset, offset + len)`.
    ///
    /// # Errors
    /// [`Problem::Truncated`] when it reaches past the view.
    pub fn slice(
        &self,
        structure: &'static str,
        offset: usize,
        len: usize,
    ) -> Result<Self, TableError> {
        let have = self.data.len().saturating_sub(offset);
        match offset.checked_add(len) {
            Some(end) if end <= self.data.len() => Ok(Self {
                table: self.table,
                data: &self.data[offset..end],
                base: self.base + offset,
            }),
            _ => Err(self.error(
                structure,
                offset,
                Problem::Truncated {
                    need: len as u64,
                    have: have as u64,
                },
            )),
        }
    }

    /// The raw bytes `[offset, offset + N)`.
    ///
    /// # Errors
    /// [`Problem::Truncated`].
    pub fn array<const N: usize>(
        &self,
        structure: &'static str,
        offset: usize,
    ) -> Result<[u8; N], TableError> {
        let s = self.slice(structure, offset, N)?;
        let mut out = [0; N];
        out.copy_from_slice(s.data);
        Ok(out)
    }

    /// The byte at `offset`.
    ///
    /// # Errors
    /// [`Problem::Truncated`].
    pub fn u8(&self, structure: &'static str, offset: usize) -> Result<u8, TableError> {
        Ok(self.array::<1>(structure, offset)?[0])
    }

    /// The little-endian `u16` at `offset`.
    ///
    /// # Errors
    /// [`Problem::Truncated`].
    pub fn u16(&self, structure: &'static str, offset: usize) -> Result<u16, TableError> {
        Ok(u16::from_le_bytes(self.array(structure, offset)?))
    }

    /// The little-endian `u32` at `offset`.
    ///
    /// # Errors
    /// [`Problem::Truncated`].
    pub fn u32(&self, structure: &'static str, offset: usize) -> Result<u32, TableError> {
        Ok(u32::from_le_bytes(self.array(structure, offset)?))
    }

    /// The little-endian `u64` at `offset`.
    ///
    /// # Errors
    /// [`Problem::Truncated`].
    pub fn u64(&self, structure: &'static str, offset: usize) -> Result<u64, TableError> {
        Ok(u64::from_le_bytes(self.array(structure, offset)?))
    }

    /// The view's bytes.
    #[must_use]
    pub const fn as_slice(&self) -> &'a [u8] {
        self.data
    }
}

/// One sub-table found by [`sub_tables`]: its type, and a view of exactly its `length` bytes.
#[derive(Clone, Copy, Debug)]
pub struct SubTable<'a> {
    /// The `type` field.
    pub kind: u16,
    /// The whole sub-table, header included.
    pub bytes: Bytes<'a>,
}

/// The consecutive sub-tables with a 4-byte `type: u16, length: u16` header in `area`, in
/// table order: each header must lie inside `area`, each length cover at least the header,
/// and each sub-table end inside `area` (so sub-tables can neither overlap one another nor
/// reach past their parent). `parent` names the structure whose area it is. The iterator
/// ends after the first error, so a caller that checks each sub-table as it comes reports
/// the first problem in table order.
#[must_use]
pub const fn sub_tables<'a>(area: Bytes<'a>, parent: &'static str) -> SubTables<'a> {
    SubTables {
        area,
        parent,
        at: 0,
        failed: false,
    }
}

/// The iterator of [`sub_tables`].
#[derive(Debug)]
pub struct SubTables<'a> {
    area: Bytes<'a>,
    parent: &'static str,
    at: usize,
    failed: bool,
}

impl<'a> SubTables<'a> {
    fn next_one(&mut self) -> Result<SubTable<'a>, TableError> {
        let at = self.at;
        let head = self.area.slice(self.parent, at, 4)?;
        let kind = head.u16(self.parent, 0)?;
        let length = head.u16(self.parent, 2)?;
        let name = erdt_type_name(kind);
        if usize::from(length) < 4 {
            return Err(self.area.error(
                name,
                at,
                Problem::TooShort {
                    length: length.into(),
                    min: 4,
                },
            ));
        }
        let bytes = self.area.slice(name, at, length.into())?;
        self.at += usize::from(length);
        Ok(SubTable { kind, bytes })
    }
}

impl<'a> Iterator for SubTables<'a> {
    type Item = Result<SubTable<'a>, TableError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.area.len() {
            return None;
        }
        let r = self.next_one();
        self.failed = r.is_err();
        Some(r)
    }
}

/// The name of an ERDT sub-structure type (RDT architecture specification rev 1.3, ch. 4,
/// ERDT; ACPICA `enum acpi_erdt_type`), for errors.
#[must_use]
pub const fn erdt_type_name(kind: u16) -> &'static str {
    match kind {
        0 => "RMDD",
        1 => "CACD",
        2 => "DACD",
        3 => "CMRC",
        4 => "MMRC",
        5 => "MARC",
        6 => "CARC",
        7 => "CMRD",
        8 => "IBRD",
        9 => "IBAD",
        10 => "CARD",
        _ => "reserved sub-structure",
    }
}

/// Parses and checks the common header of table `signature` in `data`: the signature, the
/// length against the bytes there are (no fewer: truncated; no more: trailing bytes; at most
/// [`MAX_TABLE_LEN`]) and against `min_len` (the table's fixed part).
///
/// # Errors
/// [`TableError`] at `header`.
pub fn parse_header(
    signature: &'static str,
    data: &[u8],
    min_len: usize,
) -> Result<AcpiHeader, TableError> {
    let b = Bytes::new(signature, data);
    let found: [u8; 4] = b.array("header", 0)?;
    if found != signature.as_bytes()[..4] {
        return Err(b.error("header", 0, Problem::Signature { found }));
    }
    let length = b.u32("header", 4)?;
    let len = u64::from(length);
    if len > MAX_TABLE_LEN as u64 {
        return Err(b.error("header", 4, Problem::TooLarge { length: len }));
    }
    if len < min_len as u64 {
        return Err(b.error(
            "header",
            4,
            Problem::TooShort {
                length: len,
                min: min_len as u64,
            },
        ));
    }
    let size = data.len() as u64;
    if len > size {
        return Err(b.error(
            "header",
            4,
            Problem::Truncated {
                need: len,
                have: size,
            },
        ));
    }
    if len < size {
        return Err(b.error("header", 4, Problem::Trailing { length: len, size }));
    }
    let sum = data.iter().fold(0u8, |s, &x| s.wrapping_add(x));
    Ok(AcpiHeader {
        signature: found,
        length,
        revision: b.u8("header", 8)?,
        checksum_ok: sum == 0,
        oem_id: b.array("header", 10)?,
        oem_table_id: b.array("header", 16)?,
        oem_revision: b.u32("header", 24)?,
        creator_id: b.u32("header", 28)?,
        creator_revision: b.u32("header", 32)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_end_are_errors_at_the_absolute_offset() {
        let data = [1, 2, 3, 4, 5, 6, 7, 8];
        let b = Bytes::new("ERDT", &data);
        let s = b.slice("RMDD", 4, 4).unwrap();
        assert_eq!(s.u16("RMDD", 0).unwrap(), 0x0605);
        let e = s.u32("RMDD", 2).unwrap_err();
        assert_eq!(e.offset, 6);
        assert_eq!(e.problem, Problem::Truncated { need: 4, have: 2 });
        assert_eq!(
            e.to_string(),
            "ERDT: RMDD at byte 0x6: truncated: needs 4 bytes, only 2 remain"
        );
        assert!(b.slice("x", usize::MAX, 2).is_err());
        assert!(b.slice("x", 2, usize::MAX).is_err());
    }

    #[test]
    fn sub_tables_may_neither_overlap_nor_reach_past_the_parent() {
        // two sub-tables of 6 and 4 bytes
        let ok = [3, 0, 6, 0, 9, 9, 4, 0, 4, 0];
        let subs: Vec<_> = sub_tables(Bytes::new("ERDT", &ok), "RMDD")
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(subs.len(), 2);
        assert_eq!((subs[0].kind, subs[0].bytes.len()), (3, 6));
        assert_eq!((subs[1].kind, subs[1].bytes.base()), (4, 6));
        // the second claims 8 bytes where 4 remain
        let long = [3, 0, 6, 0, 9, 9, 4, 0, 8, 0];
        let all = |b: &[u8]| {
            sub_tables(Bytes::new("ERDT", b), "RMDD")
                .collect::<Result<Vec<_>, _>>()
                .map(|v| v.len())
        };
        let e = all(&long).unwrap_err();
        assert_eq!((e.structure, e.offset), ("MMRC", 6));
        // a length shorter than the header would loop for ever without the check
        let zero = [3, 0, 0, 0];
        let e = all(&zero).unwrap_err();
        assert_eq!(e.problem, Problem::TooShort { length: 0, min: 4 });
        // a header cut short
        let e = all(&[3, 0, 6]).unwrap_err();
        assert_eq!(e.offset, 0);
    }

    #[test]
    fn the_header_length_must_match_the_bytes() {
        let mut t = vec![0u8; 40];
        t[..4].copy_from_slice(b"MRRM");
        t[4..8].copy_from_slice(&40u32.to_le_bytes());
        let h = parse_header("MRRM", &t, 36).unwrap();
        assert_eq!(h.length, 40);
        assert!(!h.checksum_ok || t.iter().map(|&x| u32::from(x)).sum::<u32>() % 256 == 0);
        let e = parse_header("ERDT", &t, 36).unwrap_err();
        assert!(matches!(e.problem, Problem::Signature { .. }), "{e}");
        let e = parse_header("MRRM", &t[..39], 36).unwrap_err();
        assert_eq!(e.problem, Problem::Truncated { need: 40, have: 39 });
        t.push(0);
        let e = parse_header("MRRM", &t, 36).unwrap_err();
        assert_eq!(
            e.problem,
            Problem::Trailing {
                length: 40,
                size: 41
            }
        );
        let e = parse_header("MRRM", &t[..41], 64).unwrap_err();
        assert_eq!(
            e.problem,
            Problem::TooShort {
                length: 40,
                min: 64
            }
        );
        assert!(parse_header("MRRM", &t[..3], 36).is_err());
    }
}
