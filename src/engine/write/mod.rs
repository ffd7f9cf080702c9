//! Writes (api.md 4.2): a region's elements into the chunks or shards it
//! touches, the read path backwards. Each object is read (unless the write
//! covers it), decoded, given the new elements, encoded with the array's
//! own codecs and put conditionally on the version read; when another
//! writer got there first it is read again and the elements applied again,
//! up to `retries` times, then [`Error::Conflict`]. A chunk left all fill
//! value is not stored; a shard left with no inner chunk is deleted.
//!
//! The body is taken a chunk row at a time ([`RegionBody::rows`]), so a
//! write holds one row of chunks of it, not all of it.

mod append;
mod commit;
mod consolidated;
mod nodes;
mod region;
mod vlen;

pub use append::Appended;
pub use commit::Commit;
pub use vlen::Items;

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;

use self::region::{combinations, inner_runs, runs, scatter, Run};
use crate::buffer_pool::BufferPool;
use crate::engine::error::{Error, Result};
use crate::engine::format::codec::array_to_bytes::sharding::ShardingCodec;
use crate::engine::format::codec::CodecChain;
use crate::engine::format::data_type::DataType;
use crate::engine::format::metadata::ArrayMetadata;
use crate::engine::query::node::Node;
use crate::engine::query::plan::ReadPlan;
use crate::engine::query::selection::DimSelection;
use crate::engine::read::hierarchy::Dataset;
use crate::engine::read::Versions;
use crate::storage::{join, ByteRange, Expect, Payload, StoreError};

/// The elements of a region to write, C order, little-endian: read a
/// chunk row at a time.
pub trait RegionBody: Send + Sync {
    /// The elements of positions `rows` along the region's first
    /// dimension (all of them for a 0-d array: `0..1`).
    fn rows(&self, rows: Range<u64>) -> std::io::Result<Bytes>;

    /// The variable-length elements the rows' handles name (see
    /// [`Items`]); `None` for fixed-size elements.
    fn items(&self) -> Option<Arc<Vec<Vec<u8>>>> {
        None
    }
}

/// A body held in memory.
#[derive(Debug, Clone)]
pub struct InMemory {
    data: Bytes,
    row_bytes: usize,
}

impl InMemory {
    /// `data` holding rows of `row_bytes` bytes each.
    pub fn new(data: Bytes, row_bytes: usize) -> Self {
        Self { data, row_bytes }
    }
}

impl RegionBody for InMemory {
    fn rows(&self, rows: Range<u64>) -> std::io::Result<Bytes> {
        let (start, end) = (rows.start as usize * self.row_bytes, rows.end as usize * self.row_bytes);
        match self.data.get(start..end) {
            Some(_) => Ok(self.data.slice(start..end)),
            None => Err(std::io::Error::other("the body is shorter than the region")),
        }
    }
}

/// One element filling the whole region (a scalar body, the fill value).
#[derive(Debug, Clone)]
pub struct Repeated {
    element: Vec<u8>,
    row_bytes: usize,
}

impl Repeated {
    /// `element` in every position of rows of `row_bytes` bytes.
    pub fn new(element: Vec<u8>, row_bytes: usize) -> Self {
        Self { element, row_bytes }
    }
}

impl RegionBody for Repeated {
    fn rows(&self, rows: Range<u64>) -> std::io::Result<Bytes> {
        let count = (rows.end - rows.start) as usize * self.row_bytes / self.element.len().max(1);
        Ok(Bytes::from(self.element.repeat(count)))
    }
}

/// How writes retry and how many objects they work on at once.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Times an object is read and written again after another writer
    /// changed it, before [`Error::Conflict`].
    pub retries: usize,
    /// Objects read, encoded and put at once.
    pub concurrency: usize,
    /// The most bytes of a region's elements a write holds at once (one
    /// row of its chunks).
    pub max_row_bytes: u64,
    /// The version of each object an `If-Match` was checked against: an
    /// object found at another version is 412, never re-read and re-applied.
    pub expected: Option<Arc<Versions>>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            retries: 8,
            concurrency: 8,
            max_row_bytes: 1 << 30,
            expected: None,
        }
    }
}

