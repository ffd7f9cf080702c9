//! The parameters of a region read, parsed once into one typed value: from
//! the query string (GET, HEAD, POST) and the JSON body (POST). Unknown or
//! repeated parameters are rejected here, naming them.

use serde_json::{Map, Value};

use super::problem::ApiError;
use crate::engine::labels::{Label, LabelSel, Method};
use crate::engine::reduce::ReduceRequest;
use crate::engine::render::RenderRequest;
use crate::engine::{ReadQuery, SelectValue, Selection};

/// The query parameters a region read takes.
const DATA_PARAMETERS: [&str; 11] = [
    "select",
    "format",
    "sel",
    "sel_method",
    "decode",
    "reduce",
    "axis",
    "coarsen",
    "rescale",
    "colormap",
    "nodata",
];

/// The fields a POST body may have.
const BODY_FIELDS: [&str; 4] = ["select", "sel", "sel_method", "points"];

/// Everything a region read asks.
#[derive(Debug, Default)]
pub(super) struct Query {
    /// Positions, labels and decoding.
    pub(super) read: ReadQuery,
    /// `format=`, when given.
    pub(super) format: Option<String>,
    /// `reduce`, `axis`, `coarsen`.
    pub(super) reduce: ReduceRequest,
    /// `rescale`, `colormap`, `nodata` (for `format=png`).
    pub(super) render: RenderRequest,
    /// Whether `select` was given (in the query or the body).
    has_select: bool,
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::BadRequest(message.into())
}

impl Query {
    /// Parse a region read's query string.
    pub(super) fn from_query_string(query: Option<&str>) -> Result<Self, ApiError> {
        let mut out = Query::default();
        let mut seen: Vec<std::borrow::Cow<str>> = Vec::new();
        for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            if !DATA_PARAMETERS.contains(&key.as_ref()) {
                return Err(unknown_parameter(&key, &DATA_PARAMETERS));
            }
            if key != "sel" && seen.contains(&key) {
                return Err(bad(format!("query parameter '{key}' given more than once")));
            }
            seen.push(key.clone());
            match key.as_ref() {
                "select" => {
                    out.read.selection = Selection::parse(&value)?;
                    out.has_select = !value.trim().is_empty();
                }
                "format" => out.format = Some(value.into_owned()),
                "sel" => out.read.labels.sel.push(parse_sel(&value)?),
                "sel_method" => out.read.labels.method = parse_method(&value)?,
                "reduce" => out.reduce.op = Some(value.into_owned()),
                "axis" => out.reduce.axis = Some(list_items(&value)),
                "coarsen" => out.reduce.coarsen = Some(list_items(&value)),
                "rescale" => out.render.rescale = Some(value.into_owned()),
                "colormap" => out.render.colormap = Some(value.into_owned()),
                "nodata" => out.render.nodata = Some(value.into_owned()),
                "decode" => match value.as_ref() {
                    "cf" => out.read.decode_cf = true,
                    other => return Err(bad(format!("decode '{other}' is not known: use decode=cf"))),
                },
                _ => unreachable!("checked above"),
            }
        }
        Ok(out)
    }

    /// Add a POST body (`application/json`, at most 1 MiB) to the query.
    pub(super) fn add_body(&mut self, body: &[u8]) -> Result<(), ApiError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let doc: Value = serde_json::from_slice(body).map_err(|e| bad(format!("the body is not valid JSON: {e}")))?;
        let Value::Object(fields) = doc else {
            return Err(bad("the body must be a JSON object"));
        };
        for key in fields.keys() {
            if !BODY_FIELDS.contains(&key.as_str()) {
                return Err(bad(format!(
                    "body field '{key}' is not known (fields: {})",
                    BODY_FIELDS.join(", ")
                )));
            }
        }
        if let Some(select) = fields.get("select") {
            if self.has_select {
                return Err(bad("select is given in both the query string and the body"));
            }
            self.read.selection = body_select(select)?;
            // `[]` (what some generated clients send for "unset") selects everything.
            self.has_select = select.as_array().is_some_and(|items| !items.is_empty());
        }
        if let Some(sel) = fields.get("sel") {
            let Value::Object(sel) = sel else {
                return Err(bad(
                    "body.sel must be an object of dimension name to label or [from, to]",
                ));
            };
            for (name, value) in sel {
                let pick = match value {
                    Value::Array(range) => match range.as_slice() {
                        [a, b] => LabelSel::Range(
                            body_label(a, &format!("body.sel.{name}[0]"))?,
                            body_label(b, &format!("body.sel.{name}[1]"))?,
                        ),
                        _ => return Err(bad(format!("body.sel.{name} must be a label or a [from, to] pair"))),
                    },
                    v => LabelSel::Point(body_label(v, &format!("body.sel.{name}"))?),
                };
                self.read.labels.sel.push((name.clone(), pick));
            }
        }
        if let Some(method) = fields.get("sel_method") {
            let text = method
                .as_str()
                .ok_or_else(|| bad("body.sel_method must be \"exact\" or \"nearest\""))?;
            self.read.labels.method = parse_method(text)?;
        }
        if let Some(points) = fields.get("points") {
            if self.has_select || !self.read.labels.sel.is_empty() {
                return Err(bad("points cannot be combined with select or sel"));
            }
            self.add_points(points)?;
        }
        Ok(())
    }

    /// `points`: `[[i, j, ...], ...]` positions, or `[{"dim": label, ...}, ...]`.
    fn add_points(&mut self, points: &Value) -> Result<(), ApiError> {
        let Value::Array(list) = points else {
            return Err(bad("body.points must be a list of points"));
        };
        let by_label = list.first().is_some_and(Value::is_object);
        if by_label {
            let mut labelled = Vec::with_capacity(list.len());
            for (p, point) in list.iter().enumerate() {
                let Value::Object(map) = point else {
                    return Err(bad(format!("body.points[{p}] must be an object like the first point")));
                };
                labelled.push(point_labels(map, p)?);
            }
            self.read.labels.points = Some(labelled);
        } else {
            let mut positions = Vec::with_capacity(list.len());
            for (p, point) in list.iter().enumerate() {
                positions.push(int_list(point, &format!("body.points[{p}]"))?);
            }
            self.read.selection = Selection::points(positions);
        }
        Ok(())
    }
}

