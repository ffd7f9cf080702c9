//! A geo variable's default colour range: the same for every tile and map
//! of the variable and selection, so that pictures side by side show no
//! seams.

use serde_json::Value;

use super::{Render, RenderRequest};
use crate::engine::error::Result;
use crate::engine::query::labels::LabelQuery;
use crate::engine::read::geo::GeoVariable;
use crate::engine::read::hierarchy::Dataset;

impl Dataset {
    /// `request` with `rescale` filled in when not given: the same for
    /// every tile and map of the variable and selection (no seams):
    /// `valid_min`/`valid_max`, else `valid_range`, else `actual_range`,
    /// else the slice's smallest and largest value ([`Dataset::slice_range`]),
    /// computed once and kept as long as metadata.
    pub async fn rendering(&self, var: &GeoVariable, labels: &LabelQuery, request: &RenderRequest) -> Result<Render> {
        if request.rescale.is_some() {
            return request.resolve();
        }
        let range = match declared_range(var) {
            Some(range) => Some(range),
            None => {
                let nodata = request.nodata.as_deref().and_then(|n| n.trim().parse().ok());
                let key = format!(
                    "{}|{}|{:?}|{:?}|{:?}",
                    self.scope, var.node.path, labels.sel, labels.method, nodata
                );
                self.resources
                    .caches
                    .colour_ranges
                    .try_get_with(key, self.slice_range(var, labels, nodata))
                    .await
                    .map_err(|e| (*e).clone())?
            }
        };
        let rescale = match range {
            Some((lo, hi)) if lo < hi => format!("{lo},{hi}"),
            Some((v, _)) => format!("{v},{}", v + 1.0),
            None => "0,1".into(),
        };
        RenderRequest {
            rescale: Some(rescale),
            ..request.clone()
        }
        .resolve()
    }
}

/// The range a variable's attributes declare: `valid_min`/`valid_max`,
/// else `valid_range`, else `actual_range`.
fn declared_range(var: &GeoVariable) -> Option<(f64, f64)> {
    let attrs = var.node.metadata.as_ref()?.attributes();
    let number = |key: &str| attrs.get(key).and_then(Value::as_f64);
    let pair = |key: &str| {
        let list = attrs.get(key)?.as_array()?;
        Some((list.first()?.as_f64()?, list.get(1)?.as_f64()?))
    };
    match (number("valid_min"), number("valid_max")) {
        (Some(lo), Some(hi)) => Some((lo, hi)),
        _ => pair("valid_range").or_else(|| pair("actual_range")),
    }
}
