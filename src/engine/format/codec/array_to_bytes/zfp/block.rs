//! Decoding one zfp block: 4^d values (d = 1..4) from the bit stream.
//!
//! Algorithm: <https://zfp.readthedocs.io/en/release1.0.1/algorithm.html>.
//! A block is coded as (floats only) a common exponent, then integer
//! transform coefficients bit plane by bit plane from the most significant,
//! each plane's bits for the values already known to be significant first,
//! then a unary run-length code for the rest. Decoding undoes the
//! negabinary mapping, the coefficient order and the decorrelating lifting
//! transform (or, in reversible mode, its exact integer form), then scales
//! the integers back by the block's exponent.

use super::header::Mode;
use super::order;
use super::stream::BitReader;

/// The largest block: 4^4 values.
pub(super) const MAX_BLOCK: usize = 256;

/// The integers a block is transformed in: `i32` for `int32` and `float32`
/// arrays, `i64` for `int64` and `float64`.
pub(super) trait Int: Copy + Default {
    /// Bits in the integer: the bit planes coded.
    const BITS: u32;
    /// Bits of a reversible block's precision.
    const PBITS: u32;
    /// The two's complement integer of a negabinary one (in the low bits).
    fn from_negabinary(u: u64) -> Self;
    /// The negabinary form of the integer (in the low bits).
    fn to_negabinary(self) -> u64;
    /// The lifting step on `p[i], p[i + s], p[i + 2s], p[i + 3s]`.
    fn forward_lift(p: &mut [Self], i: usize, s: usize);
    /// The reversible lifting step.
    fn reversible_forward_lift(p: &mut [Self], i: usize, s: usize);
    /// The inverse lifting step on `p[i], p[i + s], p[i + 2s], p[i + 3s]`.
    fn inverse_lift(p: &mut [Self], i: usize, s: usize);
    /// The reversible inverse lifting step.
    fn reversible_inverse_lift(p: &mut [Self], i: usize, s: usize);
}

macro_rules! int {
    ($int:ty, $uint:ty, $pbits:expr) => {
        impl Int for $int {
            const BITS: u32 = <$int>::BITS;
            const PBITS: u32 = $pbits;

            fn from_negabinary(u: u64) -> Self {
                const MASK: $uint = <$uint>::MAX / 3 * 2; // 0b1010...
                ((u as $uint ^ MASK).wrapping_sub(MASK)) as $int
            }

            fn to_negabinary(self) -> u64 {
                const MASK: $uint = <$uint>::MAX / 3 * 2;
                u64::from((self as $uint).wrapping_add(MASK) ^ MASK)
            }

            fn forward_lift(p: &mut [Self], i: usize, s: usize) {
                let (mut x, mut y, mut z, mut w) = (p[i], p[i + s], p[i + 2 * s], p[i + 3 * s]);
                x = x.wrapping_add(w) >> 1;
                w = w.wrapping_sub(x);
                z = z.wrapping_add(y) >> 1;
                y = y.wrapping_sub(z);
                x = x.wrapping_add(z) >> 1;
                z = z.wrapping_sub(x);
                w = w.wrapping_add(y) >> 1;
                y = y.wrapping_sub(w);
                w = w.wrapping_add(y >> 1);
                y = y.wrapping_sub(w >> 1);
                (p[i], p[i + s], p[i + 2 * s], p[i + 3 * s]) = (x, y, z, w);
            }

            fn reversible_forward_lift(p: &mut [Self], i: usize, s: usize) {
                let (x, mut y, mut z, mut w) = (p[i], p[i + s], p[i + 2 * s], p[i + 3 * s]);
                w = w.wrapping_sub(z);
                z = z.wrapping_sub(y);
                y = y.wrapping_sub(x);
                w = w.wrapping_sub(z);
                z = z.wrapping_sub(y);
                w = w.wrapping_sub(z);
                (p[i + s], p[i + 2 * s], p[i + 3 * s]) = (y, z, w);
            }

            fn inverse_lift(p: &mut [Self], i: usize, s: usize) {
                let (mut x, mut y, mut z, mut w) = (p[i], p[i + s], p[i + 2 * s], p[i + 3 * s]);
                y = y.wrapping_add(w >> 1);
                w = w.wrapping_sub(y >> 1);
                y = y.wrapping_add(w);
                w = w.wrapping_sub(y.wrapping_sub(w));
                z = z.wrapping_add(x);
                x = x.wrapping_sub(z.wrapping_sub(x));
                y = y.wrapping_add(z);
                z = z.wrapping_sub(y.wrapping_sub(z));
                w = w.wrapping_add(x);
                x = x.wrapping_sub(w.wrapping_sub(x));
                (p[i], p[i + s], p[i + 2 * s], p[i + 3 * s]) = (x, y, z, w);
            }

            fn reversible_inverse_lift(p: &mut [Self], i: usize, s: usize) {
                let (x, mut y, mut z, mut w) = (p[i], p[i + s], p[i + 2 * s], p[i + 3 * s]);
                w = w.wrapping_add(z);
                z = z.wrapping_add(y);
                w = w.wrapping_add(z);
                y = y.wrapping_add(x);
                z = z.wrapping_add(y);
                w = w.wrapping_add(z);
                (p[i + s], p[i + 2 * s], p[i + 3 * s]) = (y, z, w);
            }
        }
    };
}

