//! Reads that hand each decoded block to a consumer instead of assembling
//! slabs: a reduction folds every chunk's part on the decoding thread that
//! decoded it, so it holds no slab and copies nothing it can read in place.

use crate::engine::error::Result;
use crate::engine::format::copy::{copy_block, Block};
use crate::engine::query::plan::Placement;

/// Takes the blocks of a read, in any order and from any decoding thread.
pub(crate) trait BlockSink: Send + Sync {
    /// `data`: a block's elements (C order, little-endian) of `shape`,
    /// placed at `origin` in the output (both in array rank).
    fn take(&self, data: &[u8], shape: &[u64], origin: &[u64]) -> Result<()>;
}

/// Hand the placed parts of one decoded chunk (`src` of `src_shape`;
/// `None`: every element is `fill`) to `sink`: in place when a block is a
/// contiguous run of the chunk, else gathered into a scratch buffer.
pub(super) fn sink_chunk(
    sink: &dyn BlockSink,
    src: Option<&[u8]>,
    src_shape: &[u64],
    placement: &Placement,
    fill: &[u8],
) -> Result<()> {
    let Placement::Blocks(blocks) = placement else {
        unreachable!("block sinks take basic and orthogonal selections only")
    };
    let size = fill.len();
    let mut scratch = Vec::new();
    for block in blocks {
        if let (Some(src), Some(start)) = (src, contiguous_start(block, src_shape)) {
            let len = block.count.iter().product::<u64>() as usize * size;
            let at = start as usize * size;
            sink.take(&src[at..at + len], &block.count, &block.dst_start)?;
            continue;
        }
        let len = block.count.iter().product::<u64>() as usize * size;
        scratch.clear();
        scratch.resize(len, 0);
        let local = Block {
            dst_start: vec![0; block.count.len()],
            ..block.clone()
        };
        copy_block(src, src_shape, &mut scratch, &block.count, &local, fill);
        sink.take(&scratch, &block.count, &block.dst_start)?;
    }
    Ok(())
}

/// Where `block`'s elements start in a chunk of `shape` when they are one
/// contiguous run of it (C order), else `None`.
fn contiguous_start(block: &Block, shape: &[u64]) -> Option<u64> {
    let rank = shape.len();
    // Dimensions after the first with more than one position must be whole.
    let first = (0..rank)
        .find(|&d| block.count[d] > 1)
        .unwrap_or(rank.saturating_sub(1));
    let whole_after = (first + 1..rank).all(|d| block.src_start[d] == 0 && block.count[d] == shape[d]);
    let unit_steps = (first..rank).all(|d| block.src_step[d] == 1 || block.count[d] == 1);
    if !(whole_after && unit_steps) {
        return None;
    }
    Some(
        shape
            .iter()
            .zip(&block.src_start)
            .fold(0, |start, (n, i)| start * n + i),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A block as taken: its bytes, shape and origin.
    type Taken = (Vec<u8>, Vec<u64>, Vec<u64>);

    /// Records what it is given.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<Taken>>);

    impl BlockSink for Recorder {
        fn take(&self, data: &[u8], shape: &[u64], origin: &[u64]) -> Result<()> {
            self.0
                .lock()
                .unwrap()
                .push((data.to_vec(), shape.to_vec(), origin.to_vec()));
            Ok(())
        }
    }

    fn block(src_start: &[u64], src_step: &[i64], count: &[u64]) -> Block {
        Block {
            src_start: src_start.to_vec(),
            src_step: src_step.to_vec(),
            dst_start: vec![7; count.len()],
            count: count.to_vec(),
        }
    }

    /// Every block, contiguous or not, arrives as the elements `copy_block`
    /// would place, with its shape and origin.
    #[test]
    fn blocks_arrive_as_copy_block_places_them() {
        let shape = [4u64, 5, 6];
        let src: Vec<u8> = (0..120u8).collect();
        let cases = [
            block(&[0, 0, 0], &[1, 1, 1], &[4, 5, 6]),
            block(&[1, 0, 0], &[1, 1, 1], &[2, 5, 6]),
            block(&[2, 3, 0], &[1, 1, 1], &[1, 2, 6]),
            block(&[2, 3, 1], &[1, 1, 1], &[1, 1, 4]),
            block(&[0, 1, 0], &[1, 1, 1], &[2, 3, 6]),
            block(&[0, 0, 1], &[2, 1, 2], &[2, 5, 3]),
            block(&[3, 4, 5], &[-1, -1, -1], &[4, 5, 6]),
        ];
        for case in cases {
            let recorder = Recorder::default();
            let placement = Placement::Blocks(vec![case.clone()]);
            sink_chunk(&recorder, Some(&src), &shape, &placement, &[0]).unwrap();
            let n = case.count.iter().product::<u64>() as usize;
            let mut expected = vec![0u8; n];
            let local = Block {
                dst_start: vec![0; 3],
                ..case.clone()
            };
            copy_block(Some(&src), &shape, &mut expected, &case.count, &local, &[0]);
            let got = recorder.0.into_inner().unwrap();
            assert_eq!(
                got,
                vec![(expected, case.count.clone(), case.dst_start.clone())],
                "{case:?}"
            );
        }
        // A missing chunk arrives as its fill value.
        let recorder = Recorder::default();
        let placement = Placement::Blocks(vec![block(&[0, 0, 0], &[1, 1, 1], &[1, 2, 3])]);
        sink_chunk(&recorder, None, &shape, &placement, &[9]).unwrap();
        assert_eq!(recorder.0.into_inner().unwrap()[0].0, vec![9u8; 6]);
    }
}
