//! The kernel's string primitives that resctrl's parsers are built on, byte for byte:
//! `kstrto*` (lib/kstrtox.c), `strim`/`strsep` (lib/string.c), and the bitmap parsers and
//! printers behind `cpus` and `cpus_list` (lib/bitmap-str.c, lib/vsprintf.c).
//!
//! Errors are errno values (`EINVAL`, `ERANGE`, `EOVERFLOW`), as the kernel returns them.

use rdt_core::{CpuSet, LogicalCpu};

use super::errno::{EINVAL, EOVERFLOW, ERANGE};

/// The kernel's `isspace` (lib/ctype.c): space, `\t`, `\n`, `\v`, `\f`, `\r`, and Latin-1
/// no-break space (0xA0).
pub(crate) const fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0xa0)
}

/// `strim`: `s` without leading and trailing whitespace.
pub(crate) fn strim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&c| !is_space(c)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|&c| !is_space(c))
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

/// `strsep(&s, delim)` with one delimiter: the token before the first `delim`, and the rest
/// after it (`None` when there was no delimiter, as `strsep` sets the string to NULL).
pub(crate) fn strsep(s: &[u8], delim: u8) -> (&[u8], Option<&[u8]>) {
    match s.iter().position(|&c| c == delim) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    }
}

fn digit(c: u8) -> Option<u32> {
    match c {
        b'0'..=b'9' => Some(u32::from(c - b'0')),
        b'a'..=b'f' => Some(u32::from(c - b'a') + 10),
        b'A'..=b'F' => Some(u32::from(c - b'A') + 10),
        _ => None,
    }
}

/// `_parse_integer_fixup_radix`: resolves base 0 (`0x` hex, leading `0` octal, else decimal)
/// and skips a `0x` prefix in base 16.
fn fixup_radix(s: &[u8], base: u32) -> (&[u8], u32) {
    let lower = |i: usize| s.get(i).map(u8::to_ascii_lowercase);
    let mut base = base;
    if base == 0 {
        base = if s.first() == Some(&b'0') {
            if lower(1) == Some(b'x') && s.get(2).is_some_and(u8::is_ascii_hexdigit) {
                16
            } else {
                8
            }
        } else {
            10
        };
    }
    if base == 16 && s.first() == Some(&b'0') && lower(1) == Some(b'x') {
        return (&s[2..], base);
    }
    (s, base)
}

/// `_parse_integer`: digits consumed, the value, and whether it overflowed 64 bits.
fn parse_integer(s: &[u8], base: u32) -> (usize, u64, bool) {
    let mut value: u64 = 0;
    let mut overflow = false;
    let mut n = 0;
    for &c in s {
        let Some(d) = digit(c).filter(|&d| d < base) else {
            break;
        };
        match value
            .checked_mul(u64::from(base))
            .and_then(|v| v.checked_add(u64::from(d)))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
        n += 1;
    }
    (n, value, overflow)
}

/// `_kstrtoull`: the whole string must be the number, with one optional trailing `\n`.
fn kstrtoull_inner(s: &[u8], base: u32) -> Result<u64, i32> {
    let (s, base) = fixup_radix(s, base);
    let (n, value, overflow) = parse_integer(s, base);
    if overflow {
        return Err(ERANGE);
    }
    if n == 0 {
        return Err(EINVAL);
    }
    let rest = &s[n..];
    let rest = rest.strip_prefix(b"\n").unwrap_or(rest);
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(EINVAL)
    }
}

/// `kstrtoull` / `kstrtoul` (64-bit): optional leading `+`, base 0 autodetects.
pub(crate) fn kstrtoul(s: &[u8], base: u32) -> Result<u64, i32> {
    kstrtoull_inner(s.strip_prefix(b"+").unwrap_or(s), base)
}

/// `kstrtouint` / `kstrtou32`.
pub(crate) fn kstrtou32(s: &[u8], base: u32) -> Result<u32, i32> {
    u32::try_from(kstrtoul(s, base)?).map_err(|_| ERANGE)
}

/// `kstrtoint`: like `kstrtoll` (a leading `-` allowed) narrowed to `int`.
pub(crate) fn kstrtoint(s: &[u8], base: u32) -> Result<i32, i32> {
    let v: i64 = if let Some(abs) = s.strip_prefix(b"-") {
        let t = kstrtoull_inner(abs, base)?;
        0i64.checked_sub_unsigned(t).ok_or(ERANGE)?
    } else {
        i64::try_from(kstrtoul(s, base)?).map_err(|_| ERANGE)?
    };
    i32::try_from(v).map_err(|_| ERANGE)
}

/// The kernel's `strchrnul`-bounded view: everything before the first `\n`.
fn before_newline(s: &[u8]) -> &[u8] {
    strsep(s, b'\n').0
}

const fn end_of_region(c: u8) -> bool {
    is_space(c) || c == b','
}