int!(i32, u32, 5);
int!(i64, u64, 6);

/// Decode up to `max_bits` bits of `data.len()` coefficients' bit planes,
/// from plane `bits - 1` down, at most `max_prec` planes; the bits read.
fn decode_planes(stream: &mut BitReader<'_>, max_bits: u32, max_prec: u32, int_bits: u32, data: &mut [u64]) -> u32 {
    data.fill(0);
    let size = data.len();
    let lowest = int_bits.saturating_sub(max_prec);
    let mut budget = max_bits;
    let mut known = 0usize;
    let mut plane = int_bits;
    while budget > 0 && plane > lowest {
        plane -= 1;
        let bit = 1u64 << plane;
        // The values already significant: one bit each.
        let first = known.min(budget as usize);
        budget -= first as u32;
        for start in (0..first).step_by(64) {
            let count = (first - start).min(64);
            let mut word = stream.bits(count as u32);
            for value in &mut data[start..start + count] {
                *value |= (word & 1) << plane;
                word >>= 1;
            }
        }
        // The rest: a group test, then the position of the next one bit.
        while budget > 0 && known < size {
            budget -= 1;
            if !stream.bit() {
                break;
            }
            let limit = budget.min((size - 1 - known) as u32);
            let (zeros, one) = stream.zeros_then_one(limit);
            budget -= zeros + u32::from(one);
            known += zeros as usize;
            data[known] += bit;
            known += 1;
        }
    }
    max_bits - budget
}

/// Decode one block of integers of `dims` dimensions into `block` (in
/// `x`-fastest order), with `planes` (as long) as scratch; the bits read,
/// at least `min_bits`.
pub(super) fn decode_ints<I: Int>(
    stream: &mut BitReader<'_>,
    dims: usize,
    (min_bits, max_bits, max_prec): (u32, u32, u32),
    reversible: bool,
    planes: &mut [u64],
    block: &mut [I],
) -> u32 {
    let mut bits = 0;
    let max_prec = if reversible {
        bits = I::PBITS;
        stream.bits(I::PBITS) as u32 + 1
    } else {
        max_prec
    };
    bits += decode_planes(stream, max_bits.saturating_sub(bits), max_prec, I::BITS, planes);
    if bits < min_bits {
        stream.skip(u64::from(min_bits - bits));
        bits = min_bits;
    }
    for (&value, &at) in planes.iter().zip(order::of(dims)) {
        block[at as usize] = I::from_negabinary(value);
    }
    inverse_transform(block, dims, reversible);
    bits
}

/// Undo the decorrelating transform along each axis, the slowest first.
pub(super) fn inverse_transform<I: Int>(block: &mut [I], dims: usize, reversible: bool) {
    for axis in (0..dims).rev() {
        // Lines along `axis` start where its coordinate is 0.
        let stride = 1 << (2 * axis);
        for high in (0..block.len()).step_by(4 * stride) {
            for start in high..high + stride {
                if reversible {
                    I::reversible_inverse_lift(block, start, stride);
                } else {
                    I::inverse_lift(block, start, stride);
                }
            }
        }
    }
}