/// The comma-separated items of `axis` or `coarsen`.
fn list_items(text: &str) -> Vec<String> {
    text.split(',').map(|s| s.trim().to_string()).collect()
}

/// The query parameters of a map tile and a TileJSON document.
const TILE_PARAMETERS: [&str; 6] = ["variable", "colormap", "rescale", "nodata", "sel", "sel_method"];

/// What a map tile asks: the variable, the other dimensions' labels, the
/// rendering.
#[derive(Debug, Default)]
pub(super) struct TileQuery {
    /// `variable`: the array's path.
    pub(super) variable: String,
    /// `sel`, `sel_method`.
    pub(super) labels: crate::engine::labels::LabelQuery,
    /// `rescale`, `colormap`, `nodata`.
    pub(super) render: RenderRequest,
}

impl TileQuery {
    /// Parse a tile's query string; `variable` is required.
    pub(super) fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        let mut out = TileQuery::default();
        let mut seen: Vec<std::borrow::Cow<str>> = Vec::new();
        for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            if !TILE_PARAMETERS.contains(&key.as_ref()) {
                return Err(unknown_parameter(&key, &TILE_PARAMETERS));
            }
            if key != "sel" && seen.contains(&key) {
                return Err(bad(format!("query parameter '{key}' given more than once")));
            }
            seen.push(key.clone());
            match key.as_ref() {
                "variable" => out.variable = value.trim_start_matches('/').to_string(),
                "sel" => out.labels.sel.push(parse_sel(&value)?),
                "sel_method" => out.labels.method = parse_method(&value)?,
                "rescale" => out.render.rescale = Some(value.into_owned()),
                "colormap" => out.render.colormap = Some(value.into_owned()),
                "nodata" => out.render.nodata = Some(value.into_owned()),
                _ => unreachable!("checked above"),
            }
        }
        if out.variable.is_empty() {
            return Err(bad("query parameter 'variable' (the array's path) is required"));
        }
        Ok(out)
    }
}

/// 400 for an unknown query parameter, naming it and the known ones.
pub(super) fn unknown_parameter(name: &str, known: &[&str]) -> ApiError {
    let takes = if known.is_empty() {
        "this route takes no query parameters".to_string()
    } else {
        format!("this route takes: {}", known.join(", "))
    };
    bad(format!("unknown query parameter '{name}' ({takes})"))
}

/// `DIM=VALUE` or `DIM=A..B`.
fn parse_sel(text: &str) -> Result<(String, LabelSel), ApiError> {
    let (name, value) = text
        .split_once('=')
        .filter(|(n, _)| !n.trim().is_empty())
        .ok_or_else(|| bad(format!("sel '{text}' must be DIM=VALUE or DIM=FROM..TO")))?;
    let label = |v: &str| Label::Text(v.trim().to_string());
    let pick = match value.split_once("..") {
        Some((a, b)) => LabelSel::Range(label(a), label(b)),
        None => LabelSel::Point(label(value)),
    };
    Ok((name.trim().to_string(), pick))
}

fn parse_method(text: &str) -> Result<Method, ApiError> {
    match text {
        "exact" => Ok(Method::Exact),
        "nearest" => Ok(Method::Nearest),
        other => Err(bad(format!("sel_method '{other}' is not known: use exact or nearest"))),
    }
}

