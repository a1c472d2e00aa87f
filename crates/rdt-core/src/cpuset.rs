//! Sets of logical CPUs in the kernel's list form (`0-3,8,10-11`) and mask form (`ff,ffffffff`).

use std::fmt;
use std::str::FromStr;

use crate::LogicalCpu;

/// The largest CPU number accepted in a list, as a guard against `0-4294967295` allocating
/// half a gigabyte. Linux's `NR_CPUS` maximum is 8192.
pub const MAX_CPU: u32 = 8191;

/// A CPU list or mask could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseCpuSetError {
    /// An element is neither `N` nor `N-M` with decimal N and M.
    #[error("`{token}` in CPU list `{list}` is not a CPU number or a range N-M")]
    BadToken {
        /// The whole list.
        list: String,
        /// The offending element.
        token: String,
    },
    /// A range's end is below its start (the kernel's `cpus_list` rejects these).
    #[error("range `{token}` in CPU list `{list}` ends before it starts")]
    Reversed {
        /// The whole list.
        list: String,
        /// The offending range.
        token: String,
    },
    /// A CPU number is above [`MAX_CPU`].
    #[error("CPU {cpu} in `{list}` is above the largest supported CPU number {MAX_CPU}")]
    TooLarge {
        /// The whole list.
        list: String,
        /// The offending number.
        cpu: u64,
    },
    /// A hex mask word is not hexadecimal.
    #[error("`{token}` in CPU mask `{mask}` is not hexadecimal")]
    BadMaskWord {
        /// The whole mask.
        mask: String,
        /// The offending comma-separated word.
        token: String,
    },
}

/// A set of logical CPUs.
///
/// `Display`/`FromStr` use the list form shared by the kernel's `cpus_list` files and pqos's
/// `CORE_LIST` (`0-3,8,10-11`). Display is canonical: sorted, runs merged, `""` when empty.
/// The kernel's hex-mask form of `cpus` files has its own constructor,
/// [`CpuSet::from_mask_str`], and formatter, [`CpuSet::to_mask_string`].
///
/// # Examples
/// ```
/// use rdt_core::{CpuSet, LogicalCpu};
/// let s: CpuSet = "8-10,2".parse().unwrap();
/// assert!(s.contains(LogicalCpu::new(9)));
/// assert_eq!(s.to_string(), "2,8-10");
/// assert_eq!(s.to_mask_string(), "704");
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet {
    /// Bit `n % 64` of word `n / 64` is CPU `n`. No trailing zero words.
    words: Vec<u64>,
}

impl CpuSet {
    /// The empty set.
    #[must_use]
    pub const fn new() -> Self {
        Self { words: Vec::new() }
    }

    /// Adds a CPU. Returns whether it was newly added.
    pub fn insert(&mut self, cpu: LogicalCpu) -> bool {
        let (w, b) = split(cpu.get());
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        let had = self.words[w] & b != 0;
        self.words[w] |= b;
        !had
    }

    /// Removes a CPU. Returns whether it was present.
    pub fn remove(&mut self, cpu: LogicalCpu) -> bool {
        let (w, b) = split(cpu.get());
        let had = self.words.get(w).is_some_and(|x| x & b != 0);
        if had {
            self.words[w] &= !b;
            self.trim();
        }
        had
    }

    /// Whether `cpu` is in the set.
    #[must_use]
    pub fn contains(&self, cpu: LogicalCpu) -> bool {
        let (w, b) = split(cpu.get());
        self.words.get(w).is_some_and(|x| x & b != 0)
    }

    /// Number of CPUs in the set.
    #[must_use]
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The lowest CPU, if any.
    #[must_use]
    pub fn first(&self) -> Option<LogicalCpu> {
        self.iter().next()
    }

