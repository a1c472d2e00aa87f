//! Placement: from cache sizes (ways, percent, masks) to capacity bitmasks for one cache level
//! in one domain.

use super::CacheSize;
use rdt_core::{CacheBitmask, CatCaps, CatResource, LimitError};

/// One class's request for one cache level in one domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PlaceRequest<'a> {
    /// The class's name, for errors.
    pub class: &'a str,
    /// How much (see [`CacheSize`]).
    pub size: CacheSize,
    /// Whether the class may overlap other classes (`shared = true`).
    pub shared: bool,
}

/// Cache sizes that cannot be turned into masks ([`place`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("class {:?}: {}", self.class(), self.reason())]
#[non_exhaustive]
pub enum PlaceError {
    /// No contiguous block of `wanted` free ways is left.
    DoesNotFit {
        /// The class.
        class: String,
        /// The cache level.
        resource: CatResource,
        /// Ways asked for.
        wanted: u32,
        /// Ways free for this class (not taken by classes outside the configuration, not
        /// held by an earlier non-shared class, not shareable), in any position.
        free: u32,
        /// The longest contiguous run of those free ways.
        largest_free: u32,
        /// Length of the capacity bitmask.
        cbm_len: u32,
    },
    /// The class would fit only by using the ways other agents (I/O, GPU) share
    /// ([`CatCaps::shareable_bits`]); a non-shared class is never placed there.
    NeedsShareable {
        /// The class.
        class: String,
        /// The cache level.
        resource: CatResource,
        /// Ways asked for.
        wanted: u32,
        /// Free ways outside the shareable ones.
        free: u32,
        /// The shareable ways.
        shareable: u64,
    },
    /// Two non-shared classes were given masks that share ways.
    OverlappingExclusive {
        /// The cache level.
        resource: CatResource,
        /// The earlier class.
        first: String,
        /// Its mask.
        first_mask: CacheBitmask,
        /// The later class (the one the error is about).
        second: String,
        /// Its mask.
        second_mask: CacheBitmask,
    },
    /// A mask uses ways held by classes outside the configuration.
    OverlapsTaken {
        /// The class.
        class: String,
        /// The cache level.
        resource: CatResource,
        /// Its mask.
        mask: CacheBitmask,
        /// The ways taken outside the configuration.
        taken: u64,
    },
    /// A way count below the CBM's minimum ([`CatCaps::min_cbm_bits`], and at least 1).
    TooFewWays {
        /// The class.
        class: String,
        /// The cache level.
        resource: CatResource,
        /// Ways asked for.
        ways: u32,
        /// The minimum.
        min: u32,
    },
    /// A given mask the CBM cannot hold: too wide, not contiguous where the CPU needs that,
    /// or too few bits.
    Mask {
        /// The class.
        class: String,
        /// Why.
        reason: LimitError,
    },
}

impl PlaceError {
    /// The class the error is about (for [`PlaceError::OverlappingExclusive`], the later
    /// one).
    #[must_use]
    pub fn class(&self) -> &str {
        match self {
            Self::DoesNotFit { class, .. }
            | Self::NeedsShareable { class, .. }
            | Self::OverlapsTaken { class, .. }
            | Self::TooFewWays { class, .. }
            | Self::Mask { class, .. } => class,
            Self::OverlappingExclusive { second, .. } => second,
        }
    }