/// A label in a body: a string or a number.
fn body_label(value: &Value, at: &str) -> Result<Label, ApiError> {
    match value {
        Value::String(s) => Ok(Label::Text(s.clone())),
        Value::Number(n) => n
            .as_f64()
            .map(Label::Number)
            .ok_or_else(|| bad(format!("{at}: {n} is not a usable number"))),
        other => Err(bad(format!("{at}: {other} is not a label (a string or a number)"))),
    }
}

/// One point given by labels: dimension name to label.
fn point_labels(map: &Map<String, Value>, p: usize) -> Result<Vec<(String, Label)>, ApiError> {
    map.iter()
        .map(|(name, v)| Ok((name.clone(), body_label(v, &format!("body.points[{p}].{name}"))?)))
        .collect()
}

/// A list of integers.
fn int_list(value: &Value, at: &str) -> Result<Vec<i64>, ApiError> {
    let Value::Array(items) = value else {
        return Err(bad(format!("{at} must be a list of integers")));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_i64()
                .ok_or_else(|| bad(format!("{at}[{i}]: {v} is not an integer")))
        })
        .collect()
}

/// The body's `select`: one item per dimension.
fn body_select(value: &Value) -> Result<Selection, ApiError> {
    let Value::Array(items) = value else {
        return Err(bad("body.select must be a list with one item per dimension"));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("body.select[{i}]");
        out.push(match item {
            Value::Number(n) => {
                SelectValue::Index(n.as_i64().ok_or_else(|| bad(format!("{at}: {n} is not an integer")))?)
            }
            Value::String(s) => SelectValue::Text(s.clone()),
            Value::Array(_) => SelectValue::List(int_list(item, &at)?),
            other => {
                return Err(bad(format!(
                    "{at}: {other} is not an integer, a \"start:stop:step\" string, \"...\" or a list"
                )))
            }
        });
    }
    Ok(Selection::from_items(out)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(r: Result<Query, ApiError>) -> u16 {
        r.map(|_| 200).unwrap_or_else(|e| e.status().as_u16())
    }

    #[test]
    fn query_strings() {
        let q =
            Query::from_query_string(Some("select=0:2&sel=time=2020-01-05&sel=lat=10..20&sel_method=nearest")).unwrap();
        assert_eq!(q.read.labels.sel.len(), 2);
        assert_eq!(q.read.labels.method, Method::Nearest);
        assert_eq!(
            q.read.labels.sel[1],
            (
                "lat".to_string(),
                LabelSel::Range(Label::Text("10".into()), Label::Text("20".into()))
            )
        );
        for bad in [
            "selct=1",
            "select=1&select=2",
            "sel_method=close",
            "decode=xarray",
            "sel=novalue",
            "format=npy&format=json",
        ] {
            assert_eq!(status(Query::from_query_string(Some(bad))), 400, "{bad}");
        }
        let e = Query::from_query_string(Some("selct=1")).unwrap_err().to_string();
        assert!(e.contains("'selct'"), "{e}");
    }

    #[test]
    fn bodies() {
        let mut q = Query::default();
        q.add_body(br#"{"select": [0, "1:3", [2, 0]], "sel": {"time": "2020-01-05", "lat": [10, 20.5]}, "sel_method": "nearest"}"#)
            .unwrap();
        assert_eq!(q.read.labels.sel.len(), 2);
        let mut q = Query::default();
        q.add_body(br#"{"points": [[0, 1], [2, 3]], "select": [], "sel": {}}"#)
            .unwrap();
        assert!(q.read.selection.point_list().is_some());
        let mut q = Query::default();
        q.add_body(br#"{"points": [{"time": "2020-01-05", "station": "Oslo"}]}"#)
            .unwrap();
        assert_eq!(q.read.labels.points.as_ref().unwrap()[0].len(), 2);
        for (body, needle) in [
            (&br#"{"selekt": []}"#[..], "selekt"),
            (br#"{"select": [1.5]}"#, "body.select[0]"),
            (br#"{"select": 3}"#, "body.select"),
            (br#"{"sel": {"t": [1]}}"#, "body.sel.t"),
            (br#"{"sel": {"t": true}}"#, "body.sel.t"),
            (br#"{"points": [[0, "x"]]}"#, "body.points[0][1]"),
            (br#"{"points": [[0]], "select": [1]}"#, "points cannot"),
            (br#"[1]"#, "object"),
            (br#"{"#, "JSON"),
            (br#"{"sel_method": 1}"#, "sel_method"),
        ] {
            let e = Query::default().add_body(body).unwrap_err().to_string();
            assert!(e.contains(needle), "{}: {e}", String::from_utf8_lossy(body));
        }
    }
}