/// What a write did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Chunks (inner chunks when sharded) the write touched that are
    /// stored afterwards.
    pub chunks_written: u64,
    /// Chunks it removed because they became all fill value.
    pub chunks_deleted: u64,
    /// Objects put.
    pub objects_written: u64,
    /// Objects deleted.
    pub objects_deleted: u64,
    /// Bytes put.
    pub bytes_written: u64,
    /// Keys of the objects put or deleted.
    pub replaced: Vec<String>,
}

impl WriteOutcome {
    fn add(mut self, other: WriteOutcome) -> Self {
        self.chunks_written += other.chunks_written;
        self.chunks_deleted += other.chunks_deleted;
        self.objects_written += other.objects_written;
        self.objects_deleted += other.objects_deleted;
        self.bytes_written += other.bytes_written;
        self.replaced.extend(other.replaced);
        self
    }
}

/// A write of a rectangular region of one array.
#[derive(Debug, Clone)]
pub struct RegionWrite {
    node: Arc<Node>,
    dims: Vec<DimSelection>,
    /// Chunks all fill value are stored too (a v2 array without one).
    keep_fill: bool,
}

impl RegionWrite {
    /// The region a read plan selects: it must be rectangular (integers
    /// and slices with a positive step; no points, lists or CF decoding).
    pub fn of(plan: &ReadPlan) -> Result<Self> {
        if plan.points.is_some() {
            return Err(Error::InvalidRequest(
                "a write takes a rectangular region, not points".into(),
            ));
        }
        if plan.cf_decoded() {
            return Err(Error::InvalidRequest(
                "decode=cf is for reads; a write takes the array's stored values".into(),
            ));
        }
        let meta = plan.node.array()?;
        region::check_rectangular(&plan.dims)?;
        meta.codecs.check_writable()?;
        // A Zarr v2 array without a fill value reads a missing chunk as
        // uninitialized memory (zarr-python 2): every chunk is stored.
        let v2_fill = plan
            .node
            .metadata
            .as_ref()
            .map(|m| (m.zarr_format(), m.raw().get("fill_value")));
        let keep_fill = matches!(v2_fill, Some((2, None | Some(serde_json::Value::Null))));
        Ok(Self {
            node: plan.node.clone(),
            dims: plan.dims.clone(),
            keep_fill,
        })
    }

    /// The array written.
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// The region's shape in the array's rank (a dimension an integer
    /// selects has length 1).
    pub fn region_shape(&self) -> Vec<u64> {
        self.dims.iter().map(|d| d.len).collect()
    }

    /// The element type.
    pub fn data_type(&self) -> DataType {
        self.meta().data_type
    }

    /// Elements in the region.
    pub fn elements(&self) -> u64 {
        self.region_shape().iter().product()
    }

    /// Bytes of one position along the region's first dimension.
    pub fn row_bytes(&self) -> usize {
        let rest: u64 = self.dims.iter().skip(1).map(|d| d.len).product();
        rest as usize * self.data_type().size()
    }

    fn meta(&self) -> &ArrayMetadata {
        self.node.array().expect("checked to be an array")
    }
}

/// One object to write: a chunk, or a shard.
struct Unit {
    coords: Vec<u64>,
    /// One run per dimension, body positions relative to the row read.
    runs: Vec<Run>,
}

impl Dataset {
    /// Write `body` (the region's elements) into `write`'s region; the
    /// caches of this process drop what changed.
    pub async fn write_region(
        &self,
        write: &RegionWrite,
        body: Arc<dyn RegionBody>,
        options: &WriteOptions,
    ) -> Result<WriteOutcome> {
        let result = self.write_rows(write, body, options).await;
        self.forget_nodes().await;
        result
    }