/// `bitmap_parse` as `cpumask_parse` calls it: comma- (or space-) separated 32-bit hex
/// chunks, most significant first, for an `nbits`-bit mask. Non-hex → EINVAL; a chunk of
/// more than 8 digits, more chunks than the mask holds, or a bit at or above `nbits` →
/// EOVERFLOW.
pub(crate) fn bitmap_parse(buf: &[u8], nbits: u32) -> Result<CpuSet, i32> {
    let s = before_newline(buf);
    let max_chunks = nbits.div_ceil(32);
    let mut chunks: Vec<u32> = Vec::new();
    // `end` is one past the last unconsumed byte, scanning backwards.
    let mut end = s.len();
    loop {
        while end > 0 && end_of_region(s[end - 1]) {
            end -= 1;
        }
        if end == 0 {
            break;
        }
        if u32::try_from(chunks.len()).unwrap_or(u32::MAX) >= max_chunks {
            return Err(EOVERFLOW);
        }
        let mut value: u32 = 0;
        let mut i = 0;
        loop {
            let Some(d) = digit(s[end - 1]) else {
                return Err(EINVAL);
            };
            value |= d << i;
            end -= 1;
            i += 4;
            if end == 0 || end_of_region(s[end - 1]) {
                break;
            }
            if i == 32 {
                // bitmap_get_x32_reverse: a ninth hex digit overflows the chunk; any other
                // ninth character is consumed (so `0x12345678` reads as two chunks).
                if digit(s[end - 1]).is_some() {
                    return Err(EOVERFLOW);
                }
                end -= 1;
                break;
            }
        }
        chunks.push(value);
    }
    let mut set = CpuSet::new();
    for (k, chunk) in chunks.iter().enumerate() {
        for bit in 0..32 {
            if chunk & (1 << bit) != 0 {
                let cpu = u32::try_from(k).unwrap_or(u32::MAX) * 32 + bit;
                if cpu >= nbits {
                    return Err(EOVERFLOW);
                }
                set.insert(LogicalCpu::new(cpu));
            }
        }
    }
    Ok(set)
}

/// `bitmap_getnum`: a decimal number, or `N` for the last bit.
fn getnum(s: &[u8], lastbit: u32) -> Result<(u32, &[u8]), i32> {
    if s.first() == Some(&b'N') {
        return Ok((lastbit, &s[1..]));
    }
    let (n, value, overflow) = parse_integer(s, 10);
    if n == 0 {
        return Err(EINVAL);
    }
    let value = u32::try_from(value)
        .ok()
        .filter(|_| !overflow)
        .ok_or(EOVERFLOW)?;
    Ok((value, &s[n..]))
}

const fn end_of_str(c: Option<u8>) -> bool {
    matches!(c, None | Some(b'\n'))
}

fn region_end(c: Option<u8>) -> bool {
    end_of_str(c) || c.is_some_and(end_of_region)
}

/// `bitmap_parselist` as `cpulist_parse` calls it: `a`, `a-b`, `a-b:used/group`, `all`, `N`
/// (the last CPU), separated by commas or spaces. Syntax → EINVAL; a number beyond 32 bits
/// → EOVERFLOW; a region reaching `nbits` → ERANGE.
pub(crate) fn bitmap_parselist(buf: &[u8], nbits: u32) -> Result<CpuSet, i32> {
    let lastbit = nbits.saturating_sub(1);
    let mut set = CpuSet::new();
    let mut s = buf;
    loop {
        while s.first().is_some_and(|&c| end_of_region(c)) {
            s = &s[1..];
        }
        if end_of_str(s.first().copied()) {
            return Ok(set);
        }
        let (start, end, rest) = if s.len() >= 3 && s[..3].eq_ignore_ascii_case(b"all") {
            (0, lastbit, &s[3..])
        } else {
            let (start, rest) = getnum(s, lastbit)?;
            if region_end(rest.first().copied()) {
                (start, start, rest)
            } else if rest.first() == Some(&b'-') {
                let (end, rest) = getnum(&rest[1..], lastbit)?;
                (start, end, rest)
            } else {
                return Err(EINVAL);
            }
        };
        let (off, group, rest) = if region_end(rest.first().copied()) {
            (end.wrapping_add(1), end.wrapping_add(1), rest)
        } else if rest.first() == Some(&b':') {
            let (off, rest) = getnum(&rest[1..], lastbit)?;
            if rest.first() != Some(&b'/') {
                return Err(EINVAL);
            }
            let (group, rest) = getnum(&rest[1..], lastbit)?;
            (off, group, rest)
        } else {
            return Err(EINVAL);
        };
        // bitmap_check_region
        if start > end || group == 0 || off > group {
            return Err(EINVAL);
        }
        if end >= nbits {
            return Err(ERANGE);
        }
        let mut base = start;
        while base <= end {
            let len = (end - base + 1).min(off);
            for cpu in base..base + len {
                set.insert(LogicalCpu::new(cpu));
            }
            match base.checked_add(group) {
                Some(b) => base = b,
                None => break,
            }
        }
        s = rest;
    }
}

