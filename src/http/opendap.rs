//! What OPeNDAP's two protocols (`dap2/`, `dap4/`) share: what a request
//! sent, the positions a hyperslab picks along a dimension, an array's
//! dimension names, one length per name, and which attributes take the
//! variable's type.

use std::collections::HashMap;

use axum::extract::FromRequestParts;
use axum::http::{HeaderMap, Method};

use crate::identity::Caller;

/// What a client sent besides the route's parameters.
pub(super) struct Sent {
    pub caller: Caller,
    pub query: Option<String>,
    pub method: Method,
    pub headers: HeaderMap,
    /// The URL's path.
    pub path: String,
}

impl<S: Send + Sync> FromRequestParts<S> for Sent {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self {
            caller: Caller::from_request_parts(parts, state).await?,
            query: parts.uri.query().map(str::to_string),
            method: parts.method.clone(),
            headers: parts.headers.clone(),
            path: parts.uri.path().to_string(),
        })
    }
}

/// Attributes typed as the variable: fill and valid values.
pub(super) fn typed_as_variable(name: &str) -> bool {
    matches!(
        name,
        "_FillValue" | "missing_value" | "valid_min" | "valid_max" | "valid_range"
    )
}

/// The positions picked along one dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Slice {
    pub start: u64,
    pub stride: u64,
    pub count: u64,
}

impl Slice {
    /// Every position of a dimension of `len`.
    pub(super) fn whole(len: u64) -> Self {
        Self {
            start: 0,
            stride: 1,
            count: len,
        }
    }

    /// `start:stop:step` with `stop` exclusive, for the engine.
    pub(super) fn strided(&self) -> (u64, u64, u64) {
        let stop = match self.count {
            0 => self.start,
            n => self.start + (n - 1) * self.stride + 1,
        };
        (self.start, stop, self.stride)
    }

    /// DAP's inclusive `[start:stride:stop]`.
    pub(super) fn text(&self) -> String {
        let last = self.start + self.count.saturating_sub(1) * self.stride;
        format!("[{}:{}:{last}]", self.start, self.stride)
    }
}

/// An array's dimensions: each its name (`dimension_names`, else `dim_K`)
/// and length.
pub(super) fn dimensions(meta: &crate::engine::ArrayMetadata) -> Vec<(String, u64)> {
    let names = meta.dimension_names.as_deref().unwrap_or_default();
    meta.shape
        .iter()
        .enumerate()
        .map(|(d, &len)| {
            let name = names.get(d).cloned().flatten().unwrap_or_else(|| format!("dim_{d}"));
            (name, len)
        })
        .collect()
}

/// Give each dimension name one length among `arrays` (each: whether it is
/// a coordinate, and its dimensions' names and lengths), as netCDF-C makes
/// one dimension of a name: where arrays use a name with different
/// lengths, the first length (coordinates' first) keeps the name and the
/// others become `{name}_{length}` (with `_1`, `_2`... should that be
/// taken too).
pub(super) fn distinct_dimensions(mut arrays: Vec<(bool, &mut Vec<(String, u64)>)>) {
    // Stable: coordinates first, each kind in its order.
    arrays.sort_by_key(|(coordinate, _)| !*coordinate);
    let mut lengths: HashMap<String, u64> = HashMap::new();
    for (_, dims) in arrays {
        for (name, len) in dims.iter_mut() {
            if lengths.get(name.as_str()).is_some_and(|first| first != len) {
                let base = format!("{name}_{len}");
                let mut candidate = base.clone();
                let mut k = 0;
                while lengths.get(&candidate).is_some_and(|l| l != len) {
                    k += 1;
                    candidate = format!("{base}_{k}");
                }
                *name = candidate;
            }
            lengths.entry(name.clone()).or_insert(*len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_of_two_lengths_gets_the_second_as_a_suffix() {
        let (mut a, mut c, mut b) = (
            vec![("x".to_string(), 3), ("y".to_string(), 2)],
            vec![("x".to_string(), 5)],
            vec![("x".to_string(), 3)],
        );
        distinct_dimensions(vec![(false, &mut a), (true, &mut c), (false, &mut b)]);
        // The coordinate keeps `x`; the others' length 3 is `x_3`.
        assert_eq!(c[0].0, "x");
        assert_eq!((a[0].0.as_str(), b[0].0.as_str()), ("x_3", "x_3"));
        assert_eq!(
            Slice {
                start: 1,
                stride: 2,
                count: 3
            }
            .text(),
            "[1:2:5]"
        );
        assert_eq!(
            Slice {
                start: 1,
                stride: 2,
                count: 3
            }
            .strided(),
            (1, 6, 2)
        );
        assert_eq!(Slice::whole(0).strided(), (0, 0, 1));
    }
}