/// The floating-point numbers zfp compresses, and their integers.
pub(super) trait Float: Copy + Default + PartialOrd {
    type Int: Int;
    /// Exponent bits.
    const EBITS: u32;
    /// `2^e` as the float (`ldexp(1, e)`), zero or infinite out of range.
    fn power_of_two(e: i32) -> Self;
    fn times(self, i: Self::Int) -> Self;
    /// The float whose sign-magnitude bits `i` holds in two's complement.
    fn reinterpret(i: Self::Int) -> Self;
    /// The two's complement integer of the float's sign-magnitude bits.
    fn to_twos_complement(self) -> Self::Int;
    /// `(Int)(self * scale)` as C converts on x86-64: truncated, and the
    /// smallest integer when out of range or not a number.
    fn scaled_to_int(self, scale: Self) -> Self::Int;
    /// zfp's block exponent of the largest magnitude `self` (at least 0):
    /// `frexp`'s exponent, at least that of the smallest normal number;
    /// `-bias` for zero.
    fn exponent(self) -> i32;
    fn magnitude(self) -> Self;
    fn bits_equal(self, other: Self) -> bool;
    fn is_finite_number(self) -> bool;
}

/// `Float` for a float of `$mantissa` stored mantissa bits, whose integers
/// are `$int` (`$uint` unsigned) of the same width.
macro_rules! float {
    ($float:ty, $int:ty, $uint:ty, $ebits:expr, $mantissa:expr) => {
        impl Float for $float {
            type Int = $int;
            const EBITS: u32 = $ebits;

            fn power_of_two(e: i32) -> Self {
                const BIAS: i32 = (1 << ($ebits - 1)) - 1;
                match e {
                    _ if e > BIAS => <$float>::INFINITY,
                    _ if e >= 1 - BIAS => <$float>::from_bits(((e + BIAS) as $uint) << $mantissa),
                    // Subnormal: 2^e is 2^(e + bias - 1 + mantissa) steps of the smallest.
                    _ if e >= 1 - BIAS - $mantissa => <$float>::from_bits(1 << (e + BIAS - 1 + $mantissa)),
                    _ => 0.0,
                }
            }

            fn times(self, i: $int) -> Self {
                self * i as $float
            }

            fn reinterpret(i: $int) -> Self {
                <$float>::from_bits(sign_magnitude(i as $uint))
            }

            fn to_twos_complement(self) -> $int {
                sign_magnitude(self.to_bits()) as $int
            }

            fn scaled_to_int(self, scale: Self) -> $int {
                let y = self * scale;
                let limit = -(<$int>::MIN as $float);
                if (-limit..limit).contains(&y) {
                    y as $int
                } else {
                    <$int>::MIN
                }
            }

            fn exponent(self) -> i32 {
                const BIAS: i32 = (1 << ($ebits - 1)) - 1;
                match self {
                    // glibc's frexp gives 0 for infinity.
                    <$float>::INFINITY => 0,
                    x if x > 0.0 => {
                        let biased = ((x.to_bits() >> $mantissa) & ((1 << $ebits) - 1)) as i32;
                        (biased - (BIAS - 1)).max(1 - BIAS)
                    }
                    _ => -BIAS,
                }
            }

            fn magnitude(self) -> Self {
                self.abs()
            }

            fn bits_equal(self, other: Self) -> bool {
                self.to_bits() == other.to_bits()
            }

            fn is_finite_number(self) -> bool {
                self.is_finite()
            }
        }

        impl SignMagnitude for $uint {
            fn sign_magnitude(self) -> Self {
                // Negative: flip every bit but the sign (an involution).
                if self >> (<$uint>::BITS - 1) == 1 {
                    self ^ (<$uint>::MAX >> 1)
                } else {
                    self
                }
            }
        }
    };
}

/// Between sign-magnitude bits and two's complement ones, either way.
trait SignMagnitude {
    fn sign_magnitude(self) -> Self;
}

fn sign_magnitude<U: SignMagnitude>(bits: U) -> U {
    bits.sign_magnitude()
}

float!(f32, i32, u32, 8, 23);
float!(f64, i64, u64, 11, 52);

/// Scratch space for decoding blocks, kept across the blocks of a stream.
pub(super) struct Scratch<I> {
    pub(super) planes: [u64; MAX_BLOCK],
    pub(super) ints: [I; MAX_BLOCK],
}

impl<I: Int> Scratch<I> {
    pub(super) fn new() -> Self {
        Self {
            planes: [0; MAX_BLOCK],
            ints: [I::default(); MAX_BLOCK],
        }
    }

    /// Decode one block of integers (see [`decode_ints`]).
    pub(super) fn ints(
        &mut self,
        stream: &mut BitReader<'_>,
        dims: usize,
        limits: (u32, u32, u32),
        reversible: bool,
        block: &mut [I],
    ) -> u32 {
        let planes = &mut self.planes[..block.len()];
        decode_ints(stream, dims, limits, reversible, planes, block)
    }
}

