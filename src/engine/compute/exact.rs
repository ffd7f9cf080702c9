//! Results of integer arithmetic rounded once: the quotient of two integers
//! and the square root of one, each as the `f64` nearest the exact value
//! (ties to even). Reductions of integers use them so a mean or a standard
//! deviation of 64-bit values is exact before its one rounding, where
//! float arithmetic would round every sum.

/// `num / den` rounded once to the nearest `f64`; NaN when `den` is 0.
pub(crate) fn ratio(num: i128, den: u128) -> f64 {
    if den == 0 {
        return f64::NAN;
    }
    let magnitude = match i64::try_from(num) {
        // Both exact as doubles: one division, rounded once.
        Ok(n) if n.unsigned_abs() < 1 << 53 && den < 1 << 53 => n.unsigned_abs() as f64 / den as f64,
        _ => rounded(num.unsigned_abs(), den, false, |q| q),
    };
    if num < 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// `sqrt(num / den)` rounded once to the nearest `f64`; NaN when `den` is 0.
pub(crate) fn sqrt_ratio(num: u128, den: u128) -> f64 {
    if den == 0 {
        return f64::NAN;
    }
    rounded(num, den, true, u128::isqrt)
}

/// `f(num / den)` rounded once, for `f` the identity or the integer square
/// root: the quotient is taken to at least 56 bits (110, an even number of
/// them past the point, for a root), so `f` of its integer part keeps at
/// least 55, and a sticky bit below them marks any inexact remainder: the
/// one conversion to `f64` then rounds as the exact value would.
fn rounded(num: u128, den: u128, root: bool, f: impl Fn(u128) -> u128) -> f64 {
    if num == 0 {
        return 0.0;
    }
    let (q, exp, inexact) = quotient(num, den, if root { 110 } else { 56 }, root);
    let value = f(q);
    let inexact = inexact || (root && value * value != q);
    let exp = if root { exp / 2 } else { exp };
    let mantissa = (value << 1) | u128::from(inexact);
    ldexp(mantissa as f64, exp - 1)
}

/// `num / den` as `(q, e, inexact)`: `num / den = (q + f) * 2^e` with
/// `f` in `[0, 1)`, `q` of `bits + 1` or `bits + 2` bits, `e` even when
/// `even`, and `inexact` when `f > 0`.
fn quotient(num: u128, den: u128, bits: u32, even: bool) -> (u128, i32, bool) {
    let (mut q, mut r) = (num / den, num % den);
    let length = 128 - q.leading_zeros();
    if length > bits + 1 {
        let mut shift = length - bits - 1;
        if even && shift % 2 == 1 {
            shift += 1;
        }
        let lost = q & ((1u128 << shift) - 1);
        return (q >> shift, shift as i32, lost != 0 || r != 0);
    }
    // Long division, one bit of the fraction at a time (r < den, so 2r is
    // compared without overflow as r against den - r).
    let mut exp = 0i32;
    while q >> bits == 0 || (even && exp % 2 != 0) {
        q <<= 1;
        if r >= den - r {
            r -= den - r;
            q |= 1;
        } else {
            r <<= 1;
        }
        exp -= 1;
    }
    (q, exp, r != 0)
}

/// `x * 2^exp`, in steps that stay in range until the last.
fn ldexp(mut x: f64, mut exp: i32) -> f64 {
    while exp > 0 {
        let step = exp.min(1000);
        x *= f64::from_bits(((1023 + step) as u64) << 52);
        exp -= step;
    }
    while exp < 0 {
        let step = (-exp).min(1000);
        x *= f64::from_bits(((1023 - step) as u64) << 52);
        exp += step;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn quotients_round_once() {
        assert_eq!(ratio(1, 3), 1.0 / 3.0);
        assert_eq!(ratio(-7, 2), -3.5);
        assert_eq!(ratio(0, 5), 0.0);
        assert!(ratio(1, 0).is_nan());
        // 2^53 + 1 is not a double: as f64 then divided it rounds twice.
        let big = (1i128 << 53) + 1;
        assert_eq!(ratio(big * 3, 3), (1u64 << 53) as f64);
        // Exactly halfway between two doubles above 2^53, ties to even...
        assert_eq!(ratio((1i128 << 54) + 2, 2), (1u64 << 53) as f64);
        // ...and a hair above it rounds up, which a double sum cannot see.
        assert_eq!(ratio(((1i128 << 54) + 2) * 3 + 1, 6), ((1u64 << 53) + 2) as f64);
        assert_eq!(ratio(i128::MAX, 1), 2f64.powi(127));
    }

    #[test]
    fn roots_round_once() {
        assert_eq!(sqrt_ratio(4, 1), 2.0);
        assert_eq!(sqrt_ratio(1, 4), 0.5);
        assert_eq!(sqrt_ratio(2, 1), 2f64.sqrt());
        assert_eq!(sqrt_ratio(0, 1), 0.0);
        assert_eq!(sqrt_ratio(u128::MAX, 1), 2f64.powi(64));
        assert_eq!(sqrt_ratio(1, u128::MAX), 2f64.powi(-64));
    }

    proptest! {
        /// Against f64 where f64 is exact: quotients of small integers and
        /// roots of squares.
        #[test]
        fn agrees_with_exact_f64_arithmetic(a in -(1i64 << 52)..(1i64 << 52), b in 1u64..(1 << 20)) {
            prop_assert_eq!(ratio(a as i128, b as u128), a as f64 / b as f64);
            let s = a.unsigned_abs() as u128;
            prop_assert_eq!(sqrt_ratio(s * s, (b * b) as u128), s as f64 / b as f64);
            // A root of a non-square is correctly rounded: its square
            // brackets the argument within one step either way.
            let r = sqrt_ratio(s, 1);
            let (lo, hi) = (f64::from_bits(r.to_bits() - 1), f64::from_bits(r.to_bits() + 1));
            prop_assert!(lo * lo <= s as f64 && s as f64 <= hi * hi);
        }
    }
}
