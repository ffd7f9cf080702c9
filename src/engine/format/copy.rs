//! Copying a strided block between two C-order arrays of elements.
//!
//! This is the one place that moves decoded elements: from a decoded chunk
//! into a shard, and from a decoded chunk into a response buffer. Trailing
//! dimensions that are contiguous in both arrays are merged into one
//! `copy_from_slice`, so whole rows (or whole chunks) move without
//! per-element work.

/// A block to copy: for each dimension `d`, `count[d]` positions, read from
/// `src_start[d] + k * src_step[d]` and written to `dst_start[d] + k`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// First source index per dimension.
    pub src_start: Vec<u64>,
    /// Source step per dimension (may be negative).
    pub src_step: Vec<i64>,
    /// First destination index per dimension.
    pub dst_start: Vec<u64>,
    /// Positions per dimension.
    pub count: Vec<u64>,
}

fn c_strides(shape: &[u64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1] as i64;
    }
    strides
}

/// Copy `block` from `src` (shape `src_shape`) into `dst` (shape `dst_shape`);
/// `src = None` writes `fill` (one element's bytes) instead.
pub fn copy_block(
    src: Option<&[u8]>,
    src_shape: &[u64],
    dst: &mut [u8],
    dst_shape: &[u64],
    block: &Block,
    fill: &[u8],
) {
    // SAFETY: `dst` is borrowed exclusively for the whole copy.
    unsafe { copy_block_to(src, src_shape, Destination::of(dst), dst_shape, block, fill) }
}

/// [`copy_blocks_to`] into `dst`.
pub fn copy_blocks(
    blocks: &[(Option<&[u8]>, &Block)],
    src_shape: &[u64],
    dst: &mut [u8],
    dst_shape: &[u64],
    fill: &[u8],
) {
    // SAFETY: `dst` is borrowed exclusively for the whole copy.
    unsafe { copy_blocks_to(blocks, src_shape, Destination::of(dst), dst_shape, fill) }
}

/// A C-order array of elements written through a pointer, so that several
/// threads can write disjoint blocks of one buffer at once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Destination {
    ptr: *mut u8,
    len: usize,
    /// Byte width of the numbers made big-endian as they are written (0:
    /// written as they come).
    swap: usize,
}

impl Destination {
    /// The bytes of `buffer`.
    pub(crate) fn of(buffer: &mut [u8]) -> Self {
        Self {
            ptr: buffer.as_mut_ptr(),
            len: buffer.len(),
            swap: 0,
        }
    }

    /// This destination, with each little-endian number of `width` bytes
    /// made big-endian as it lands (while its run is in cache).
    pub(crate) fn big_endian(self, width: usize) -> Self {
        Self { swap: width, ..self }
    }

    /// Finish a write of `out`: swap its numbers when big-endian.
    pub(crate) fn finish(self, out: &mut [u8]) {
        swap_bytes(self.swap, out);
    }