    /// The message without the class.
    pub(super) fn reason(&self) -> String {
        match self {
            Self::DoesNotFit {
                resource,
                wanted,
                cbm_len,
                ..
            } if wanted > cbm_len => {
                format!("wanted {wanted} {resource} ways, but the {resource} CBM has {cbm_len}")
            }
            Self::DoesNotFit {
                resource,
                wanted,
                free,
                largest_free,
                ..
            } => format!(
                "wanted {wanted} contiguous {resource} ways, but {free} are free (the largest \
                 free block has {largest_free})"
            ),
            Self::NeedsShareable {
                resource,
                wanted,
                free,
                shareable,
                ..
            } => format!(
                "wanted {wanted} contiguous {resource} ways, but only {free} are free outside \
                 the shareable ways {shareable:#x} (used by I/O and other agents), where \
                 non-shared classes are not placed"
            ),
            Self::OverlappingExclusive {
                resource,
                first,
                first_mask,
                second_mask,
                ..
            } => format!(
                "overlapping exclusive classes: {resource} mask {second_mask:#x} shares ways {:#x} \
                 with class {first:?}'s mask {first_mask:#x}; mark one shared = true or change \
                 the masks",
                second_mask.bits() & first_mask.bits()
            ),
            Self::OverlapsTaken {
                resource,
                mask,
                taken,
                ..
            } => format!(
                "{resource} mask {mask:#x} overlaps ways {:#x} held by classes outside the \
                 configuration",
                mask.bits() & taken
            ),
            Self::TooFewWays {
                resource,
                ways,
                min,
                ..
            } => format!("{ways} {resource} ways, but a class needs at least {min}"),
            Self::Mask { reason, .. } => reason.to_string(),
        }
    }
}

/// `n` low bits set (`n` ≤ 64).
const fn low(n: u32) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

/// The highest block of `n` contiguous ways below `cbm_len` that avoids `avoid`.
fn highest_block(n: u32, cbm_len: u32, avoid: u64) -> Option<u64> {
    if n == 0 || n > cbm_len {
        return None;
    }
    (0..=cbm_len - n)
        .rev()
        .map(|shift| low(n) << shift)
        .find(|block| block & avoid == 0)
}

/// The longest run of set bits.
fn longest_run(mut bits: u64) -> u32 {
    let mut best = 0;
    while bits != 0 {
        bits >>= bits.trailing_zeros();
        let run = bits.trailing_ones();
        if run > best {
            best = run;
        }
        bits = bits.checked_shr(run).unwrap_or(0);
    }
    best
}