    /// CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = LogicalCpu> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            let mut w = word;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let bit = w.trailing_zeros();
                w &= w - 1;
                Some(LogicalCpu::new(
                    u32::try_from(i).unwrap_or(u32::MAX) * 64 + bit,
                ))
            })
        })
    }

    /// Whether the two sets share a CPU.
    #[must_use]
    pub fn intersects(&self, other: &Self) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    /// Adds every CPU of `other`.
    pub fn union_with(&mut self, other: &Self) {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// Parses pqos's lenient list form (`strlisttotab` in pqos/main.c) with
    /// [`parse_pqos_list`] and [`ListLimits::CPUS`]: like `FromStr`, but empty elements are
    /// skipped, reversed ranges (`7-2`) are swapped and numbers may be hexadecimal (`0x1f`).
    ///
    /// # Errors
    /// [`ParseCpuSetError::BadToken`] or [`ParseCpuSetError::TooLarge`], naming the element.
    pub fn from_pqos_list(list: &str) -> Result<Self, ParseCpuSetError> {
        let ids = parse_pqos_list(list, &ListLimits::CPUS).map_err(|e| match e {
            ParsePqosListError::BadToken { list, token, .. } => {
                ParseCpuSetError::BadToken { list, token }
            }
            ParsePqosListError::TooLarge { list, value, .. } => {
                ParseCpuSetError::TooLarge { list, cpu: value }
            }
            // CPUS allows one entry per possible CPU: a list cannot exceed it without a
            // number above MAX_CPU, which is reported first.
            ParsePqosListError::TooMany { list, .. } => ParseCpuSetError::TooLarge {
                list,
                cpu: u64::from(MAX_CPU) + 1,
            },
        })?;
        Ok(ids
            .into_iter()
            .map(|n| LogicalCpu::new(u32::try_from(n).unwrap_or(MAX_CPU)))
            .collect())
    }

    /// Parses the kernel's hex-mask form of `cpus` files: comma-separated 32-bit words, most
    /// significant first (`ff,ffffffff` = CPUs 0-39). A trailing newline is accepted.
    ///
    /// # Errors
    /// [`ParseCpuSetError::BadMaskWord`] naming the word that is not hexadecimal.
    pub fn from_mask_str(mask: &str) -> Result<Self, ParseCpuSetError> {
        let mut set = Self::new();
        let text = mask.trim();
        if text.is_empty() {
            return Ok(set);
        }
        for (i, token) in text.rsplit(',').enumerate() {
            let word = u32::from_str_radix(token.trim(), 16).map_err(|_| {
                ParseCpuSetError::BadMaskWord {
                    mask: mask.into(),
                    token: token.into(),
                }
            })?;
            let base = u32::try_from(i * 32).map_err(|_| ParseCpuSetError::TooLarge {
                list: mask.into(),
                cpu: (i * 32) as u64,
            })?;
            for bit in 0..32 {
                if word & (1 << bit) != 0 {
                    set.insert(LogicalCpu::new(base + bit));
                }
            }
        }
        Ok(set)
    }

    /// Formats the kernel's hex-mask form: 32-bit words most significant first, the first
    /// without leading zeros, the others as 8 hex digits (`704`, `ff,ffffffff`). `"0"` when empty.
    #[must_use]
    pub fn to_mask_string(&self) -> String {
        let mut words32: Vec<u32> = self
            .words
            .iter()
            .flat_map(|&w| [(w & 0xffff_ffff) as u32, (w >> 32) as u32])
            .collect();
        while words32.len() > 1 && words32.last() == Some(&0) {
            words32.pop();
        }
        if words32.is_empty() {
            return "0".into();
        }
        let mut out = String::new();
        for (i, w) in words32.iter().rev().enumerate() {
            if i == 0 {
                out.push_str(&format!("{w:x}"));
            } else {
                out.push_str(&format!(",{w:08x}"));
            }
        }
        out
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }
}

/// The largest task id Linux can hand out: `pid_max` is at most 2^22 (`PID_MAX_LIMIT`,
/// `include/linux/threads.h`), and ids are below it.
pub const MAX_TASK_ID: u64 = 4_194_304;