    /// `len` bytes from `start` (bounds checked) as a slice.
    ///
    /// # Safety
    /// The destination's bytes must be valid for writes for as long as the
    /// slice (of a lifetime the caller picks) lives, and no other
    /// thread may touch these bytes while the slice lives.
    pub(crate) unsafe fn slice<'a>(self, start: usize, len: usize) -> &'a mut [u8] {
        assert!(
            start.checked_add(len).is_some_and(|end| end <= self.len),
            "a write past the buffer"
        );
        // SAFETY: in bounds (checked above); exclusive by the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

/// [`copy_block`] into a [`Destination`].
///
/// # Safety
/// `dst` must be valid for writes, and no other thread may touch the
/// bytes this block writes while it runs.
pub(crate) unsafe fn copy_block_to(
    src: Option<&[u8]>,
    src_shape: &[u64],
    dst: Destination,
    dst_shape: &[u64],
    block: &Block,
    fill: &[u8],
) {
    for (from, to) in Runs::new(block, src_shape, dst_shape, fill.len()) {
        // SAFETY: the caller's promise for the bytes of this block.
        unsafe { copy_run(src, from, dst, to, fill) };
    }
}

/// Several blocks, each from its own source (of shape `src_shape`), into
/// one destination, a run of each in turn. Blocks side by side along the
/// last dimension (chunks of one row) so write the destination front to
/// back, row after row, instead of block after block: the same bytes, in
/// far fewer pages at a time, which costs half the CPU of block by block
/// on a destination larger than the caches.
///
/// # Safety
/// As [`copy_block_to`], for every block.
pub(crate) unsafe fn copy_blocks_to(
    blocks: &[(Option<&[u8]>, &Block)],
    src_shape: &[u64],
    dst: Destination,
    dst_shape: &[u64],
    fill: &[u8],
) {
    let mut runs: Vec<_> = blocks
        .iter()
        .map(|(src, block)| (*src, Runs::new(block, src_shape, dst_shape, fill.len())))
        .collect();
    while !runs.is_empty() {
        runs.retain_mut(|(src, runs)| match runs.next() {
            // SAFETY: the caller's promise for the bytes of each block.
            Some((from, to)) => unsafe {
                copy_run(*src, from, dst, to, fill);
                true
            },
            None => false,
        });
    }
}

/// Copy one run: `to.len` bytes from byte `from` of `src` (or `fill`) to
/// byte `to.start` of `dst`.
///
/// # Safety
/// As [`copy_block_to`].
unsafe fn copy_run(src: Option<&[u8]>, from: usize, dst: Destination, to: std::ops::Range<usize>, fill: &[u8]) {
    // SAFETY: the caller's promise.
    let out = unsafe { dst.slice(to.start, to.len()) };
    match src {
        Some(src) => out.copy_from_slice(&src[from..from + to.len()]),
        None => fill_run(out, fill),
    }
    dst.finish(out);
}

/// The runs of a block: its bytes contiguous in both arrays, as (first
/// source byte, destination bytes), in C order. Trailing dimensions whole
/// in both arrays merge into one run.
struct Runs<'a> {
    block: &'a Block,
    src_strides: Vec<i64>,
    dst_strides: Vec<i64>,
    /// Dimensions before the run's, and the multi-index over them.
    index: Vec<u64>,
    src_off: i64,
    dst_off: i64,
    size: usize,
    run_bytes: usize,
    done: bool,
}

impl<'a> Runs<'a> {
    fn new(block: &'a Block, src_shape: &[u64], dst_shape: &[u64], size: usize) -> Self {
        let rank = block.count.len();
        let src_strides = c_strides(src_shape);
        let dst_strides = c_strides(dst_shape);
        // Merge trailing dimensions into one contiguous run where both sides allow.
        let mut run_dims = 0;
        let mut run = 1u64;
        if rank > 0 && block.src_step[rank - 1] == 1 {
            run_dims = 1;
            run = block.count[rank - 1];
            while run_dims < rank {
                let d = rank - run_dims;
                let full = (d..rank).all(|i| block.count[i] == src_shape[i] && block.count[i] == dst_shape[i]);
                if !full || block.src_step[d - 1] != 1 {
                    break;
                }
                run *= block.count[d - 1];
                run_dims += 1;
            }
        }
        let outer = rank - run_dims;
        let at = |starts: &[u64], strides: &[i64]| -> i64 { (0..rank).map(|d| starts[d] as i64 * strides[d]).sum() };
        Self {
            src_off: at(&block.src_start, &src_strides),
            dst_off: at(&block.dst_start, &dst_strides),
            block,
            src_strides,
            dst_strides,
            index: vec![0; outer],
            size,
            run_bytes: run as usize * size,
            done: block.count.contains(&0),
        }
    }
}

impl Iterator for Runs<'_> {
    type Item = (usize, std::ops::Range<usize>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let (from, to) = (self.src_off as usize * self.size, self.dst_off as usize * self.size);
        // Advance the outer multi-index (C order).
        let block = self.block;
        let mut d = self.index.len();
        loop {
            if d == 0 {
                self.done = true;
                break;
            }
            d -= 1;
            self.index[d] += 1;
            self.src_off += block.src_step[d] * self.src_strides[d];
            self.dst_off += self.dst_strides[d];
            if self.index[d] < block.count[d] {
                break;
            }
            self.src_off -= block.src_step[d] * self.src_strides[d] * self.index[d] as i64;
            self.dst_off -= self.dst_strides[d] * self.index[d] as i64;
            self.index[d] = 0;
        }
        Some((from, to..to + self.run_bytes))
    }
}