/// Turns the cache sizes of one level in one domain into capacity bitmasks, one per
/// request, in the order given.
///
/// - [`CacheSize::Mask`]: kept as given. It must fit the CBM (width, contiguity unless the
///   CPU takes sparse masks, at least `min_cbm_bits` ways) and stay out of `taken`; two
///   non-shared classes whose masks overlap are an error naming both.
/// - [`CacheSize::Ways`] and [`CacheSize::Percent`] (see [`CacheSize::ways`]), in order: a
///   non-shared class gets the highest contiguous block of that many ways that avoids
///   `taken`, the masks of the non-shared classes (given or placed before it) and the
///   shareable ways ([`CatCaps::shareable_bits`]). On a 20-way CBM, 11 ways give `0xffe00`
///   and 4 more ways after it give `0x1e0`. A shared class gets the highest block that avoids
///   `taken` and, when it can, the shareable ways; it may overlap any class of the
///   configuration.
///
/// `taken` holds the ways of classes outside the configuration that nothing here may use
/// (in bits of the CBM; bits above it are ignored).
///
/// # Errors
/// [`PlaceError::DoesNotFit`] (how many ways were wanted and how many are free),
/// [`PlaceError::NeedsShareable`], [`PlaceError::OverlappingExclusive`],
/// [`PlaceError::OverlapsTaken`], [`PlaceError::TooFewWays`] (fewer than
/// `max(1, min_cbm_bits)`), [`PlaceError::Mask`].
///
/// # Examples
/// ```
/// use rdt_core::CatResource;
/// use rdt_config::{CacheSize, PlaceRequest, place};
/// # let cat = rdt_core::CatCaps { cbm_len: 20, shareable_bits: 0, num_classes: 16,
/// #     cdp_supported: false, cdp_enabled: false, non_contiguous_cbm: false, io_rdt: false,
/// #     min_cbm_bits: 1 };
/// // `cat`: a 20-way L3 CBM.
/// let req = |class, size| PlaceRequest { class, size, shared: false };
/// let masks = place(
///     CatResource::L3,
///     &cat,
///     &[req("pipeline", CacheSize::Ways(11)), req("batch", CacheSize::Ways(4))],
///     0,
/// )?;
/// assert_eq!(masks.iter().map(|m| m.bits()).collect::<Vec<_>>(), [0xffe00, 0x1e0]);
/// # Ok::<(), rdt_config::PlaceError>(())
/// ```
pub fn place(
    resource: CatResource,
    cat: &CatCaps,
    requests: &[PlaceRequest<'_>],
    taken: u64,
) -> Result<Vec<CacheBitmask>, PlaceError> {
    let cbm_len = cat.cbm_len.min(64);
    let full = low(cbm_len);
    let taken = taken & full;
    let shareable = cat.shareable_bits & full;
    let min = cat.min_cbm_bits.max(1);
    let mut out: Vec<Option<CacheBitmask>> = vec![None; requests.len()];

    // Given masks first: the sized classes are placed around them.
    let mut exclusive = 0u64;
    let mut owners: Vec<(&str, CacheBitmask)> = Vec::new();
    for (slot, r) in out.iter_mut().zip(requests) {
        let CacheSize::Mask(mask) = r.size else {
            continue;
        };
        let bad = |reason| PlaceError::Mask {
            class: r.class.to_owned(),
            reason,
        };
        if mask.bits() & !full != 0 {
            return Err(bad(LimitError::MaskTooWide {
                resource,
                mask,
                cbm_len,
                max: full,
            }));
        }
        if !cat.non_contiguous_cbm && !mask.is_contiguous() {
            return Err(bad(LimitError::NonContiguous { resource, mask }));
        }
        if mask.ways() < cat.min_cbm_bits {
            return Err(bad(LimitError::TooFewBits {
                resource,
                mask,
                min: cat.min_cbm_bits,
            }));
        }
        if mask.bits() & taken != 0 {
            return Err(PlaceError::OverlapsTaken {
                class: r.class.to_owned(),
                resource,
                mask,
                taken,
            });
        }
        if !r.shared {
            if let Some((first, first_mask)) =
                owners.iter().find(|(_, m)| m.bits() & mask.bits() != 0)
            {
                return Err(PlaceError::OverlappingExclusive {
                    resource,
                    first: (*first).to_owned(),
                    first_mask: *first_mask,
                    second: r.class.to_owned(),
                    second_mask: mask,
                });
            }
            owners.push((r.class, mask));
            exclusive |= mask.bits();
        }
        *slot = Some(mask);
    }

    for (slot, r) in out.iter_mut().zip(requests) {
        if slot.is_some() {
            continue;
        }
        let wanted = r.size.ways(cat);
        if wanted < min {
            return Err(PlaceError::TooFewWays {
                class: r.class.to_owned(),
                resource,
                ways: wanted,
                min,
            });
        }
        let avoid = if r.shared { taken } else { taken | exclusive };
        let block = highest_block(wanted, cbm_len, avoid | shareable);
        let block = match block {
            Some(b) => b,
            None if r.shared => highest_block(wanted, cbm_len, avoid)
                .ok_or_else(|| does_not_fit(r, resource, cbm_len, wanted, full & !avoid))?,
            None => {
                let free = full & !(avoid | shareable);
                if highest_block(wanted, cbm_len, avoid).is_some() {
                    return Err(PlaceError::NeedsShareable {
                        class: r.class.to_owned(),
                        resource,
                        wanted,
                        free: free.count_ones(),
                        shareable,
                    });
                }
                return Err(does_not_fit(r, resource, cbm_len, wanted, free));
            }
        };
        if !r.shared {
            exclusive |= block;
        }
        // `block` is not zero: `wanted` ≥ 1.
        *slot = CacheBitmask::new(block).ok();
    }
    Ok(out.into_iter().flatten().collect())
}

fn does_not_fit(
    r: &PlaceRequest<'_>,
    resource: CatResource,
    cbm_len: u32,
    wanted: u32,
    free: u64,
) -> PlaceError {
    PlaceError::DoesNotFit {
        class: r.class.to_owned(),
        resource,
        wanted,
        free: free.count_ones(),
        largest_free: longest_run(free),
        cbm_len,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn cat(cbm_len: u32, shareable_bits: u64, min_cbm_bits: u32) -> CatCaps {
        CatCaps {
            cbm_len,
            shareable_bits,
            num_classes: 16,
            cdp_supported: false,
            cdp_enabled: false,
            non_contiguous_cbm: false,
            io_rdt: false,
            min_cbm_bits,
        }
    }

    fn req(class: &str, size: CacheSize) -> PlaceRequest<'_> {
        PlaceRequest {
            class,
            size,
            shared: false,
        }
    }

    fn shared(class: &str, size: CacheSize) -> PlaceRequest<'_> {
        PlaceRequest {
            class,
            size,
            shared: true,
        }
    }

    fn mask(bits: u64) -> CacheSize {
        CacheSize::Mask(CacheBitmask::new(bits).unwrap())
    }

    fn bits(masks: &[CacheBitmask]) -> Vec<u64> {
        masks.iter().map(|m| m.bits()).collect()
    }

    #[test]
    fn ways_pack_from_the_highest_way_down() {
        // arrange
        let requests = [
            req("pipeline", CacheSize::Ways(11)),
            req("batch", CacheSize::Ways(4)),
        ];
        // act
        let masks = place(CatResource::L3, &cat(20, 0, 1), &requests, 0).unwrap();
        // assert
        assert_eq!(bits(&masks), [0xffe00, 0x1e0]);
    }

    #[test]
    fn percent_rounds_to_ways_and_packs_like_ways() {
        let requests = [
            req("a", CacheSize::Percent(55)),
            req("b", CacheSize::Percent(1)),
        ];
        let masks = place(CatResource::L3, &cat(20, 0, 2), &requests, 0).unwrap();
        // 55% of 20 = 11 ways; 1% of 20 rounds to 0, raised to min_cbm_bits = 2.
        assert_eq!(bits(&masks), [0xffe00, 0x180]);
    }

    #[test]
    fn shareable_ways_are_avoided() {
        let masks = place(
            CatResource::L3,
            &cat(20, 0xc0000, 1),
            &[req("a", CacheSize::Ways(11)), req("b", CacheSize::Ways(4))],
            0,
        )
        .unwrap();
        assert_eq!(bits(&masks), [0x3ff80, 0x78]);
    }

    #[test]
    fn a_class_that_fits_only_in_the_shareable_ways_is_an_error_saying_so() {
        let e = place(
            CatResource::L3,
            &cat(20, 0xc0000, 1),
            &[req("a", CacheSize::Ways(19))],
            0,
        )
        .unwrap_err();
        assert_eq!(
            e,
            PlaceError::NeedsShareable {
                class: "a".into(),
                resource: CatResource::L3,
                wanted: 19,
                free: 18,
                shareable: 0xc0000,
            }
        );
        assert!(e.to_string().contains("shareable ways 0xc0000"), "{e}");
    }

    #[test]
    fn given_masks_stay_and_sized_classes_go_around_them_and_taken_ways() {
        let masks = place(
            CatResource::L3,
            &cat(20, 0, 1),
            &[
                req("sized", CacheSize::Ways(4)),
                req("fixed", mask(0xf0000)),
            ],
            0x0f000,
        )
        .unwrap();
        assert_eq!(bits(&masks), [0xf00, 0xf0000]);
    }

    #[test]
    fn does_not_fit_says_how_many_ways_were_wanted_and_free() {
        let e = place(
            CatResource::L2,
            &cat(12, 0, 1),
            &[req("a", CacheSize::Ways(8)), req("b", CacheSize::Ways(5))],
            0x1,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "class \"b\": wanted 5 contiguous L2 ways, but 3 are free (the largest free block has 3)"
        );
        let e = place(
            CatResource::L3,
            &cat(12, 0, 1),
            &[req("a", CacheSize::Ways(13))],
            0,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "class \"a\": wanted 13 L3 ways, but the L3 CBM has 12"
        );
    }

    #[test]
    fn overlapping_given_masks_of_exclusive_classes_are_an_error_naming_both() {
        let e = place(
            CatResource::L3,
            &cat(20, 0, 1),
            &[req("a", mask(0xf)), req("b", mask(0x3c))],
            0,
        )
        .unwrap_err();
        assert_eq!(e.class(), "b");
        let text = e.to_string();
        assert!(text.contains("overlapping exclusive classes"), "{text}");
        assert!(text.contains("\"a\"") && text.contains("\"b\""), "{text}");
        assert!(text.contains("shares ways 0xc"), "{text}");
    }

    #[test]
    fn shared_classes_may_overlap() {
        let masks = place(
            CatResource::L3,
            &cat(20, 0, 1),
            &[
                req("a", CacheSize::Ways(11)),
                shared("b", CacheSize::Ways(4)),
                shared("c", mask(0x3)),
                req("d", mask(0x3)),
            ],
            0,
        )
        .unwrap();
        assert_eq!(bits(&masks), [0xffe00, 0xf0000, 0x3, 0x3]);
    }

    #[test]
    fn a_shared_class_still_avoids_shareable_and_taken_ways_when_it_can() {
        let c = cat(20, 0xc0000, 1);
        let masks = place(
            CatResource::L3,
            &c,
            &[shared("s", CacheSize::Ways(4))],
            0x30000,
        )
        .unwrap();
        assert_eq!(bits(&masks), [0xf000]);
        // It cannot avoid the shareable ways: it uses them (it is shared), never `taken`.
        let masks = place(
            CatResource::L3,
            &c,
            &[shared("s", CacheSize::Ways(18))],
            0x3,
        )
        .unwrap();
        assert_eq!(bits(&masks), [0xffffc]);
    }

    #[test]
    fn fewer_ways_than_the_minimum_is_an_error() {
        let e = place(
            CatResource::L3,
            &cat(20, 0, 2),
            &[req("a", CacheSize::Ways(1))],
            0,
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                PlaceError::TooFewWays {
                    ways: 1,
                    min: 2,
                    ..
                }
            ),
            "{e:?}"
        );
        let e = place(CatResource::L3, &cat(20, 0, 2), &[req("a", mask(0x1))], 0).unwrap_err();
        assert!(
            matches!(
                e,
                PlaceError::Mask {
                    reason: LimitError::TooFewBits { .. },
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn given_masks_are_checked_against_the_cbm_and_the_taken_ways() {
        let c = cat(20, 0, 1);
        let e = place(CatResource::L3, &c, &[req("a", mask(0x10_0000))], 0).unwrap_err();
        assert!(matches!(
            e,
            PlaceError::Mask {
                reason: LimitError::MaskTooWide { .. },
                ..
            }
        ));
        let e = place(CatResource::L3, &c, &[req("a", mask(0x5))], 0).unwrap_err();
        assert!(matches!(
            e,
            PlaceError::Mask {
                reason: LimitError::NonContiguous { .. },
                ..
            }
        ));
        let e = place(CatResource::L3, &c, &[shared("a", mask(0x3))], 0x1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "class \"a\": L3 mask 0x3 overlaps ways 0x1 held by classes outside the configuration"
        );
    }

    #[test]
    fn a_64_way_cbm_is_handled() {
        let masks = place(
            CatResource::L3,
            &cat(64, 0, 1),
            &[req("a", CacheSize::Ways(64))],
            0,
        )
        .unwrap();
        assert_eq!(bits(&masks), [u64::MAX]);
    }

    #[test]
    fn longest_run_counts() {
        assert_eq!(longest_run(0), 0);
        assert_eq!(longest_run(0b1110_0110), 3);
        assert_eq!(longest_run(u64::MAX), 64);
    }

    /// A request: `Ok(ways)` sized, `Err((shift, ways))` a given contiguous mask.
    fn any_request() -> impl Strategy<Value = (Result<u32, (u32, u32)>, bool)> {
        (
            prop_oneof![
                3 => (1u32..=12).prop_map(Ok),
                1 => (0u32..64, 1u32..=6).prop_map(Err),
            ],
            prop::bool::weighted(0.2),
        )
    }

    proptest! {
        #[test]
        fn placed_exclusive_masks_are_contiguous_disjoint_and_the_size_asked(
            cbm_len in 1u32..=64,
            shareable in any::<u64>(),
            taken in any::<u64>(),
            reqs in prop::collection::vec(any_request(), 0..8),
        ) {
            let full = low(cbm_len);
            // Sparse random bits would leave no room: keep them as one or two small runs.
            let shareable = shareable & full & (low(2) << (cbm_len.saturating_sub(2)));
            let taken = taken & full & !(low(cbm_len / 2));
            let c = cat(cbm_len, shareable, 1);
            let names: Vec<String> = (0..reqs.len()).map(|i| format!("c{i}")).collect();
            let requests: Vec<PlaceRequest<'_>> = reqs
                .iter()
                .zip(&names)
                .map(|((size, shared), class)| PlaceRequest {
                    class,
                    size: match *size {
                        Ok(ways) => CacheSize::Ways(ways),
                        Err((shift, ways)) => CacheSize::Mask(
                            CacheBitmask::new(((low(ways) << shift) & full).max(1)).unwrap(),
                        ),
                    },
                    shared: *shared,
                })
                .collect();
            if let Ok(masks) = place(CatResource::L3, &c, &requests, taken) {
                prop_assert_eq!(masks.len(), requests.len());
                let mut seen = 0u64;
                for (r, m) in requests.iter().zip(&masks) {
                    prop_assert_eq!(m.bits() & !full, 0);
                    prop_assert_eq!(m.bits() & taken, 0, "{} overlaps taken", r.class);
                    if let CacheSize::Ways(n) = r.size {
                        prop_assert!(m.is_contiguous());
                        prop_assert_eq!(m.ways(), n);
                        if !r.shared {
                            prop_assert_eq!(m.bits() & shareable, 0);
                        }
                    } else {
                        prop_assert_eq!(CacheSize::Mask(*m), r.size);
                    }
                    if !r.shared {
                        prop_assert_eq!(seen & m.bits(), 0, "{} overlaps", r.class);
                        seen |= m.bits();
                    }
                }
            }
        }

        #[test]
        fn sized_exclusive_classes_that_add_up_to_the_cbm_always_fit(
            cbm_len in 1u32..=64,
            cuts in prop::collection::vec(1u32..=64, 0..8),
        ) {
            // Split the CBM into runs: packing from the top must place them all.
            let mut left = cbm_len;
            let mut sizes = Vec::new();
            for c in cuts {
                let n = c.min(left);
                if n == 0 { break; }
                sizes.push(n);
                left -= n;
            }
            let names: Vec<String> = (0..sizes.len()).map(|i| format!("c{i}")).collect();
            let requests: Vec<_> = sizes
                .iter()
                .zip(&names)
                .map(|(&n, class)| req(class, CacheSize::Ways(n)))
                .collect();
            let masks = place(CatResource::L3, &cat(cbm_len, 0, 1), &requests, 0).unwrap();
            let union = masks.iter().fold(0, |a, m| a | m.bits());
            prop_assert_eq!(union.count_ones(), sizes.iter().sum::<u32>());
        }
    }
}
