//! What a request asks of an array, resolved before anything is read:
//! NumPy selections, CF conventions, coordinate labels, the node a query
//! is planned against, and the read plan. Uses only [`super::format`].
//!
//! - `selection`: basic, orthogonal and point indexing;
//! - `cf`: CF time units and mask-and-scale; [`labels`]: label lookup on a
//!   coordinate;
//! - `node`: a node with its metadata (and its coordinates, once read);
//! - `plan`: which chunks a selection touches and how the result is cut
//!   into slabs;
//! - [`geo`]: geographic arrays (3.2): X/Y/T/Z dimensions, cells, tile
//!   matrix sets and the grid rows and columns a map raster samples.

pub(crate) mod cf;
pub mod geo;
pub mod labels;
pub(crate) mod node;
pub(crate) mod plan;
pub(crate) mod selection;
