//! Other shapes of a whole dataset: `v2`, the dataset as a read-only Zarr
//! v2 store. Uses format, query and read; not compute.

pub(crate) mod v2;
