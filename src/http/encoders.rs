//! The encoder of each region-read format, with what it needs from the
//! engine beyond the elements (labels, coordinates, a raster's place),
//! gathered and checked before any of the result's data is read.

use std::sync::Arc;

use serde_json::Value;

use super::data::RegionResult;
use super::format::Format;
use super::problem::ApiError;
use crate::encode::csv::Csv;
use crate::encode::geotiff::{geotiff as geotiff_encoder, Epsg, GeoTransform};
use crate::encode::json::Json;
use crate::encode::netcdf::{self, Attribute, NcType, NetCdf, Variable};
use crate::encode::npy::npy;
use crate::encode::{Encoder, Raw};
use crate::engine::geo::Crs;
use crate::engine::reduce::Reduction;
use crate::engine::{ColumnLabels, DataType, Dataset, DimSelection, Error, LabelColumn, ReadPlan};

/// What a format's encoder is made for.
pub(super) struct EncoderRequest<'a> {
    pub(super) dataset: &'a Dataset,
    pub(super) plan: &'a ReadPlan,
    pub(super) answer: &'a RegionResult,
    /// The reduction the answer is of the plan's result, if any.
    pub(super) reduction: Option<&'a Reduction>,
    /// Whether the result will be streamed slab by slab.
    pub(super) streamed: bool,
}

/// The encoder of `format` (not `png`, which is drawn).
pub(super) async fn encoder_for(format: Format, request: &EncoderRequest<'_>) -> Result<Arc<dyn Encoder>, ApiError> {
    let answer = request.answer;
    Ok(match format {
        Format::Binary => Arc::new(Raw::new(Vec::new(), answer.bytes())),
        Format::Npy => Arc::from(npy(answer.data_type, &answer.shape)),
        Format::Json => {
            let labels = answer.labels(request.dataset.result_coords(request.plan).await?);
            let slab_dim = request.streamed.then(|| request.plan.slab_result_dim()).flatten();
            Arc::new(Json::new(answer.data_type, &answer.shape, Some(labels), slab_dim))
        }
        Format::Csv => Arc::new(csv(request).await?),
        Format::NetCdf => Arc::new(netcdf(request).await?),
        Format::GeoTiff => Arc::new(geotiff(request).await?),
        Format::Png => unreachable!("pictures are drawn, not encoded"),
    })
}

/// The array's name (its last path segment) names its values.
fn value_name(plan: &ReadPlan) -> &str {
    match plan.node().path.rsplit('/').next() {
        Some(name) if !name.is_empty() => name,
        _ => "value",
    }
}

async fn csv(request: &EncoderRequest<'_>) -> Result<Csv, ApiError> {
    let (answer, plan) = (request.answer, request.plan);
    let mut columns = Vec::new();
    for column in request.dataset.label_columns(plan).await? {
        // A reduction keeps some dimensions; a coarsened one is labelled by position.
        if !answer.kept[column.dim] {
            continue;
        }
        let dim = answer.kept[..column.dim].iter().filter(|k| **k).count();
        let labels = match answer.coarsened[column.dim] {
            true => ColumnLabels::Positions(DimSelection::all(answer.shape[dim])),
            false => column.labels,
        };
        columns.push(LabelColumn { dim, labels, ..column });
    }
    Ok(Csv::new(answer.data_type, &answer.shape, columns, value_name(plan)))
}