/// What one use of pqos's list grammar accepts: the largest number and how many entries a
/// list may expand to (ranges included), and the noun for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListLimits {
    /// The largest number accepted.
    pub max_value: u64,
    /// The most distinct entries a list may expand to.
    pub max_entries: usize,
    /// What the numbers are, for messages (`"CPU"`, `"task id"`).
    pub what: &'static str,
}

impl ListLimits {
    /// Logical CPUs (pqos `CORE_LIST`): up to [`MAX_CPU`].
    pub const CPUS: Self = Self {
        max_value: MAX_CPU as u64,
        max_entries: MAX_CPU as usize + 1,
        what: "CPU",
    };
    /// Task ids (pqos `PID_LIST` of `-a pid:` and `-p`): up to [`MAX_TASK_ID`], and at most
    /// 262144 entries after expanding ranges (pqos/monitor.c caps PID ranges there).
    pub const TASKS: Self = Self {
        max_value: MAX_TASK_ID,
        max_entries: 262_144,
        what: "task id",
    };
    /// Resource ids after `@` in `-e` (sockets, L3 or L2 ids): pqos keeps at most 256.
    pub const RESOURCE_IDS: Self = Self {
        max_value: u32::MAX as u64 - 1,
        max_entries: 256,
        what: "resource id",
    };
}

/// A pqos list could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParsePqosListError {
    /// An element is neither `N` nor `N-M`.
    #[error(
        "`{token}` in {what} list `{list}` is not a number or a range N-M (numbers are decimal, or hexadecimal with 0x)"
    )]
    BadToken {
        /// What the numbers are.
        what: &'static str,
        /// The whole list.
        list: String,
        /// The offending element.
        token: String,
    },
    /// A number is above the limit.
    #[error("{what} {value} in `{list}` is above the largest allowed {what} {max}")]
    TooLarge {
        /// What the numbers are.
        what: &'static str,
        /// The whole list.
        list: String,
        /// The offending number.
        value: u64,
        /// The limit.
        max: u64,
    },
    /// The list expands to too many entries.
    #[error("`{list}` selects more than {max} {what}s")]
    TooMany {
        /// What the numbers are.
        what: &'static str,
        /// The whole list.
        list: String,
        /// The limit.
        max: usize,
    },
}

/// A number as pqos reads one (`strtouint64()` in pqos/main.c): decimal, or hexadecimal
/// with a `0x`/`0X` prefix; spaces around it are ignored, a sign is not a digit. The one
/// number parser of pqos's grammars (CPU, task and resource-id lists, class ids, masks' ids,
/// MBA values, intervals).
///
/// # Errors
/// [`ParseNumberError::NoDigits`] for an empty token or a bare `0x`,
/// [`ParseNumberError::NotANumber`] for any other character, [`ParseNumberError::TooLarge`]
/// above 2^64 − 1.
///
/// # Examples
/// ```
/// use rdt_core::{ParseNumberError, parse_number};
/// assert_eq!(parse_number(" 0xff "), Ok(255));
/// assert_eq!(parse_number("255"), Ok(255));
/// assert_eq!(parse_number("0x"), Err(ParseNumberError::NoDigits));
/// assert_eq!(parse_number("+5"), Err(ParseNumberError::NotANumber));
/// ```
pub fn parse_number(token: &str) -> Result<u64, ParseNumberError> {
    let t = token.trim();
    let (digits, radix) = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (t, 10),
    };
    if digits.is_empty() {
        return Err(ParseNumberError::NoDigits);
    }
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(ParseNumberError::NotANumber);
    }
    u64::from_str_radix(digits, radix).map_err(|_| ParseNumberError::TooLarge)
}

/// Why a token is not a number ([`parse_number`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseNumberError {
    /// Nothing after the optional `0x`.
    #[error("no digits")]
    NoDigits,
    /// A character that is not a digit of the radix.
    #[error("not a decimal or 0x-prefixed hexadecimal number")]
    NotANumber,
    /// More than 64 bits.
    #[error("larger than 2^64 - 1")]
    TooLarge,
}