    async fn write_rows(
        &self,
        write: &RegionWrite,
        body: Arc<dyn RegionBody>,
        options: &WriteOptions,
    ) -> Result<WriteOutcome> {
        let meta = write.meta();
        if write.elements() == 0 {
            return Ok(WriteOutcome::default());
        }
        let axes = &meta.chunk_grid.axes;
        let per_dim: Vec<Vec<Run>> = write
            .dims
            .iter()
            .zip(axes)
            .map(|(dim, axis)| runs(dim, axis, 0..dim.len))
            .collect();
        if meta.codecs.checks_values() {
            let rows = write.region_shape().first().copied().unwrap_or(1);
            check_values(&meta.codecs, rows, write.row_bytes(), &body, options).await?;
        }
        let items = body.items();
        let mut outcome = WriteOutcome::default();
        // A chunk row at a time: the runs of the first dimension.
        let rows: Vec<Option<Run>> = match per_dim.first() {
            None => vec![None],
            Some(first) => first.iter().copied().map(Some).collect(),
        };
        for row in rows {
            let (body_rows, mut body_shape) = match row {
                None => (0..1, Vec::new()),
                Some(r) => (r.out..r.out + r.count, write.region_shape()),
            };
            if let Some(first) = body_shape.first_mut() {
                *first = body_rows.end - body_rows.start;
            }
            let row_bytes = (body_rows.end - body_rows.start) * write.row_bytes() as u64;
            if row_bytes > options.max_row_bytes {
                return Err(Error::InvalidRequest(format!(
                    "one row of chunks of this region holds {row_bytes} bytes, more than a write takes at once ({}); write it in parts",
                    options.max_row_bytes
                )));
            }
            let source = body.clone();
            let range = body_rows.clone();
            let data = tokio::task::spawn_blocking(move || source.rows(range))
                .await
                .map_err(|e| Error::Internal(e.to_string()))?
                .map_err(|e| Error::InvalidRequest(format!("the body could not be read: {e}")))?;
            let mut dims = per_dim.clone();
            if let Some(r) = row {
                dims[0] = vec![Run { out: 0, ..r }];
            }
            let units = combinations(&dims).into_iter().map(|runs| Unit {
                coords: runs.iter().map(|r| r.chunk).collect(),
                runs,
            });
            let (data, body_shape, items) = (&data, &body_shape, &items);
            let mut done = futures::stream::iter(units)
                .map(|unit| self.write_unit(write, unit, (data.clone(), items.clone()), body_shape, options))
                .buffer_unordered(options.concurrency.max(1));
            while let Some(one) = done.next().await {
                match one {
                    Ok(one) => outcome = outcome.add(one),
                    Err(Error::PreconditionFailed(why)) => {
                        // Let the objects being written finish, then say which were replaced.
                        while let Some(Ok(one)) = done.next().await {
                            outcome = outcome.add(one);
                        }
                        return Err(Error::PreconditionFailed(already_replaced(why, &outcome.replaced)));
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(outcome)
    }

    async fn write_unit(
        &self,
        write: &RegionWrite,
        unit: Unit,
        (body, items): (Bytes, Option<Arc<Vec<Vec<u8>>>>),
        body_shape: &[u64],
        options: &WriteOptions,
    ) -> Result<WriteOutcome> {
        let meta = write.meta();
        let key = join(&write.node.path, &meta.chunk_key_encoding.encode(&unit.coords));
        let codecs = meta.codecs_at(&unit.coords).clone();
        let object = Object {
            key,
            body,
            items,
            body_shape: body_shape.to_vec(),
            // The whole chunk, out-of-bounds edges included: whether a
            // write covers it never depends on the shape this process has
            // cached (another writer may have grown the array since).
            inside: codecs.decoded_repr().shape.clone(),
            keep_fill: write.keep_fill,
            unit,
        };
        // Writers of one object in this process take turns; writers in
        // other processes are told apart by the conditional put.
        let _turn = turn(&self.scope, &object.key).lock().await;
        for attempt in 0..=options.retries {
            let result = match codecs.partial_sharding() {
                Some(sharding) => self.write_shard(&object, sharding, &codecs, options).await,
                None => self.write_chunk(&object, &codecs, options).await,
            };
            match result {
                Err(Error::Store(StoreError::Changed(_))) if options.expected.is_some() => {
                    return Err(changed_since_checked(&object.key))
                }
                Err(Error::Store(StoreError::Changed(_))) => back_off(attempt).await,
                other => return other.map_err(|e| e.at_key(&object.key)),
            }
        }
        Err(Error::Conflict(format!(
            "'{}' kept changing under this write ({} retries); objects written before it stay written",
            object.key, options.retries
        )))
    }

    /// The object's current bytes and what a put must expect; `None` when
    /// the write covers it (it is replaced whatever it holds, or, under an
    /// `If-Match`, only at the version that was checked).
    async fn current(&self, object: &Object, covered: bool, options: &WriteOptions) -> Result<(Option<Bytes>, Expect)> {
        // The version checked: `None` for an object that was not there.
        let checked = options.expected.as_ref().and_then(|v| v.get(&object.key));
        if covered {
            let expect = match checked {
                None => Expect::Anything,
                Some(version) => Expect::of(version.as_deref().map(Some)),
            };
            return Ok((None, expect));
        }
        let read = self.store.get(&object.key, ByteRange::All, None).await?;
        let version = read.as_ref().map(|r| r.info.etag.as_deref());
        if checked.is_some_and(|c| c.as_deref() != version.flatten()) {
            return Err(changed_since_checked(&object.key));
        }
        let expect = Expect::of(version);
        Ok((read.map(|r| r.data), expect))
    }

    async fn write_chunk(
        &self,
        object: &Object,
        codecs: &Arc<CodecChain>,
        options: &WriteOptions,
    ) -> Result<WriteOutcome> {
        let covered = object.unit.runs.iter().zip(&object.inside).all(|(r, &n)| r.covers(n));
        let (old, expect) = self.current(object, covered, options).await?;
        let existed = old.is_some();
        let (codecs_, body, body_shape, runs, keep_fill) = (
            codecs.clone(),
            object.body.clone(),
            object.body_shape.clone(),
            object.unit.runs.clone(),
            object.keep_fill,
        );
        let (items, buffers) = (object.items.clone(), self.resources.buffers.clone());
        let encoded = blocking(move || {
            let items = items.as_deref().map_or(&[][..], Vec::as_slice);
            let body = (&body, &body_shape[..], items);
            rebuilt(&codecs_, old, body, &runs, keep_fill, &buffers)
        })
        .await?;
        self.put_or_delete(&object.key, encoded.map(Payload::from), expect, existed || covered, 1)
            .await
    }

    async fn write_shard(
        &self,
        object: &Object,
        sharding: &ShardingCodec,
        codecs: &Arc<CodecChain>,
        options: &WriteOptions,
    ) -> Result<WriteOutcome> {
        let covered = object.unit.runs.iter().zip(&object.inside).all(|(r, &n)| r.covers(n));
        let (old, expect) = self.current(object, covered, options).await?;
        let existed = old.is_some();
        let count: u64 = sharding.chunks_per_shard().iter().product();
        let mut chunks: Vec<Option<Bytes>> = match old {
            None => vec![None; count as usize],
            Some(shard) => inner_chunks(sharding, shard, count as usize)?,
        };
        // A covered shard is not read; its index says which inner chunks
        // were stored (for the count of those the write removes).
        let stored: Vec<bool> = match covered {
            true => self.stored_inner(&object.key, sharding, count as usize).await?,
            false => chunks.iter().map(Option::is_some).collect(),
        };
        let inner_shape = sharding.inner_shape().to_vec();
        let per_dim: Vec<Vec<Run>> = object
            .unit
            .runs
            .iter()
            .zip(&inner_shape)
            .map(|(run, &n)| inner_runs(run, n))
            .collect();
        let shard_shape = codecs.decoded_repr().shape.clone();
        let mut touched = Vec::new();
        for runs in combinations(&per_dim) {
            let coords: Vec<u64> = runs.iter().map(|r| r.chunk).collect();
            let inside: Vec<u64> = coords
                .iter()
                .zip(&inner_shape)
                .zip(object.inside.iter().zip(&shard_shape))
                .map(|((&c, &n), (&shard_inside, _))| n.min(shard_inside.saturating_sub(c * n)))
                .collect();
            let covered = runs.iter().zip(&inside).all(|(r, &n)| r.covers(n));
            let i = sharding.linear_index(&coords);
            let old = match covered {
                true => None,
                false => chunks[i].clone(),
            };
            touched.push((i, runs, old));
        }
        let inner = sharding.inner_codecs().clone();
        let (body, body_shape) = (object.body.clone(), object.body_shape.clone());
        let (items, buffers) = (object.items.clone(), self.resources.buffers.clone());
        let results = blocking(move || {
            let items = items.as_deref().map_or(&[][..], Vec::as_slice);
            touched
                .into_iter()
                .map(|(i, runs, old)| {
                    let body = (&body, &body_shape[..], items);
                    Ok((i, rebuilt(&inner, old, body, &runs, false, &buffers)?))
                })
                .collect::<Result<Vec<_>>>()
        })
        .await?;
        let mut outcome = WriteOutcome::default();
        for (i, encoded) in results {
            match (stored[i], &encoded) {
                (_, Some(_)) => outcome.chunks_written += 1,
                (true, None) => outcome.chunks_deleted += 1,
                (false, None) => {}
            }
            chunks[i] = encoded;
        }
        let shard = match chunks.iter().all(Option::is_none) {
            true => None,
            false => Some(Payload::from(sharding.assemble(&chunks)?)),
        };
        let object_outcome = self
            .put_or_delete(&object.key, shard, expect, existed || covered, 0)
            .await?;
        Ok(WriteOutcome {
            chunks_written: outcome.chunks_written,
            chunks_deleted: outcome.chunks_deleted,
            ..object_outcome
        })
    }

    /// Which inner chunks the shard at `key` stores, from its index alone
    /// (none when it is missing).
    async fn stored_inner(&self, key: &str, sharding: &ShardingCodec, count: usize) -> Result<Vec<bool>> {
        let Some(info) = self.store.head(key).await? else {
            return Ok(vec![false; count]);
        };
        let range = sharding.index_range(info.size);
        let read = self
            .store
            .get(key, ByteRange::Bounded(range), info.etag.as_deref())
            .await?;
        let Some(read) = read else {
            return Ok(vec![false; count]);
        };
        let index = sharding.decode_index(read.data, info.size)?;
        Ok((0..count).map(|i| index.chunk_range(i).is_some()).collect())
    }

    /// Put `encoded` at `key` as `expect` says, or with nothing to store,
    /// delete what `may_exist`; `chunks` is how many chunks the object is
    /// (1 for a chunk; a shard counts its inner chunks itself).
    async fn put_or_delete(
        &self,
        key: &str,
        encoded: Option<Payload>,
        expect: Expect,
        may_exist: bool,
        chunks: u64,
    ) -> Result<WriteOutcome> {
        let mut outcome = WriteOutcome::default();
        match encoded {
            Some(bytes) => {
                outcome.bytes_written = bytes.len() as u64;
                self.store.put(key, bytes, expect).await?;
                outcome.objects_written = 1;
                outcome.chunks_written = chunks;
                outcome.replaced.push(key.to_string());
            }
            None if may_exist => {
                // Only a chunk read or covered here may have been stored.
                let existed = match &expect {
                    Expect::Anything => self.store.head(key).await?.is_some(),
                    Expect::Absent => false,
                    Expect::Version(_) => true,
                };
                if existed {
                    self.store.delete(key, expect).await?;
                    outcome.objects_deleted = 1;
                    outcome.chunks_deleted = chunks;
                    outcome.replaced.push(key.to_string());
                }
            }
            None => {}
        }
        Ok(outcome)
    }
}

/// The 412 of an object found at another version than the `If-Match`
/// check saw.
fn changed_since_checked(key: &str) -> Error {
    Error::PreconditionFailed(format!("'{key}' changed after If-Match was checked"))
}

fn already_replaced(why: String, replaced: &[String]) -> String {
    match replaced {
        [] => format!("{why}; nothing was written"),
        keys => format!(
            "{why}; these objects were already replaced: {}",
            keys.iter().map(|k| format!("'{k}'")).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// What [`Dataset::write_unit`] writes.
struct Object {
    key: String,
    body: Bytes,
    /// The body's variable-length elements, which its handles name.
    items: Option<Arc<Vec<Vec<u8>>>>,
    body_shape: Vec<u64>,
    /// The object's shape: a run covers it when it covers every position.
    inside: Vec<u64>,
    /// Store chunks that are all fill value too.
    keep_fill: bool,
    unit: Unit,
}

/// The encoded inner chunks of a shard, in index order.
fn inner_chunks(sharding: &ShardingCodec, shard: Bytes, count: usize) -> Result<Vec<Option<Bytes>>> {
    let size = shard.len() as u64;
    let range = sharding.index_range(size);
    if (range.end - range.start) as usize != sharding.index_size() {
        return Err(crate::engine::error::corrupt(format!(
            "shard of {size} bytes is too short for its index"
        )));
    }
    let index = sharding.decode_index(shard.slice(range.start as usize..range.end as usize), size)?;
    Ok((0..count)
        .map(|i| {
            index
                .chunk_range(i)
                .map(|r| shard.slice(r.start as usize..r.end as usize))
        })
        .collect())
}

/// The lock writers of `key` in dataset `scope` take turns by (one of a
/// fixed set: keys that hash alike share one).
fn turn(scope: &str, key: &str) -> &'static tokio::sync::Mutex<()> {
    use std::hash::{Hash, Hasher};
    static TURNS: std::sync::LazyLock<Vec<tokio::sync::Mutex<()>>> =
        std::sync::LazyLock::new(|| (0..1024).map(|_| tokio::sync::Mutex::new(())).collect());
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (scope, key).hash(&mut hasher);
    &TURNS[hasher.finish() as usize % TURNS.len()]
}

/// Wait a random while before trying an object another writer changed
/// again: up to 2^attempt ms, at most 250 ms.
async fn back_off(attempt: usize) {
    let most = (1u64 << attempt.min(8)).min(250);
    let wait = rand::random_range(0..=most);
    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
}

/// A chunk of `codecs` as `old` held it (the fill value when `None`)
/// with the elements of `body` (its bytes, its shape and the
/// variable-length items its handles name) that `runs` place in it,
/// encoded; `None` when it is left all fill value and `keep_fill` is off.
/// A fixed-size chunk is built in a buffer of `buffers`.
fn rebuilt(
    codecs: &CodecChain,
    old: Option<Bytes>,
    (body, body_shape, items): (&Bytes, &[u64], &[Vec<u8>]),
    runs: &[Run],
    keep_fill: bool,
    buffers: &Arc<BufferPool>,
) -> Result<Option<Bytes>> {
    let repr = codecs.decoded_repr();
    if repr.data_type.is_variable() {
        let count = repr.num_elements() as usize;
        let (mut handles, held) = vlen::chunk_handles(old, codecs, count)?;
        scatter(body, body_shape, &mut handles, &repr.shape, runs, 8);
        return match vlen::resolve(&handles, &held, items, &repr.fill_value, keep_fill) {
            None => Ok(None),
            Some(chunk) => codecs.encode(chunk).map(Some),
        };
    }
    // Chunk-sized buffers come from the pool and go back to it.
    let mut chunk = match old {
        Some(old) => Vec::from(codecs.decode(old)?),
        None => repr.fill_chunk_in(buffers),
    };
    scatter(body, body_shape, &mut chunk, &repr.shape, runs, repr.data_type.size());
    match !keep_fill && repr.is_fill(&chunk) {
        true => Ok(None),
        false => codecs
            .encode_in(BufferPool::into_bytes(buffers, chunk), Some(buffers))
            .map(Some),
    }
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Internal(format!("a write's encoding failed: {e}")))?
}

/// Refuse a body holding a value the array's codecs cannot encode (out of
/// a `cast_value` range, say) before anything is written: the body is
/// read once more, a bounded block of rows at a time.
pub(crate) async fn check_values(
    codecs: &Arc<CodecChain>,
    rows: u64,
    row_bytes: usize,
    body: &Arc<dyn RegionBody>,
    options: &WriteOptions,
) -> Result<()> {
    let step = (options.max_row_bytes.min(64 << 20) / (row_bytes as u64).max(1)).max(1);
    let mut start = 0;
    while start < rows {
        let range = start..(start + step).min(rows);
        start = range.end;
        let (source, codecs) = (body.clone(), codecs.clone());
        tokio::task::spawn_blocking(move || {
            let data = source
                .rows(range)
                .map_err(|e| Error::InvalidRequest(format!("the body could not be read: {e}")))?;
            codecs.check_values(data)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
    }
    Ok(())
}