/// Decode one block of floats of `dims` dimensions into `block`.
pub(super) fn decode_floats<F: Float>(
    stream: &mut BitReader<'_>,
    dims: usize,
    mode: &Mode,
    scratch: &mut Scratch<F::Int>,
    block: &mut [F],
) {
    let reversible = mode.is_reversible();
    let bias = (1i32 << (F::EBITS - 1)) - 1;
    let mut bits = 1;
    if !stream.bit() {
        block.fill(F::default());
        if mode.min_bits > bits {
            stream.skip(u64::from(mode.min_bits - bits));
        }
        return;
    }
    // Reversible blocks say whether they were reinterpreted as integers.
    let reinterpreted = reversible && {
        bits += 1;
        stream.bit()
    };
    let ints = &mut scratch.ints[..block.len()];
    let planes = &mut scratch.planes[..block.len()];
    let mut max_prec = mode.max_prec;
    let mut emax = 0;
    if !reinterpreted {
        bits += F::EBITS;
        emax = stream.bits(F::EBITS) as i32 - bias;
        if !reversible {
            max_prec = precision(emax, mode, dims);
        }
    }
    let limits = (
        mode.min_bits.saturating_sub(bits),
        mode.max_bits.saturating_sub(bits),
        max_prec,
    );
    decode_ints(stream, dims, limits, reversible, planes, ints);
    if reinterpreted {
        for (value, &i) in block.iter_mut().zip(ints.iter()) {
            *value = F::reinterpret(i);
        }
    } else if reversible && emax == -bias {
        block.fill(F::default());
    } else {
        let scale = F::power_of_two(emax - (<F::Int as Int>::BITS as i32 - 2));
        for (value, &i) in block.iter_mut().zip(ints.iter()) {
            *value = scale.times(i);
        }
    }
}

/// The bit planes coded of a block whose largest exponent is `emax`.
pub(super) fn precision(emax: i32, mode: &Mode, dims: usize) -> u32 {
    let planes = i64::from(emax) - i64::from(mode.min_exp) + 2 * dims as i64 + 2;
    planes.clamp(0, i64::from(mode.max_prec)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negabinary_and_powers_of_two() {
        // Negabinary 0b11 is -2 + 1 = -1; 0b110 is 4 - 2 = 2.
        assert_eq!(i32::from_negabinary(0b11), -1);
        assert_eq!(i64::from_negabinary(0b110), 2);
        assert_eq!(i32::from_negabinary(0), 0);
        assert_eq!(f32::power_of_two(-149), f32::from_bits(1));
        assert_eq!(f32::power_of_two(-150), 0.0);
        assert_eq!(f32::power_of_two(3), 8.0);
        assert_eq!(f64::power_of_two(-1074), f64::from_bits(1));
        assert_eq!(f64::power_of_two(-30), 2f64.powi(-30));
        assert_eq!(f64::power_of_two(1024), f64::INFINITY);
        assert_eq!(f32::reinterpret(1.5f32.to_bits() as i32), 1.5);
        assert_eq!(f32::reinterpret(!(2.5f32.to_bits() as i32 & 0x7fff_ffff)), -2.5);
    }

    /// zfp's forward lifting step, to check the inverse against.
    fn forward_lift(v: [i64; 4]) -> [i64; 4] {
        let [mut x, mut y, mut z, mut w] = v;
        x += w;
        x >>= 1;
        w -= x;
        z += y;
        z >>= 1;
        y -= z;
        x += z;
        x >>= 1;
        z -= x;
        w += y;
        w >>= 1;
        y -= w;
        w += y >> 1;
        y -= w >> 1;
        [x, y, z, w]
    }

    #[test]
    fn inverse_lift_undoes_the_forward_one_up_to_rounding() {
        for v in [[0, 0, 0, 0], [4, 8, 12, 16], [1000, -1000, 999, 5], [64, 64, 64, 64]] {
            let mut p = forward_lift(v).to_vec();
            i64::inverse_lift(&mut p, 0, 1);
            for (got, want) in p.iter().zip(v) {
                assert!((got - want).abs() <= 2, "{v:?} -> {p:?}");
            }
        }
        // Constant blocks come back exactly.
        let mut p = forward_lift([7 << 20; 4]).to_vec();
        i64::inverse_lift(&mut p, 0, 1);
        assert_eq!(p, vec![7 << 20; 4]);
    }
}
