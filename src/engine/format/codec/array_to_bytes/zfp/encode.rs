//! Encoding zfp blocks: the decoder's steps backwards, bit for bit what
//! zfp 1.0 writes (`zfp_compress` with zfp's default rounding).
//!
//! A partial block at a field's far edge is first padded as zfp pads it
//! (along each axis in turn: one value repeated, two as `a b b a`, three as
//! `a b c a`). A float block's largest exponent is written, its values
//! scaled to integers by it, then transformed, reordered, turned negabinary
//! and coded bit plane by bit plane. Reversible mode uses the exact integer
//! transform, and codes a float block as integers of its bits when the
//! common exponent would lose any.

use super::block::{precision, Float, Int, Scratch};
use super::header::Mode;
use super::order;
use super::stream::BitWriter;

/// Code up to `max_bits` bits of `data`'s bit planes, from plane
/// `int_bits - 1` down, at most `max_prec` planes; the bits written.
fn encode_planes(stream: &mut BitWriter, max_bits: u32, max_prec: u32, int_bits: u32, data: &[u64]) -> u32 {
    let size = data.len();
    let lowest = int_bits.saturating_sub(max_prec);
    let mut budget = max_bits;
    let mut known = 0usize;
    let mut plane = int_bits;
    while budget > 0 && plane > lowest {
        plane -= 1;
        let bit = |v: &u64| (v >> plane) & 1;
        // The values already significant: one bit each.
        let first = known.min(budget as usize);
        budget -= first as u32;
        for start in (0..first).step_by(64) {
            let count = (first - start).min(64);
            let word = data[start..start + count]
                .iter()
                .rev()
                .fold(0u64, |word, v| word << 1 | bit(v));
            stream.bits(word, count as u32);
        }
        // The rest: a group test (any one left?), then the next one's place.
        let mut ones = data[first..].iter().map(bit).sum::<u64>();
        while budget > 0 && known < size {
            budget -= 1;
            if !stream.bit(ones > 0) {
                break;
            }
            ones -= 1;
            while budget > 0 && known < size - 1 {
                budget -= 1;
                if stream.bit(bit(&data[known]) == 1) {
                    break;
                }
                known += 1;
            }
            known += 1;
        }
    }
    max_bits - budget
}

/// Encode one block of integers of `dims` dimensions (`x`-fastest, changed
/// in place by the transform) with `planes` as scratch; the bits written.
pub(super) fn encode_ints<I: Int>(
    stream: &mut BitWriter,
    dims: usize,
    (min_bits, max_bits, max_prec): (u32, u32, u32),
    reversible: bool,
    planes: &mut [u64],
    block: &mut [I],
) -> u32 {
    forward_transform(block, dims, reversible);
    for (plane, &at) in planes.iter_mut().zip(order::of(dims)) {
        *plane = block[at as usize].to_negabinary();
    }
    let mut bits = 0;
    let max_prec = if reversible {
        // The planes down to the lowest one bit of any coefficient.
        let all = planes.iter().fold(0, |all, p| all | p);
        let needed = if all == 0 { 0 } else { I::BITS - all.trailing_zeros() };
        let prec = needed.min(max_prec).max(1);
        stream.bits(u64::from(prec - 1), I::PBITS);
        bits = I::PBITS;
        prec
    } else {
        max_prec
    };
    bits += encode_planes(stream, max_bits.saturating_sub(bits), max_prec, I::BITS, planes);
    if bits < min_bits {
        stream.pad(u64::from(min_bits - bits));
        bits = min_bits;
    }
    bits
}

/// The decorrelating transform along each axis, `x` first.
fn forward_transform<I: Int>(block: &mut [I], dims: usize, reversible: bool) {
    for axis in 0..dims {
        let stride = 1 << (2 * axis);
        for high in (0..block.len()).step_by(4 * stride) {
            for start in high..high + stride {
                if reversible {
                    I::reversible_forward_lift(block, start, stride);
                } else {
                    I::forward_lift(block, start, stride);
                }
            }
        }
    }
}