fn parse_list_number(
    list: &str,
    token: &str,
    text: &str,
    limits: &ListLimits,
) -> Result<u64, ParsePqosListError> {
    let bad = || ParsePqosListError::BadToken {
        what: limits.what,
        list: list.into(),
        token: token.into(),
    };
    let too_large = |value| ParsePqosListError::TooLarge {
        what: limits.what,
        list: list.into(),
        value,
        max: limits.max_value,
    };
    let n = match parse_number(text) {
        Ok(n) => n,
        Err(ParseNumberError::TooLarge) => return Err(too_large(u64::MAX)),
        Err(_) => return Err(bad()),
    };
    if n > limits.max_value {
        return Err(too_large(n));
    }
    Ok(n)
}

/// pqos's list grammar (`strlisttotab()` in pqos/main.c), shared by CPU lists, task lists
/// and resource ids: comma-separated elements `N` or `N-M`; leading and trailing spaces and
/// empty elements are skipped, a reversed range (`7-2`) is swapped, numbers are decimal or
/// hexadecimal with `0x`; duplicates are dropped. The result is in first-mention order, as
/// pqos applies it.
///
/// # Errors
/// [`ParsePqosListError::BadToken`] for an element that is not a number or range,
/// [`ParsePqosListError::TooLarge`] for a number above `limits.max_value`,
/// [`ParsePqosListError::TooMany`] when the list expands beyond `limits.max_entries`.
///
/// # Examples
/// ```
/// use rdt_core::{ListLimits, parse_pqos_list};
/// assert_eq!(parse_pqos_list("8, 3-1,,0x2", &ListLimits::TASKS).unwrap(), [8, 1, 2, 3]);
/// assert!(parse_pqos_list("1-", &ListLimits::CPUS).is_err());
/// ```
pub fn parse_pqos_list(list: &str, limits: &ListLimits) -> Result<Vec<u64>, ParsePqosListError> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for token in list.split(',') {
        if token.trim().is_empty() {
            continue;
        }
        let (lo, hi) = match token.trim().split_once('-') {
            None => {
                let n = parse_list_number(list, token, token, limits)?;
                (n, n)
            }
            Some((a, b)) => {
                let a = parse_list_number(list, token, a, limits)?;
                let b = parse_list_number(list, token, b, limits)?;
                (a.min(b), a.max(b))
            }
        };
        let too_many = || ParsePqosListError::TooMany {
            what: limits.what,
            list: list.into(),
            max: limits.max_entries,
        };
        // Refuse before expanding: `0-4194304` must not allocate first and complain after.
        if usize::try_from(hi - lo)
            .ok()
            .is_none_or(|n| n >= limits.max_entries)
        {
            return Err(too_many());
        }
        for n in lo..=hi {
            if seen.insert(n) {
                if out.len() == limits.max_entries {
                    return Err(too_many());
                }
                out.push(n);
            }
        }
    }
    Ok(out)
}

fn split(cpu: u32) -> (usize, u64) {
    ((cpu / 64) as usize, 1u64 << (cpu % 64))
}

fn parse_cpu(list: &str, token: &str, text: &str) -> Result<u32, ParseCpuSetError> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseCpuSetError::BadToken {
            list: list.into(),
            token: token.into(),
        });
    }
    let n: u64 = t.parse().map_err(|_| ParseCpuSetError::TooLarge {
        list: list.into(),
        cpu: u64::MAX,
    })?;
    if n > u64::from(MAX_CPU) {
        return Err(ParseCpuSetError::TooLarge {
            list: list.into(),
            cpu: n,
        });
    }
    Ok(u32::try_from(n).unwrap_or(MAX_CPU))
}

