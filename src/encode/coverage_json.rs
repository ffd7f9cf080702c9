//! CoverageJSON (OGC 21-069r2), as typed structs named as the
//! specification names its members, serialized straight into the body:
//! NdArray values are written from the answer's slices, `null` where
//! missing; axes of times and levels are borrowed, never copied per
//! coverage. What a document holds is the protocol's (EDR) to say.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;

use serde::ser::{Error as _, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value;

/// A CoverageJSON document: one coverage, or a collection of them.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum Document<'a> {
    One(Coverage<'a>),
    Collection(CoverageCollection<'a>),
}

/// One coverage: its domain, its parameters (unless a collection gives
/// them) and a range per parameter.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Coverage<'a> {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) domain: Domain<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parameters: Option<BTreeMap<String, Value>>,
    pub(crate) ranges: BTreeMap<String, NdArray<'a>>,
}

/// Several coverages sharing parameters and referencing.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CoverageCollection<'a> {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) domain_type: Option<&'static str>,
    pub(crate) parameters: BTreeMap<String, Value>,
    pub(crate) referencing: Vec<Referencing>,
    pub(crate) coverages: Vec<Coverage<'a>>,
}

/// Where a coverage's values are: its axes and their referencing.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Domain<'a> {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) domain_type: Option<&'static str>,
    pub(crate) axes: BTreeMap<String, Axis<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) referencing: Vec<Referencing>,
}

/// The system some of a domain's coordinates are in.
#[derive(Serialize, Clone)]
pub(crate) struct Referencing {
    pub(crate) coordinates: Vec<&'static str>,
    pub(crate) system: Value,
}

/// A parameter's values over the named axes.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NdArray<'a> {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) data_type: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) axis_names: Vec<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) shape: Vec<usize>,
    pub(crate) values: Values<'a>,
}

/// Values written as they are read: numbers, `null` where missing.
pub(crate) enum Values<'a> {
    /// Held whole.
    Slice(&'a [f64]),
    /// `count` pieces, each taken from `from` as it is written.
    Pieces {
        from: &'a RefCell<dyn Pieces + 'a>,
        count: usize,
    },
}

/// Where values come from a piece at a time (read while they are written).
pub(crate) trait Pieces {
    /// The next piece; an error ends the document short.
    fn next_piece(&mut self) -> io::Result<Vec<f64>>;
}

impl Serialize for Values<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let number = |v: &f64| v.is_finite().then_some(*v);
        match self {
            Values::Slice(values) => serializer.collect_seq(values.iter().map(number)),
            Values::Pieces { from, count } => {
                let mut seq = serializer.serialize_seq(None)?;
                let mut from = from.borrow_mut();
                for _ in 0..*count {
                    for v in &from.next_piece().map_err(S::Error::custom)? {
                        seq.serialize_element(&number(v))?;
                    }
                }
                seq.end()
            }
        }
    }
}

/// An NdArray of floats over `axis_names` of `shape`.
pub(crate) fn nd_array<'a>(axis_names: Vec<&'static str>, shape: Vec<usize>, values: Values<'a>) -> NdArray<'a> {
    NdArray {
        kind: "NdArray",
        data_type: "float",
        axis_names,
        shape,
        values,
    }
}

/// A domain axis: `{"values": [...]}` (the times and levels borrowed from
/// the answer, not copied per coverage), or another form.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum Axis<'a> {
    Numbers { values: Vec<f64> },
    Levels { values: &'a [f64] },
    Times { values: &'a [String] },
    Other(Value),
}