async fn netcdf(request: &EncoderRequest<'_>) -> Result<NetCdf, ApiError> {
    let (answer, plan) = (request.answer, request.plan);
    let nc_type = NcType::of(answer.data_type).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "format=netcdf cannot carry {} values: use json or npy",
            answer.data_type.name()
        ))
    })?;
    if answer.shape.contains(&0) {
        return Err(ApiError::BadRequest(format!(
            "format=netcdf cannot hold an empty result (shape {:?}): a netCDF classic \
             dimension of length 0 is the record dimension",
            answer.shape
        )));
    }
    let name = value_name(plan);
    let mut dims = Vec::new();
    let mut coordinates = Vec::new();
    let result_dims = request.dataset.result_dimensions(plan).await?;
    for (d, dim) in result_dims.into_iter().enumerate().filter(|(d, _)| answer.kept[*d]) {
        let index = dims.len();
        dims.push((dim.name.clone(), answer.shape[index]));
        let coordinate = dim.coordinate.filter(|_| !answer.coarsened[d] && dim.name != name);
        let Some(c) = coordinate else { continue };
        // Text labels have no netCDF classic numbers: positions stand.
        let Some(nc_type) = NcType::of(c.data_type) else {
            continue;
        };
        let attributes = netcdf::variable_attributes(c.data_type, &c.attributes, &c.v2_fill, false);
        let var = Variable {
            name: dim.name,
            dims: vec![index],
            nc_type,
            attributes,
        };
        coordinates.push((var, netcdf::big_endian(c.data_type, &c.data)));
    }
    let node = plan.node();
    let attributes = node.attributes().cloned().unwrap_or_default();
    // Packing still describes stored values reduced by min, max or mean;
    // a sum, spread or count is a new quantity without it.
    let decoded = plan.cf_decoded() || request.reduction.is_some_and(|r| !r.keeps_packing());
    let result = Variable {
        name: name.to_string(),
        dims: (0..dims.len()).collect(),
        nc_type,
        attributes: netcdf::variable_attributes(answer.data_type, &attributes, &node.v2_fill_value(), decoded),
    };
    let parent = node.path.rsplit_once('/').map_or("", |(p, _)| p);
    let group = request.dataset.node(parent).await?;
    let globals: Vec<Attribute> = group
        .attributes()
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(name, _)| !name.is_empty())
        .filter_map(|(name, value)| Attribute::from_json(name, value))
        .collect();
    let encoder = NetCdf::new(&dims, &globals, &coordinates, &result).map_err(Error::Internal)?;
    // A reduction is read whole and little-endian: swapped as it is encoded.
    Ok(match request.reduction {
        Some(_) => encoder.swapping(answer.data_type),
        None => encoder,
    })
}

async fn geotiff(request: &EncoderRequest<'_>) -> Result<Raw, ApiError> {
    let (answer, plan) = (request.answer, request.plan);
    if request.reduction.is_some() {
        return Err(ApiError::BadRequest(
            "format=geotiff takes a region of a geo variable, not a reduction".into(),
        ));
    }
    let var = request.dataset.geo_variable(&plan.node().path).await?;
    let place = var
        .placement(plan)
        .map_err(|e| ApiError::BadRequest(format!("format=geotiff: {e}")))?;
    let crs = match &place.crs {
        Crs::Crs84 => Epsg {
            code: 4326,
            geographic: true,
        },
        Crs::Projected(p) => {
            let code = p.name.strip_prefix("EPSG:").and_then(|c| c.parse::<u16>().ok());
            let code = code.ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "format=geotiff needs an EPSG code for the CRS, and this one is '{}'",
                    p.name
                ))
            })?;
            Epsg {
                code,
                geographic: false,
            }
        }
    };
    let transform = GeoTransform {
        x0: place.x0,
        dx: place.dx,
        y0: place.y0,
        dy: place.dy,
    };
    let node = plan.node();
    let nodata = match plan.cf_decoded() {
        true => Some("nan".to_string()),
        false => nodata(answer.data_type, node.attributes(), &node.v2_fill_value()),
    };
    let shape = (answer.shape[0], answer.shape[1]);
    geotiff_encoder(answer.data_type, shape, transform, crs, nodata.as_deref())
        .map_err(|e| ApiError::BadRequest(format!("format=geotiff: {e}")))
}

/// GDAL's nodata text of stored values: NaN for floats unless a fill
/// value says otherwise; the `_FillValue` (else `missing_value`, else a v2
/// `fill_value`) of integers.
fn nodata(data_type: DataType, attributes: Option<&Value>, v2_fill: &Value) -> Option<String> {
    let float = matches!(data_type, DataType::Float16 | DataType::Float32 | DataType::Float64);
    let fill = ["_FillValue", "missing_value"]
        .iter()
        .filter_map(|name| attributes.and_then(|a| a.get(name)))
        .chain(std::iter::once(v2_fill).filter(|v| !v.is_null()))
        .find_map(|v| crate::engine::attribute_number(v, data_type));
    match fill {
        Some(v) if v.is_nan() => Some("nan".into()),
        Some(v) if float => Some(format!("{v:?}")),
        Some(v) if v.fract() == 0.0 => Some(format!("{}", v as i128)),
        _ if float => Some("nan".into()),
        _ => None,
    }
}