/// How many leading elements of the source (shape `src_shape`, C order)
/// the copy of `block` reads: one past the last element it touches.
pub(crate) fn source_prefix_elements(block: &Block, src_shape: &[u64]) -> u64 {
    if block.count.contains(&0) {
        return 0;
    }
    let strides = c_strides(src_shape);
    let last: i64 = (0..block.count.len())
        .map(|d| {
            let end = block.src_start[d] as i64 + (block.count[d] as i64 - 1) * block.src_step[d];
            end.max(block.src_start[d] as i64) * strides[d]
        })
        .sum();
    last as u64 + 1
}

/// Reverse the bytes of each `width`-byte number of `data` (widths other
/// than 2, 4 and 8 leave it as it is).
pub(crate) fn swap_bytes(width: usize, data: &mut [u8]) {
    match width {
        2 => data.chunks_exact_mut(2).for_each(|c| c.swap(0, 1)),
        4 => data.chunks_exact_mut(4).for_each(|c| {
            let v = u32::from_le_bytes(c.try_into().expect("4 bytes"));
            c.copy_from_slice(&v.to_be_bytes());
        }),
        8 => data.chunks_exact_mut(8).for_each(|c| {
            let v = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            c.copy_from_slice(&v.to_be_bytes());
        }),
        _ => {}
    }
}

