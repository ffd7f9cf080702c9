//! A reduced read: [`Dataset::read_reduced`] folds each decoded chunk's
//! part on the decoding thread that decoded it ([`FoldSink`]), or, for
//! points, each slab as it arrives.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use super::fold::Folder;
use super::Reduction;
use crate::engine::error::{Error, Result};
use crate::engine::format::data_type::DataType;
use crate::engine::query::cf::MaskAndScale;
use crate::engine::query::plan::ReadPlan;
use crate::engine::read::hierarchy::Dataset;
use crate::engine::read::{BlockSink, Versions};

impl Dataset {
    /// Read `plan` (pinned to `versions`) folded by `reduction`; the
    /// output's little-endian elements. Each decoded chunk's part is folded
    /// on the decoding thread that decoded it, so no slab is assembled;
    /// points (a result built by position) are folded slab by slab.
    pub async fn read_reduced(&self, plan: &ReadPlan, reduction: &Reduction, versions: Versions) -> Result<Bytes> {
        let input = plan.data_type();
        let out_type = reduction.output_type(input)?;
        let folder = Folder::new(reduction.clone(), input);
        let folder = match plan.points {
            Some(_) => self.fold_slabs(plan, folder, versions).await?,
            None => self.fold_chunks(plan, folder, &versions).await?,
        };
        Ok(Bytes::from(folder.cells.finish(out_type, input)?))
    }

    /// Fold every decoded block as it comes, two slabs' reads at a time.
    async fn fold_chunks(&self, plan: &ReadPlan, folder: Folder, versions: &Versions) -> Result<Folder> {
        let sink = Arc::new(FoldSink {
            folder: Mutex::new(folder),
            kept: plan.dims.iter().map(|d| !d.dropped).collect(),
            cf: plan.cf.clone().map(|cf| (cf, plan.meta().data_type)),
        });
        let as_sink: Arc<dyn BlockSink> = sink.clone();
        futures::stream::iter(0..plan.slab_count())
            .map(|slab| {
                let as_sink = as_sink.clone();
                async move {
                    let ticket = self.resources.ticket();
                    self.read_slab(plan, slab, Some(versions), ticket, Some(&as_sink)).await
                }
            })
            .buffer_unordered(2)
            .try_for_each(|_| async { Ok(()) })
            .await?;
        drop(as_sink);
        let sink = Arc::into_inner(sink).expect("the reads are done");
        Ok(sink.folder.into_inner().expect("no fold panicked"))
    }

    /// Read `plan` slab by slab, folding each on the decoding threads while
    /// the next slab is read.
    async fn fold_slabs(&self, plan: &ReadPlan, mut folder: Folder, versions: Versions) -> Result<Folder> {
        let slab_dim = plan.slab_result_dim();
        let rank = plan.output_shape().len();
        let shapes: Vec<(Vec<u64>, u64)> = (0..plan.slab_count())
            .map(|s| (plan.slab_result_shape(s), plan.slab_result_start(s)))
            .collect();
        let mut slabs = std::pin::pin!(self.slab_stream(plan.clone(), versions));
        let mut next = 0;
        while let Some(slab) = slabs.next().await {
            let data = slab?;
            let (shape, start) = shapes[next].clone();
            next += 1;
            let mut origin = vec![0; rank];
            if let Some(d) = slab_dim {
                origin[d] = start;
            }
            let job = move || {
                folder.fold(&data, &shape, &origin);
                folder
            };
            folder = self
                .resources
                .decoders
                .run(self.resources.ticket(), job)
                .await
                .map_err(|panic| Error::Internal(format!("a reduction panicked: {panic}")))?;
        }
        Ok(folder)
    }
}

/// Folds the blocks of a read as they are decoded, from any decoding thread.
struct FoldSink {
    folder: Mutex<Folder>,
    /// Which array dimensions the result keeps (a dropped one is an index).
    kept: Vec<bool>,
    /// CF decoding, of elements stored as this type.
    cf: Option<(Arc<MaskAndScale>, DataType)>,
}

impl BlockSink for FoldSink {
    fn take(&self, data: &[u8], shape: &[u64], origin: &[u64]) -> Result<()> {
        let in_result =
            |v: &[u64]| -> Vec<u64> { v.iter().zip(&self.kept).filter(|(_, k)| **k).map(|(x, _)| *x).collect() };
        let (shape, origin) = (in_result(shape), in_result(origin));
        let decoded;
        let data = match &self.cf {
            Some((cf, stored)) => {
                decoded = cf.decode(*stored, &Bytes::copy_from_slice(data))?;
                &decoded[..]
            }
            None => data,
        };
        self.folder
            .lock()
            .expect("no fold panicked")
            .fold(data, &shape, &origin);
        Ok(())
    }
}
