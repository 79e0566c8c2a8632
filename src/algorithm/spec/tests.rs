//! The numeric helpers against libm and the scripts' rounding.

use super::*;
use proptest::prelude::*;

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits()
}

#[test]
fn floor_and_ceil_are_libm_s_at_the_edges() {
    let two52 = 4_503_599_627_370_496.0_f64;
    for x in [
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.0,
        -1.0,
        0.999_999_999,
        -0.999_999_999,
        1e-300,
        -1e-300,
        two52 - 0.5,
        -(two52 - 0.5),
        two52,
        -two52,
        two52 + 2.0,
        1e300,
        -1e300,
        (1u64 << 48) as f64 + 0.25,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        assert!(same(floor(x), x.floor()), "floor({x})");
        assert!(same(ceil(x), x.ceil()), "ceil({x})");
        let luas_ms = if x <= 0.0 { 0 } else { x.ceil() as i64 };
        assert_eq!(
            (ms(x), units(x)),
            (luas_ms, x.floor().max(0.0) as i64),
            "{x}"
        );
    }
}

proptest! {
    #[test]
    fn floor_and_ceil_are_libm_s(bits in any::<u64>()) {
        let x = f64::from_bits(bits);
        prop_assume!(!x.is_nan());
        prop_assert!(same(floor(x), x.floor()), "floor({x})");
        prop_assert!(same(ceil(x), x.ceil()), "ceil({x})");
    }

    #[test]
    fn ms_and_units_round_as_the_script(bits in any::<u64>()) {
        let x = f64::from_bits(bits);
        let luas_ms = if x <= 0.0 { 0 } else { x.ceil() as i64 };
        prop_assert_eq!(ms(x), luas_ms, "ms({})", x);
        prop_assert_eq!(units(x), x.floor().max(0.0) as i64, "units({})", x);
    }

    #[test]
    fn floor_and_ceil_match_on_decision_sized_numbers(x in -1e16f64..1e16) {
        prop_assert!(same(floor(x), x.floor()), "floor({x})");
        prop_assert!(same(ceil(x), x.ceil()), "ceil({x})");
    }
}
