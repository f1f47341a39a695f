//! Typed bit fields for packed atomic words.
//!
//! Lock-free structures keep several small values (an index, a generation, a state) in one
//! `AtomicU64` so that a single compare-and-swap moves all of them at once. Hand-written shifts and
//! masks for such words drift apart silently when a width changes; here each word is described by
//! a chain of [`Field`]s, each declaring only its width, and every shift and mask is derived:
//!
//! ```text
//! const STATE: Field = Field::first(8);       // bits 0..8
//! const GENERATION: Field = STATE.next(32);   // bits 8..40, starts where STATE ends
//! ```
//!
//! Construction is `const` and checks (at compile time, for `const` items) that every field is at
//! least one bit wide and ends within 64 bits. Widths may also be chosen at run time (tests use a
//! deliberately narrow generation so that exhaustion is reached inside a test).

/// One bit field of a packed `u64`: `width` bits starting at bit `shift`.
///
/// Invariant: `1 <= width` and `shift + width <= 64`, so [`Field::max`] and [`Field::mask`] never
/// overflow and `shift < 64` for every shift performed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    shift: u32,
    width: u32,
}

impl Field {
    /// The field of `width` bits starting at bit 0.
    ///
    /// # Panics
    ///
    /// If `width` is 0 or more than 64 (a compile error when evaluated in a `const`).
    pub(crate) const fn first(width: u32) -> Field {
        Field::at(0, width)
    }

    /// The field of `width` bits starting where `self` ends.
    ///
    /// # Panics
    ///
    /// If `width` is 0 or the new field would end past bit 64 (a compile error in a `const`).
    pub(crate) const fn next(self, width: u32) -> Field {
        Field::at(self.end(), width)
    }

    const fn at(shift: u32, width: u32) -> Field {
        assert!(width >= 1, "a field is at least one bit wide");
        assert!(
            width <= 64 && shift <= 64 - width,
            "a field must end within 64 bits"
        );
        Field { shift, width }
    }

    /// The first bit after this field: where [`Field::next`] starts.
    pub(crate) const fn end(self) -> u32 {
        self.shift + self.width
    }

    /// The largest value the field holds: `2^width - 1`.
    pub(crate) const fn max(self) -> u64 {
        u64::MAX >> (64 - self.width)
    }

    /// The field's bits in place within the word.
    pub(crate) const fn mask(self) -> u64 {
        self.max() << self.shift
    }

    /// The field's value in `word`.
    #[inline]
    pub(crate) const fn get(self, word: u64) -> u64 {
        (word >> self.shift) & self.max()
    }

    /// `word` with this field replaced by `value`; every other bit is unchanged.
    ///
    /// `value` must fit (`value <= self.max()`); this is checked in debug builds, and in release
    /// builds the excess high bits are dropped rather than spilling into the neighbouring field.
    #[inline]
    pub(crate) const fn set(self, word: u64, value: u64) -> u64 {
        debug_assert!(value <= self.max(), "value does not fit the field");
        (word & !self.mask()) | ((value & self.max()) << self.shift)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: Field = Field::first(8);
    const B: Field = A.next(24);
    const C: Field = B.next(32);
    const _: () = assert!(C.end() == 64);

    #[test]
    fn fields_chain_without_gaps_or_overlap() {
        assert_eq!((A.shift, A.width, A.end()), (0, 8, 8));
        assert_eq!((B.shift, B.width, B.end()), (8, 24, 32));
        assert_eq!((C.shift, C.width, C.end()), (32, 32, 64));
        assert_eq!(A.mask() | B.mask() | C.mask(), u64::MAX);
        assert_eq!(A.mask() & B.mask(), 0);
        assert_eq!(B.mask() & C.mask(), 0);
        assert_eq!(B.max(), (1 << 24) - 1);
        assert_eq!(B.mask(), 0x0000_0000_ffff_ff00);
    }

    #[test]
    fn extreme_widths() {
        let one = Field::first(1);
        assert_eq!((one.max(), one.mask()), (1, 1));
        let full = Field::first(64);
        assert_eq!((full.max(), full.mask()), (u64::MAX, u64::MAX));
        assert_eq!(full.get(full.set(0, u64::MAX)), u64::MAX);
        let top = Field::first(63).next(1);
        assert_eq!(top.mask(), 1 << 63);
        assert_eq!(top.set(0, 1), 1 << 63);
        assert_eq!(top.get(u64::MAX), 1);
    }

    #[test]
    fn set_get_leaves_neighbours_alone() {
        let w = C.set(B.set(A.set(0, 0xab), 0x12_3456), 0xdead_beef);
        assert_eq!(w, 0xdead_beef_1234_56ab);
        assert_eq!(
            (A.get(w), B.get(w), C.get(w)),
            (0xab, 0x12_3456, 0xdead_beef)
        );
        let w2 = B.set(w, 0);
        assert_eq!(w2, 0xdead_beef_0000_00ab);
    }

    #[test]
    #[should_panic(expected = "at least one bit")]
    fn zero_width_is_refused() {
        let _ = Field::first(0);
    }

    #[test]
    #[should_panic(expected = "within 64 bits")]
    fn overflowing_chain_is_refused() {
        let _ = Field::first(40).next(25);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "does not fit")]
    fn oversized_value_is_caught_in_debug() {
        let _ = Field::first(3).set(0, 8);
    }

    /// A chain of 1..=6 fields with random widths (narrow ones included) that fits in 64 bits.
    fn chain() -> impl Strategy<Value = Vec<Field>> {
        proptest::collection::vec(1u32..=20, 1..=6).prop_map(|widths| {
            let mut fields: Vec<Field> = Vec::new();
            for w in widths {
                let end = fields.last().map_or(0, |f| f.end());
                if end + w > 64 {
                    break;
                }
                fields.push(match fields.last() {
                    None => Field::first(w),
                    Some(f) => f.next(w),
                });
            }
            fields
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 256 }))]

        #[test]
        fn set_then_get_round_trips(
            fields in chain(),
            word in any::<u64>(),
            pick in any::<prop::sample::Index>(),
            raw in any::<u64>(),
        ) {
            let f = fields[pick.index(fields.len())];
            let value = raw & f.max();
            let out = f.set(word, value);
            prop_assert_eq!(f.get(out), value);
            for g in &fields {
                if *g != f {
                    prop_assert_eq!(g.get(out), g.get(word));
                }
            }
            // Bits outside every field are untouched too.
            let all = fields.iter().fold(0, |m, g| m | g.mask());
            prop_assert_eq!(out & !all, word & !all);
        }
    }
}