/// Encode one block of floats of `dims` dimensions.
pub(super) fn encode_floats<F: Float>(
    stream: &mut BitWriter,
    dims: usize,
    mode: &Mode,
    scratch: &mut Scratch<F::Int>,
    block: &[F],
) {
    if mode.is_reversible() {
        return encode_floats_reversibly(stream, dims, mode, scratch, block);
    }
    let bias = (1i32 << (F::EBITS - 1)) - 1;
    let emax = block_exponent(block);
    let max_prec = precision(emax, mode, dims);
    let biased = if max_prec > 0 { (emax + bias) as u32 } else { 0 };
    let mut bits = 1;
    if biased == 0 {
        stream.bit(false);
        if mode.min_bits > bits {
            stream.pad(u64::from(mode.min_bits - bits));
        }
        return;
    }
    bits += F::EBITS;
    stream.bits(2 * u64::from(biased) + 1, bits);
    let ints = &mut scratch.ints[..block.len()];
    let scale = F::power_of_two(<F::Int as Int>::BITS as i32 - 2 - emax);
    for (i, &value) in ints.iter_mut().zip(block) {
        *i = value.scaled_to_int(scale);
    }
    let limits = (
        mode.min_bits.saturating_sub(bits),
        mode.max_bits.saturating_sub(bits),
        max_prec,
    );
    encode_ints(stream, dims, limits, false, &mut scratch.planes[..block.len()], ints);
}

/// Reversible mode: the block as integers scaled by its exponent when that
/// loses nothing, else as integers of its bits.
fn encode_floats_reversibly<F: Float>(
    stream: &mut BitWriter,
    dims: usize,
    mode: &Mode,
    scratch: &mut Scratch<F::Int>,
    block: &[F],
) {
    let bias = (1i32 << (F::EBITS - 1)) - 1;
    let emax = block_exponent(block);
    let ints = &mut scratch.ints[..block.len()];
    let int_bits = <F::Int as Int>::BITS as i32;
    let exact = if emax == -bias {
        ints.fill(F::Int::default());
        block.iter().all(|v| v.bits_equal(F::default()))
    } else {
        let scale = F::power_of_two(int_bits - 2 - emax);
        let back = F::power_of_two(emax - (int_bits - 2));
        // Stops at the first difference: the integers are then replaced.
        ints.iter_mut().zip(block).all(|(i, &value)| {
            *i = value.scaled_to_int(scale);
            back.times(*i).bits_equal(value)
        })
    };
    let bits;
    if exact {
        let biased = (emax + bias) as u32;
        if biased == 0 {
            stream.bit(false);
            return;
        }
        stream.bits(1, 2);
        stream.bits(u64::from(biased), F::EBITS);
        bits = 2 + F::EBITS;
    } else {
        for (i, &value) in ints.iter_mut().zip(block) {
            *i = value.to_twos_complement();
        }
        stream.bits(3, 2);
        bits = 2;
    }
    let limits = (
        mode.min_bits.saturating_sub(bits),
        mode.max_bits.saturating_sub(bits),
        mode.max_prec,
    );
    encode_ints(stream, dims, limits, true, &mut scratch.planes[..block.len()], ints);
}

/// The exponent of the block's largest magnitude (NaNs never are).
fn block_exponent<F: Float>(block: &[F]) -> i32 {
    let mut largest = F::default();
    for &value in block {
        let m = value.magnitude();
        if largest < m {
            largest = m;
        }
    }
    largest.exponent()
}

/// Pad a partial block in place as zfp does: `extent` values present along
/// each axis (lower axes first), the rest filled along each axis in turn.
pub(super) fn pad<T: Copy>(block: &mut [T], dims: usize, extent: [usize; 4]) {
    for axis in 0..dims {
        let stride = 1 << (2 * axis);
        for start in 0..block.len() {
            // Lines along `axis` whose higher coordinates are present.
            let at = |d: usize| (start >> (2 * d)) & 3;
            if at(axis) != 0 || (axis + 1..dims).any(|d| at(d) >= extent[d]) {
                continue;
            }
            let p = |k: usize| start + k * stride;
            match extent[axis] {
                1 => {
                    block[p(1)] = block[p(0)];
                    block[p(2)] = block[p(0)];
                    block[p(3)] = block[p(0)];
                }
                2 => {
                    block[p(2)] = block[p(1)];
                    block[p(3)] = block[p(0)];
                }
                3 => block[p(3)] = block[p(0)],
                _ => {}
            }
        }
    }
}