/// The kernel's strict list form: no empty elements, no reversed ranges, decimal only.
fn parse_list(list: &str) -> Result<CpuSet, ParseCpuSetError> {
    let mut set = CpuSet::new();
    let text = list.trim();
    if text.is_empty() {
        return Ok(set);
    }
    for token in text.split(',') {
        if token.trim().is_empty() {
            return Err(ParseCpuSetError::BadToken {
                list: list.into(),
                token: token.into(),
            });
        }
        let (lo, hi) = match token.split_once('-') {
            None => {
                let n = parse_cpu(list, token, token)?;
                (n, n)
            }
            Some((a, b)) => {
                let a = parse_cpu(list, token, a)?;
                let b = parse_cpu(list, token, b)?;
                if a <= b {
                    (a, b)
                } else {
                    return Err(ParseCpuSetError::Reversed {
                        list: list.into(),
                        token: token.into(),
                    });
                }
            }
        };
        for cpu in lo..=hi {
            set.insert(LogicalCpu::new(cpu));
        }
    }
    Ok(set)
}

impl FromStr for CpuSet {
    type Err = ParseCpuSetError;

    /// Parses the kernel's list form (`0-3,8`); a trailing newline is accepted.
    fn from_str(s: &str) -> Result<Self, ParseCpuSetError> {
        parse_list(s)
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut it = self.iter().map(LogicalCpu::get).peekable();
        while let Some(start) = it.next() {
            let mut end = start;
            while it.peek() == Some(&(end + 1)) {
                end += 1;
                it.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl FromIterator<LogicalCpu> for CpuSet {
    fn from_iter<I: IntoIterator<Item = LogicalCpu>>(iter: I) -> Self {
        let mut s = Self::new();
        for c in iter {
            s.insert(c);
        }
        s
    }
}

impl Extend<LogicalCpu> for CpuSet {
    fn extend<I: IntoIterator<Item = LogicalCpu>>(&mut self, iter: I) {
        for c in iter {
            self.insert(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parses_kernel_cpus_list_with_newline() {
        let s: CpuSet = "0-3,8,10-11\n".parse().unwrap();
        assert_eq!(s.len(), 7);
        assert_eq!(s.to_string(), "0-3,8,10-11");
    }

    #[test]
    fn parses_kernel_cpus_mask() {
        let s = CpuSet::from_mask_str("ff,ffffffff\n").unwrap();
        assert_eq!(s.to_string(), "0-39");
        assert_eq!(s.to_mask_string(), "ff,ffffffff");
        assert_eq!(CpuSet::new().to_mask_string(), "0");
    }

    #[test]
    fn rejects_malformed_lists_naming_the_token() {
        for (list, token) in [("2-", "2-"), ("7-2x", "7-2x"), ("1,,2", ""), ("a", "a")] {
            match list.parse::<CpuSet>() {
                Err(ParseCpuSetError::BadToken { token: t, .. }) => assert_eq!(t, token, "{list}"),
                other => panic!("{list}: {other:?}"),
            }
        }
        assert!(matches!(
            "7-2".parse::<CpuSet>(),
            Err(ParseCpuSetError::Reversed { .. })
        ));
        assert!(matches!(
            "99999".parse::<CpuSet>(),
            Err(ParseCpuSetError::TooLarge { .. })
        ));
    }

    #[test]
    fn pqos_list_swaps_reversed_and_skips_empty() {
        let s = CpuSet::from_pqos_list("7-5,,1").unwrap();
        assert_eq!(s.to_string(), "1,5-7");
        assert!(CpuSet::from_pqos_list("2-").is_err());
    }

    #[test]
    fn pqos_list_accepts_hex_keeps_mention_order_and_dedups() {
        assert_eq!(
            parse_pqos_list(" 5,0x2-1 ,5,,", &ListLimits::TASKS).unwrap(),
            [5, 1, 2]
        );
        assert_eq!(
            parse_pqos_list("", &ListLimits::CPUS).unwrap(),
            Vec::<u64>::new()
        );
        let s = CpuSet::from_pqos_list("0x3,1").unwrap();
        assert_eq!(s.to_string(), "1,3");
    }

    #[test]
    fn pqos_list_limits_are_per_use() {
        // arrange: a PID beyond every CPU number
        let pid = "4194304";
        // act / assert
        assert_eq!(
            parse_pqos_list(pid, &ListLimits::TASKS).unwrap(),
            [4_194_304]
        );
        assert!(matches!(
            parse_pqos_list(pid, &ListLimits::CPUS),
            Err(ParsePqosListError::TooLarge {
                value: 4_194_304,
                max: 8191,
                ..
            })
        ));
        assert!(matches!(
            parse_pqos_list("4194305", &ListLimits::TASKS),
            Err(ParsePqosListError::TooLarge { .. })
        ));
        // pqos's 262144-entry cap on PID ranges, refused before expanding
        let e = parse_pqos_list("1-262145", &ListLimits::TASKS).unwrap_err();
        assert!(
            matches!(e, ParsePqosListError::TooMany { max: 262_144, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("more than 262144 task ids"), "{e}");
        assert_eq!(
            parse_pqos_list("1-262144", &ListLimits::TASKS)
                .unwrap()
                .len(),
            262_144
        );
        let e = parse_pqos_list("1-200000,300000-400000", &ListLimits::TASKS).unwrap_err();
        assert!(matches!(e, ParsePqosListError::TooMany { .. }), "{e}");
    }

    #[test]
    fn pqos_list_errors_name_the_token_and_the_rule() {
        let e = parse_pqos_list("1,2-x", &ListLimits::TASKS).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`2-x` in task id list `1,2-x` is not a number or a range N-M (numbers are decimal, or hexadecimal with 0x)"
        );
        assert!(parse_pqos_list("0x", &ListLimits::CPUS).is_err());
        assert!(parse_pqos_list("-3", &ListLimits::CPUS).is_err());
        assert!(parse_pqos_list("99999999999999999999999", &ListLimits::CPUS).is_err());
    }

    /// CPU lists (`cpus_list`, pqos `CORE_LIST`), masks (`cpus`) and pqos's number lists:
    /// any text parses or is an error quoting it, never a panic or a huge allocation (`0-4294967295`).
    #[test]
    fn fuzz_cpu_lists_and_masks_never_panic_and_errors_quote_the_text() {
        use crate::fake::fuzz::{fuzz, names_a_token, text};
        const WORDS: &[&str] = &[
            "0",
            "1",
            "-",
            ",",
            "\n",
            " ",
            "0x",
            "4294967295",
            "8191",
            "ffffffff",
        ];
        fuzz("CpuSet::from_str", text(WORDS, 12), |t| {
            if let Err(e) = t.parse::<CpuSet>() {
                prop_assert!(
                    names_a_token(&e.to_string(), &t, &[',', '-']),
                    "{e} for {t:?}"
                );
            }
            Ok(())
        });
        fuzz("CpuSet::from_mask_str", text(WORDS, 12), |t| {
            if let Err(e) = CpuSet::from_mask_str(&t) {
                prop_assert!(names_a_token(&e.to_string(), &t, &[',']), "{e} for {t:?}");
            }
            Ok(())
        });
        fuzz("parse_pqos_list", text(WORDS, 12), |t| {
            for limits in [&ListLimits::CPUS, &ListLimits::TASKS] {
                if let Err(e) = parse_pqos_list(&t, limits) {
                    prop_assert!(
                        names_a_token(&e.to_string(), &t, &[',', '-']),
                        "{e} for {t:?}"
                    );
                }
            }
            Ok(())
        });
    }

    proptest! {
        #[test]
        fn list_and_mask_round_trip(cpus in proptest::collection::btree_set(0u32..300, 0..40)) {
            let s: CpuSet = cpus.iter().copied().map(LogicalCpu::new).collect();
            prop_assert_eq!(s.to_string().parse::<CpuSet>().unwrap(), s.clone());
            prop_assert_eq!(CpuSet::from_mask_str(&s.to_mask_string()).unwrap(), s.clone());
            prop_assert_eq!(s.len(), cpus.len());
        }
    }
}