fn fill_run(dst: &mut [u8], fill: &[u8]) {
    if fill.iter().all(|b| *b == fill[0]) {
        dst.fill(fill[0]);
    } else {
        for element in dst.chunks_exact_mut(fill.len()) {
            element.copy_from_slice(fill);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference: element by element.
    fn reference(src: &[u8], src_shape: &[u64], dst: &mut [u8], dst_shape: &[u64], b: &Block) {
        let ss = c_strides(src_shape);
        let ds = c_strides(dst_shape);
        let total: u64 = b.count.iter().product();
        for linear in 0..total {
            let mut rem = linear;
            let (mut s, mut t) = (0i64, 0i64);
            for d in (0..b.count.len()).rev() {
                let k = (rem % b.count[d]) as i64;
                rem /= b.count[d];
                s += (b.src_start[d] as i64 + k * b.src_step[d]) * ss[d];
                t += (b.dst_start[d] as i64 + k) * ds[d];
            }
            dst[t as usize] = src[s as usize];
        }
    }

    #[test]
    fn matches_reference_for_assorted_blocks() {
        let src_shape = [4u64, 5, 6];
        let src: Vec<u8> = (0..120u8).collect();
        let cases = [
            Block {
                src_start: vec![0, 0, 0],
                src_step: vec![1, 1, 1],
                dst_start: vec![0, 0, 0],
                count: vec![4, 5, 6],
            },
            Block {
                src_start: vec![1, 2, 3],
                src_step: vec![1, 1, 1],
                dst_start: vec![0, 1, 0],
                count: vec![2, 3, 3],
            },
            Block {
                src_start: vec![3, 4, 5],
                src_step: vec![-1, -2, -1],
                dst_start: vec![0, 0, 1],
                count: vec![4, 3, 5],
            },
            Block {
                src_start: vec![0, 0, 0],
                src_step: vec![2, 1, 1],
                dst_start: vec![1, 0, 0],
                count: vec![2, 5, 6],
            },
            Block {
                src_start: vec![0, 1, 0],
                src_step: vec![1, 1, 3],
                dst_start: vec![0, 0, 0],
                count: vec![4, 4, 2],
            },
        ];
        for b in cases {
            let dst_shape = [4u64, 5, 6];
            let mut fast = vec![0u8; 120];
            let mut slow = vec![0u8; 120];
            copy_block(Some(&src), &src_shape, &mut fast, &dst_shape, &b, &[0]);
            reference(&src, &src_shape, &mut slow, &dst_shape, &b);
            assert_eq!(fast, slow, "{b:?}");
            // The prefix is exactly what the copy reads: the copy from a
            // source cut there is the same, one element less would not do.
            let prefix = source_prefix_elements(&b, &src_shape) as usize;
            let mut cut = vec![0u8; 120];
            copy_block(Some(&src[..prefix]), &src_shape, &mut cut, &dst_shape, &b, &[0]);
            assert_eq!(cut, slow, "{b:?}");
            let short = std::panic::catch_unwind(|| {
                let mut out = vec![0u8; 120];
                copy_block(Some(&src[..prefix - 1]), &src_shape, &mut out, &dst_shape, &b, &[0]);
            });
            assert!(short.is_err(), "{b:?}: the last element read is at {}", prefix - 1);
        }
    }

    /// Blocks copied a run of each in turn give what each copied alone
    /// gives: chunks of one row, a strided one, a fill, and an empty one.
    #[test]
    fn blocks_in_turn_match_each_alone() {
        let src_shape = [2u64, 3, 4];
        let sources: Vec<Vec<u8>> = (0..4u8).map(|k| (1..25u8).map(|i| i + 24 * k).collect()).collect();
        let dst_shape = [2u64, 3, 13];
        let side = |x: u64, count: u64| Block {
            src_start: vec![0, 0, 0],
            src_step: vec![1, 1, 1],
            dst_start: vec![0, 0, x],
            count: vec![2, 3, count],
        };
        let strided = Block {
            src_start: vec![1, 2, 3],
            src_step: vec![-1, -1, -2],
            dst_start: vec![0, 0, 8],
            count: vec![2, 3, 2],
        };
        let empty = Block {
            count: vec![2, 0, 4],
            ..side(0, 4)
        };
        let (a, b, c, f) = (side(0, 4), side(4, 4), side(10, 2), side(12, 1));
        let blocks: Vec<(Option<&[u8]>, &Block)> = vec![
            (Some(&sources[0][..]), &a),
            (Some(&sources[1][..]), &b),
            (Some(&sources[2][..]), &strided),
            (Some(&sources[3][..]), &c),
            (None, &f),
            (Some(&sources[0][..]), &empty),
        ];
        let mut alone = vec![0u8; 78];
        for (src, block) in &blocks {
            copy_block(*src, &src_shape, &mut alone, &dst_shape, block, &[200]);
        }
        let mut together = vec![0u8; 78];
        copy_blocks(&blocks, &src_shape, &mut together, &dst_shape, &[200]);
        assert_eq!(together, alone);
        assert!(alone.iter().all(|v| *v != 0), "every byte written: {alone:?}");
    }

    #[test]
    fn fills_multibyte_and_zero_d() {
        let mut dst = vec![0u8; 8];
        let b = Block {
            src_start: vec![1],
            src_step: vec![1],
            dst_start: vec![1],
            count: vec![2],
        };
        copy_block(None, &[4], &mut dst, &[4], &b, &[1, 2]);
        assert_eq!(dst, [0, 0, 1, 2, 1, 2, 0, 0]);
        let mut scalar = vec![0u8; 2];
        let b0 = Block {
            src_start: vec![],
            src_step: vec![],
            dst_start: vec![],
            count: vec![],
        };
        copy_block(Some(&[7, 9]), &[], &mut scalar, &[], &b0, &[0, 0]);
        assert_eq!(scalar, [7, 9]);
    }
}