/// `%*pb` with `nbits` bits: lowercase hex in comma-separated 32-bit chunks, most significant
/// first, zero-padded (the first chunk to the digits its bits need): 8 bits `ff`, 16 bits
/// `0001`, 40 bits `ff,ffffffff`.
pub(crate) fn bitmap_string(set: &CpuSet, nbits: u32) -> String {
    let chunk_of = |k: u32| -> u32 {
        (0..32)
            .filter(|b| set.contains(LogicalCpu::new(k * 32 + b)))
            .fold(0, |acc, b| acc | (1 << b))
    };
    let nbits = nbits.max(1);
    let chunks = nbits.div_ceil(32);
    let first_bits = match nbits % 32 {
        0 => 32,
        r => r,
    };
    let mut out = String::new();
    for k in (0..chunks).rev() {
        let width = if k == chunks - 1 {
            first_bits.div_ceil(4) as usize
        } else {
            out.push(',');
            8
        };
        out.push_str(&format!("{:0width$x}", chunk_of(k)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(list: &str) -> CpuSet {
        list.parse().unwrap()
    }

    #[test]
    fn strim_removes_kernel_whitespace_on_both_sides() {
        assert_eq!(strim(b"  L3 \t\n"), b"L3");
        assert_eq!(strim(b" \n "), b"");
    }

    #[test]
    fn kstrtoul_accepts_plus_prefix_and_one_trailing_newline_only() {
        assert_eq!(kstrtoul(b"+0x1F\n", 16), Ok(0x1f));
        assert_eq!(kstrtoul(b"0X00c", 16), Ok(0xc));
        assert_eq!(kstrtoul(b"12\n\n", 10), Err(EINVAL));
        assert_eq!(kstrtoul(b" 1", 10), Err(EINVAL));
        assert_eq!(kstrtoul(b"", 10), Err(EINVAL));
        assert_eq!(kstrtoul(b"0x", 16), Err(EINVAL));
        assert_eq!(kstrtoul(b"fffffffffffffffff", 16), Err(ERANGE));
    }

    #[test]
    fn kstrtoint_base_zero_reads_hex_octal_and_negative() {
        assert_eq!(kstrtoint(b"0x1f", 0), Ok(31));
        assert_eq!(kstrtoint(b"017", 0), Ok(15));
        assert_eq!(kstrtoint(b"-5", 0), Ok(-5));
        assert_eq!(kstrtoint(b"09", 0), Err(EINVAL));
        assert_eq!(kstrtoint(b"4294967296", 0), Err(ERANGE));
        assert_eq!(kstrtou32(b"4294967295", 10), Ok(u32::MAX));
        assert_eq!(kstrtou32(b"4294967296", 10), Err(ERANGE));
    }

    #[test]
    fn bitmap_parse_reads_chunks_from_the_right_and_rejects_bits_past_the_end() {
        assert_eq!(bitmap_parse(b"f0\n", 8), Ok(set("4-7")));
        assert_eq!(bitmap_parse(b"ff,0000000f", 40), Ok(set("0-3,32-39")));
        assert_eq!(bitmap_parse(b"", 8), Ok(CpuSet::new()));
        assert_eq!(bitmap_parse(b"\n", 8), Ok(CpuSet::new()));
        assert_eq!(bitmap_parse(b"100", 8), Err(EOVERFLOW));
        assert_eq!(bitmap_parse(b"1,00000000", 8), Err(EOVERFLOW));
        assert_eq!(bitmap_parse(b"123456789", 64), Err(EOVERFLOW));
        assert_eq!(bitmap_parse(b"0xf", 8), Err(EINVAL));
        assert_eq!(bitmap_parse(b"g", 8), Err(EINVAL));
    }

    #[test]
    fn bitmap_parselist_reads_ranges_patterns_and_n() {
        assert_eq!(
            bitmap_parselist(b"0-3,8 10-11\n", 16),
            Ok(set("0-3,8,10-11"))
        );
        assert_eq!(bitmap_parselist(b"0-7:2/4", 8), Ok(set("0-1,4-5")));
        assert_eq!(bitmap_parselist(b"N", 8), Ok(set("7")));
        assert_eq!(bitmap_parselist(b"all", 4), Ok(set("0-3")));
        assert_eq!(bitmap_parselist(b"", 8), Ok(CpuSet::new()));
        assert_eq!(bitmap_parselist(b"9", 8), Err(ERANGE));
        assert_eq!(bitmap_parselist(b"3-1", 8), Err(EINVAL));
        assert_eq!(bitmap_parselist(b"1x", 8), Err(EINVAL));
        assert_eq!(bitmap_parselist(b"99999999999", 8), Err(EOVERFLOW));
    }

    #[test]
    fn bitmap_string_pads_every_chunk_like_the_kernel() {
        assert_eq!(bitmap_string(&set("0-7"), 8), "ff");
        assert_eq!(bitmap_string(&set("0"), 16), "0001");
        assert_eq!(bitmap_string(&set("0-39"), 40), "ff,ffffffff");
        assert_eq!(bitmap_string(&CpuSet::new(), 72), "00,00000000,00000000");
        assert_eq!(bitmap_string(&set("0-63"), 64), "ffffffff,ffffffff");
    }
}
