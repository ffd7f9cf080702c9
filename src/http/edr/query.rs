//! An EDR query: its parameters checked, its geometry turned into grid
//! cells, and those cells read CF-decoded through the engine, every
//! variable the same way. The size is checked before anything is read.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::output::{self, Format};
use super::parts::Parts;
use super::wkt::{self, Geometry, Vertex};
use super::{find_collection, Collection};
use crate::engine::geo::region::{in_rings, CellWindow};
use crate::engine::geo::{wrap_longitude, GeoGrid};
use crate::engine::labels::{Label, Method};
use crate::engine::{Along, AxisPick, CellPart, CellRead, Dataset, Error, GeoVariable, PartSize, ReadPlan, Versions};
use crate::http::respond::{Answer, Checked};
use crate::http::{ApiError, AppState};
use crate::identity::Caller;

/// What was read: the parameters, the T and Z labels, and the values at
/// the query's places.
pub(super) struct Extract {
    pub(super) vars: Vec<GeoVariable>,
    /// The selected time steps (ISO 8601), when the variables have a T axis.
    pub(super) times: Option<Vec<String>>,
    /// The selected levels, when they have a Z axis.
    pub(super) levels: Option<Vec<f64>>,
    pub(super) shape: Shape,
    /// The values' share of the answer budget, held until they are written.
    pub(super) held: Option<OwnedSemaphorePermit>,
}

/// Where the values are.
pub(super) enum Shape {
    /// Points (cell centres in CRS84): per variable, values `[point][t][z]`.
    Points {
        points: Vec<(f64, f64)>,
        values: Vec<Vec<f64>>,
    },
    /// A window of the grid (centres in the grid's CRS, and in CRS84 per
    /// cell), its values read a part at a time as they are written.
    Grid {
        xs: Vec<f64>,
        ys: Vec<f64>,
        grid: Arc<GeoGrid>,
        parts: Box<RefCell<Parts>>,
    },
    /// Steps along a trajectory: per step its centre, time and level
    /// indices into `times` / `levels`; per variable a value per step.
    Trajectory { steps: Vec<Step>, values: Vec<Vec<f64>> },
}

/// One step of a trajectory.
pub(super) struct Step {
    pub(super) x: f64,
    pub(super) y: f64,
    pub(super) t: Option<usize>,
    pub(super) z: Option<usize>,
}

/// The query parameters EDR queries take.
const KNOWN: [&str; 10] = [
    "coords",
    "bbox",
    "within",
    "within-units",
    "datetime",
    "z",
    "parameter-name",
    "parameter_names",
    "crs",
    "f",
];

/// The query string's parameters (the first of a repeated name wins).
#[derive(Clone)]
struct Params(HashMap<String, String>);

impl Params {
    fn parse(query: Option<&str>) -> Self {
        let mut map = HashMap::new();
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            map.entry(k.into_owned()).or_insert_with(|| v.into_owned());
        }
        Self(map)
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str).filter(|v| !v.trim().is_empty())
    }
}

fn bad(text: impl Into<String>) -> ApiError {
    ApiError::BadRequest(text.into())
}

/// `GET /v1/datasets/{ds}/edr/collections/{c}/{query}`.
pub(super) async fn answer(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, c, query)): Path<(String, String, String)>,
    RawQuery(raw): RawQuery,
    method: axum::http::Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let dataset = &state.dataset(&ds, &caller).await?;
    if !super::QUERIES.contains(&query.as_str()) {
        return Err(ApiError::NotFound(format!(
            "no EDR query '{query}' (queries: {})",
            super::QUERIES.join(", ")
        )));
    }
    let collection = find_collection(dataset, &ds, &c).await?;
    let params = Params::parse(raw.as_deref());
    if let Some(unknown) = params.0.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(bad(format!(
            "unknown query parameter '{unknown}' (parameters: {})",
            KNOWN.join(", ")
        )));
    }
    let format = Format::named(params.get("f"), &query)?;
    if let Some(crs) = params.get("crs") {
        if !matches!(
            crs.trim(),
            "CRS84" | "OGC:CRS84" | "http://www.opengis.net/def/crs/OGC/1.3/CRS84"
        ) {
            return Err(bad(format!("crs '{crs}' is not served: the only CRS is CRS84")));
        }
    }
    let vars = parameters(
        &collection,
        params.get("parameter-name").or(params.get("parameter_names")),
    )?;
    let grid = vars[0].grid.clone();
    let times = times(&vars[0], params.get("datetime"))?;
    let levels = levels(&vars[0], params.get("z"))?;
    let mut request = Request {
        dataset,
        vars,
        times,
        levels,
        limit: state.max_response_bytes,
    };
    let job = match query.as_str() {
        "position" => request.points(&grid, &points(&params, "position")?)?,
        "trajectory" => request.trajectory(&grid, &params)?,
        _ => {
            let limits = Limits {
                cells: request.most_cells(),
                vertices: state.edr_max_polygon_vertices,
            };
            // Up to hundreds of millions of cells tested: off the async workers.
            let (g, q, p) = (grid.clone(), query.clone(), params.clone());
            let found = tokio::task::spawn_blocking(move || window(&g, &q, &p, &limits))
                .await
                .map_err(|e| ApiError::Engine(Error::Internal(format!("the region's cells: {e}"))))??;
            let window = found.map_err(|cells| request.refuse(cells).expect_err("more cells than allowed"))?;
            request.window(grid, window, format)?
        }
    };
    let plans = match &job.places {
        Places::Window(.., parts) => {
            let reads: Vec<CellRead> = parts.iter().map(|p| job.reads[0].part(p)).collect();
            request.plan(&reads).await?
        }
        _ => request.plan(&job.reads).await?,
    };
    let (times, levels) = request.labels();
    let mut described = Answer::new(&state, dataset, "edr", format.media_type())
        .key(&c)
        .key(&query)
        .key(format!("{format:?}|{times:?}|{levels:?}"))
        .key(job.key(&request.vars[0].grid))
        // A NetCDF file's length is known from its coordinates: a HEAD is
        // measured (its values never read), not answered without one.
        .streamed(format != Format::NetCdf);
    for plan in plans.iter().flatten() {
        described = described.plan(plan);
    }
    let ready = match described.check(&method, &headers).await? {
        Checked::Answered(response) => return Ok(response),
        Checked::Read(ready) => ready,
    };
    let held = match ready.is_head() {
        true => None,
        false => request.hold(&job).await?,
    };
    let pinned = ready.versions();
    let shape = match job.places {
        Places::Window(grid, window, list) => Shape::Grid {
            xs: window.cols.iter().map(|&c| grid.x.centre(c)).collect(),
            ys: window.rows.iter().map(|&r| grid.y.centre(r)).collect(),
            grid,
            parts: Box::new(RefCell::new(Parts::new(
                list,
                window,
                (request.dataset, &request.vars),
                (plans, pinned),
                state.metrics.clone(),
            ))),
        },
        Places::Points(cells) => Shape::Points {
            values: request.read(&plans, pinned).await?,
            points: cells.iter().map(|&c| request.centre(c)).collect(),
        },
        Places::Trajectory => {
            let values = request.read(&plans, pinned).await?;
            request.trajectory_shape(&job.reads, values)
        }
    };
    output::respond(format, request.extract(shape, held), ready).await
}

/// The variables `names` picks, which must share one grid; without
/// names, the first variable and every other on the same grid.
fn parameters(c: &Collection, names: Option<&str>) -> Result<Vec<GeoVariable>, ApiError> {
    let Some(list) = names else {
        let first = &c.vars[0];
        return Ok(c.vars.iter().filter(|v| same_grid(first, v)).cloned().collect());
    };
    // Each named once, however often the list repeats it.
    let mut names: Vec<&str> = Vec::new();
    for name in list.split(',').map(str::trim) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let vars: Vec<GeoVariable> = names
        .into_iter()
        .map(|name| {
            c.vars
                .iter()
                .find(|v| Collection::name(v) == name)
                .cloned()
                .ok_or_else(|| {
                    let known: Vec<&str> = c.vars.iter().map(Collection::name).collect();
                    bad(format!(
                        "no parameter '{name}' in collection '{}' (parameters: {})",
                        c.id,
                        known.join(", ")
                    ))
                })
        })
        .collect::<Result<_, _>>()?;
    if let Some(other) = vars.iter().find(|v| !same_grid(&vars[0], v)) {
        return Err(bad(format!(
            "parameters '{}' and '{}' lie on different grids: ask for them in separate queries",
            Collection::name(&vars[0]),
            Collection::name(other)
        )));
    }
    Ok(vars)
}

/// Whether two variables have the same cells, time steps and levels.
fn same_grid(a: &GeoVariable, b: &GeoVariable) -> bool {
    let axis_len = |v: &GeoVariable, d: Option<usize>| d.and_then(|d| v.node.array().ok().map(|m| m.shape[d]));
    a.grid.x == b.grid.x
        && a.grid.y == b.grid.y
        && a.grid.crs == b.grid.crs
        && axis_len(a, a.grid.t_dim) == axis_len(b, b.grid.t_dim)
        && axis_len(a, a.grid.z_dim) == axis_len(b, b.grid.z_dim)
}

/// The T positions `datetime` picks (an instant: the nearest step;
/// `a/b`, `../b`, `a/..`: the steps between), every one without it;
/// `None` when the variable has no T axis.
fn times(var: &GeoVariable, datetime: Option<&str>) -> Result<Option<Vec<u64>>, ApiError> {
    let label = |s: &str| match s.trim() {
        "" | ".." => None,
        s => Some(Label::Text(s.to_string())),
    };
    let pick = datetime.map(|text| match text.split_once('/') {
        None => AxisPick::Labels(vec![Label::Text(text.trim().to_string())], Method::Nearest),
        Some((a, b)) => AxisPick::Between(label(a), label(b)),
    });
    picked(var, Along::Time, pick, "datetime", datetime)
}

/// The Z positions `z` picks (a value: the nearest level; `a/b`: the
/// levels between; a comma list: the nearest of each); every one without it.
fn levels(var: &GeoVariable, z: Option<&str>) -> Result<Option<Vec<u64>>, ApiError> {
    let number = |s: &str| -> Result<Label, ApiError> {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(Label::Number)
            .ok_or_else(|| bad(format!("z '{s}' is not a number")))
    };
    let pick = match z {
        None => None,
        Some(text) => Some(match text.split_once('/') {
            Some((a, b)) => AxisPick::Between(Some(number(a)?), Some(number(b)?)),
            None => AxisPick::Labels(text.split(',').map(number).collect::<Result<_, _>>()?, Method::Nearest),
        }),
    };
    picked(var, Along::Level, pick, "z", z)
}

/// The engine's pick along T or Z, its refusals naming parameter `name`.
fn picked(
    var: &GeoVariable,
    along: Along,
    pick: Option<AxisPick>,
    name: &str,
    text: Option<&str>,
) -> Result<Option<Vec<u64>>, ApiError> {
    var.pick_along(along, pick.as_ref()).map_err(|e| match e {
        Error::InvalidRequest(why) => bad(format!("{name} '{}': this collection {why}", text.unwrap_or_default())),
        other => other.into(),
    })
}

fn geometry(params: &Params) -> Result<Geometry, ApiError> {
    let text = params.get("coords").ok_or_else(|| bad("coords (WKT) is required"))?;
    wkt::parse(text).map_err(|e| bad(format!("coords: {e}")))
}

/// The points of `POINT` or `MULTIPOINT` coords.
fn points(params: &Params, query: &str) -> Result<Vec<Vertex>, ApiError> {
    match geometry(params)? {
        Geometry::Point(p) => Ok(vec![p]),
        Geometry::MultiPoint(ps) => Ok(ps),
        other => Err(bad(format!(
            "coords: a {query} query takes POINT or MULTIPOINT, not {}",
            other.kind()
        ))),
    }
}

/// How far a region query may reach.
struct Limits {
    /// Most cells to look at ([`Request::most_cells`]).
    cells: u64,
    /// `edr_max_polygon_vertices`.
    vertices: u32,
}

/// The cells of an `area`, `cube` or `radius` query, or `Ok(Err(n))` when
/// the region spans `n` candidate cells, more than the limit allows,
/// before any is looked at.
fn window(grid: &GeoGrid, query: &str, params: &Params, limits: &Limits) -> Result<Result<CellWindow, u64>, ApiError> {
    let max_vertices = limits.vertices;
    let found = match query {
        "cube" => {
            let text = params.get("bbox").ok_or_else(|| bad("bbox is required"))?;
            let v: Vec<f64> = text
                .split(',')
                .map(|n| n.trim().parse::<f64>())
                .collect::<Result<_, _>>()
                .map_err(|_| bad(format!("bbox '{text}' is not west,south,east,north")))?;
            let [w, s, e, n] = match v.as_slice() {
                [w, s, e, n] | [w, s, _, e, n, _] => [*w, *s, *e, *n],
                _ => return Err(bad(format!("bbox '{text}' is not west,south,east,north"))),
            };
            if s > n {
                return Err(bad(format!("bbox '{text}': south is north of north")));
            }
            grid.cells_within([w, s, e, n], limits.cells, |_, _| true)
        }
        "radius" => {
            let points = points(params, "radius")?;
            let within = params.get("within").ok_or_else(|| bad("within is required"))?;
            let within: f64 = within
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| *v >= 0.0 && v.is_finite())
                .ok_or_else(|| bad(format!("within '{within}' is not a distance")))?;
            let km = match params
                .get("within-units")
                .unwrap_or("km")
                .trim()
                .to_ascii_lowercase()
                .as_str()
            {
                "km" => within,
                "m" => within / 1000.0,
                "mi" => within * 1.609_344,
                other => return Err(bad(format!("within-units '{other}': use km, m or mi"))),
            };
            let centres: Vec<(f64, f64)> = points.iter().map(|p| (p.x, p.y)).collect();
            grid.cells_within_km(&centres, km, limits.cells)
        }
        _ => {
            let rings: Vec<Vec<(f64, f64)>> = match geometry(params)? {
                Geometry::Polygon(p) => p,
                Geometry::MultiPolygon(ps) => ps.into_iter().flatten().collect(),
                other => {
                    return Err(bad(format!(
                        "coords: an area query takes POLYGON or MULTIPOLYGON, not {}",
                        other.kind()
                    )))
                }
            }
            .into_iter()
            .map(|ring| ring.iter().map(|v| (v.x, v.y)).collect())
            .collect();
            let vertices: usize = rings.iter().map(Vec::len).sum();
            if vertices > max_vertices as usize {
                return Err(bad(format!(
                    "coords: the polygon has {vertices} vertices, more than edr_max_polygon_vertices = {max_vertices}"
                )));
            }
            let all = rings.iter().flatten();
            let (w, e) = all
                .clone()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.0), b.max(p.0)));
            let (s, n) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.1), b.max(p.1)));
            grid.cells_within([w, s, e, n], limits.cells, |lon, lat| in_rings(&rings, lon, lat))
        }
    };
    match found {
        Err(cells) => Ok(Err(cells)),
        Ok(found) => found
            .map(Ok)
            .ok_or_else(|| outside(grid, &format!("the {query} query's region holds no cell centre"))),
    }
}

/// 400 naming the collection's extent.
fn outside(grid: &GeoGrid, what: &str) -> ApiError {
    let [w, s, e, n] = grid.bounds();
    bad(format!(
        "{what} of the collection, whose extent is [{w}, {s}, {e}, {n}] (west, south, east, north; CRS84)"
    ))
}

/// The cell of point `p`, or 400 naming the extent.
fn cell_of(grid: &GeoGrid, p: &Vertex) -> Result<(u64, u64), ApiError> {
    match grid.cell(p.x, p.y) {
        (Some(col), Some(row)) => Ok((col, row)),
        _ => Err(outside(grid, &format!("POINT({} {}) is outside the extent", p.x, p.y))),
    }
}

/// The answer budget a window holds for each value of a part while it
/// streams: two parts' values (one written, one queued) and one part being
/// read (its stored elements, then its values: twice over), 8 bytes each.
const WINDOW_BYTES_A_VALUE: u64 = 32;

/// A query's reads.
struct Request<'a> {
    dataset: &'a Dataset,
    vars: Vec<GeoVariable>,
    times: Option<Vec<u64>>,
    levels: Option<Vec<u64>>,
    limit: u64,
}

impl Request<'_> {
    fn steps(&self) -> u64 {
        self.times.as_ref().map_or(1, |t| t.len() as u64) * self.levels.as_ref().map_or(1, |z| z.len() as u64)
    }

    /// The values' memory, once the answer is to be read, held under the
    /// answer budget (`slab_budget_bytes`) until written: every value of
    /// points and trajectories; for a window, [`WINDOW_BYTES_A_VALUE`] for
    /// each value of its largest part.
    async fn hold(&self, job: &Job) -> Result<Option<OwnedSemaphorePermit>, ApiError> {
        let held = match &job.places {
            Places::Window(.., parts) => Parts::most_values(parts)
                .saturating_mul(self.vars.len() as u64)
                .saturating_mul(WINDOW_BYTES_A_VALUE),
            _ => self.refuse_whole(job.values)?,
        };
        Ok(self.dataset.resources().hold_answer_bytes(held as usize).await?)
    }

    /// The answer's size for `cells` cells at every step, or 413 above
    /// `max_response_bytes` (counted as a region read counts them).
    fn refuse(&self, cells: u64) -> Result<u64, ApiError> {
        self.refuse_values(cells.saturating_mul(self.steps()))
    }

    /// [`Request::refuse`] for `values` values of each variable.
    fn refuse_values(&self, values: u64) -> Result<u64, ApiError> {
        let requested = values.saturating_mul(self.vars.len() as u64).saturating_mul(8);
        if requested > self.limit {
            return Err(ApiError::TooLarge {
                requested,
                limit: self.limit,
            });
        }
        Ok(requested)
    }

    /// The bytes `values` values of each variable hold while read: the
    /// values, and as much again (the stored elements, then each decoded
    /// to f64).
    fn held_bytes(&self, values: u64) -> u64 {
        values.saturating_mul(self.vars.len() as u64).saturating_mul(16)
    }

    /// The bytes of points' or a trajectory's `values` values (read whole),
    /// or 413: above `max_response_bytes`, or above the answer budget.
    fn refuse_whole(&self, values: u64) -> Result<u64, ApiError> {
        self.refuse_values(values)?;
        let held = self.held_bytes(values);
        let budget = self.dataset.resources().slab_budget_bytes();
        if held > budget {
            return Err(ApiError::Rejected(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the answer's values would hold {held} bytes in memory, more than slab_budget_bytes = {budget}; \
                     position and trajectory answers are read whole: ask for fewer places, times or parameters"
                ),
            ));
        }
        Ok(held)
    }

    /// The most cells [`Request::refuse`] lets through (what a region's
    /// candidate cells are counted against before any is looked at).
    fn most_cells(&self) -> u64 {
        let (mut lo, mut hi) = (0u64, u64::MAX / 2);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            match self.refuse(mid) {
                Ok(_) => lo = mid,
                Err(_) => hi = mid - 1,
            }
        }
        lo
    }

    /// Plan `reads` of every variable: per read, per variable.
    async fn plan<'r>(&self, reads: impl IntoIterator<Item = &'r CellRead>) -> Result<Vec<Vec<ReadPlan>>, Error> {
        let mut out = Vec::new();
        for read in reads {
            let mut each = Vec::with_capacity(self.vars.len());
            for var in &self.vars {
                each.push(self.dataset.plan_cells(var, read).await?);
            }
            out.push(each);
        }
        Ok(out)
    }

    /// The planned reads, pinned to `pinned`: per variable, the values of
    /// every read in turn (each in T, Z, Y, X order).
    async fn read(&self, plans: &[Vec<ReadPlan>], pinned: &Versions) -> Result<Vec<Vec<f64>>, Error> {
        let mut values = vec![Vec::new(); self.vars.len()];
        for each in plans {
            for ((var, plan), out) in self.vars.iter().zip(each).zip(&mut values) {
                let (got, _) = self.dataset.read_cells(var, plan, Some(pinned)).await?;
                match out.is_empty() {
                    true => *out = got,
                    false => out.extend(got),
                }
            }
        }
        Ok(values)
    }

    fn labels(&self) -> (Option<Vec<String>>, Option<Vec<f64>>) {
        let var = &self.vars[0];
        let times = self.times.as_ref().map(|ts| {
            let c = var.grid.t_dim.and_then(|d| var.coordinate(d));
            ts.iter()
                .map(|&i| match c.map(|c| c.label_json(i)) {
                    Some(label) => super::instant(&label),
                    None => i.to_string(),
                })
                .collect()
        });
        let levels = self.levels.as_ref().map(|zs| {
            let c = var.grid.z_dim.and_then(|d| var.coordinate(d)).and_then(|c| c.numbers());
            zs.iter().map(|&i| c.map_or(i as f64, |v| v[i as usize])).collect()
        });
        (times, levels)
    }

    /// A position query: the cell of each point (413 before any read).
    fn points(&self, grid: &GeoGrid, points: &[Vertex]) -> Result<Job, ApiError> {
        let cells: Vec<(u64, u64)> = points.iter().map(|p| cell_of(grid, p)).collect::<Result<_, _>>()?;
        self.refuse_whole(cells.len() as u64 * self.steps())?;
        let reads = cells
            .iter()
            .map(|&(col, row)| CellRead {
                cols: vec![col],
                rows: vec![row],
                times: self.times.clone(),
                levels: self.levels.clone(),
            })
            .collect();
        Ok(Job {
            values: cells.len() as u64 * self.steps(),
            places: Places::Points(cells),
            reads,
        })
    }

    /// An area, radius, cube or corridor query: its window of cells, cut
    /// into parts of about `slab_bytes` of values (more, within the answer
    /// budget, to end at a chunk boundary) in the order `format` writes
    /// them.
    fn window(&self, grid: Arc<GeoGrid>, window: CellWindow, format: Format) -> Result<Job, ApiError> {
        self.refuse(window.inside.len() as u64)?;
        let whole = CellRead {
            cols: window.cols.clone(),
            rows: window.rows.clone(),
            times: self.times.clone(),
            levels: self.levels.clone(),
        };
        // About slab_bytes of values a part (less if the answer budget holds
        // less); up to what the budget holds to end at a chunk boundary.
        let resources = self.dataset.resources();
        let vars = self.vars.len() as u64;
        let budget = resources.slab_budget_bytes() / WINDOW_BYTES_A_VALUE;
        let size = PartSize {
            most: (resources.read.slab_bytes / 8).min(budget) / vars,
            longest: budget / vars,
        };
        let chunks = self.vars[0].cell_chunk()?;
        let parts = match format.by_cell() {
            true => whole.parts_by_cell(size, chunks),
            false => whole.parts_by_step(size, chunks),
        };
        Ok(Job {
            values: whole.values(),
            places: Places::Window(grid, Arc::new(window), parts),
            reads: vec![whole],
        })
    }

    /// A trajectory query: each vertex's cell, and its instant (M) and
    /// level (Z) when given.
    fn trajectory(&self, grid: &GeoGrid, params: &Params) -> Result<Job, ApiError> {
        let vertices = match geometry(params)? {
            Geometry::LineString(v) => v,
            other => {
                return Err(bad(format!(
                    "coords: a trajectory query takes LINESTRING, not {}",
                    other.kind()
                )))
            }
        };
        let var = &self.vars[0];
        // M picks each vertex's instant (epoch seconds), Z its level.
        let by_m = vertices.iter().any(|v| v.m.is_some());
        let by_z = vertices.iter().any(|v| v.z.is_some()) && var.grid.z_dim.is_some();
        if by_m && var.grid.t_dim.is_none() {
            return Err(bad("coords: M values need a collection with a time axis"));
        }
        let mut reads = Vec::with_capacity(vertices.len());
        for v in &vertices {
            let (col, row) = cell_of(grid, v)?;
            let times = match (v.m, by_m) {
                (Some(m), true) => Some(vec![nearest_instant(var, m)?]),
                (None, true) => return Err(bad("coords: every vertex needs an M value, or none")),
                _ => self.times.clone(),
            };
            let levels = match (v.z, by_z) {
                (Some(z), true) => Some(vec![levels(var, Some(&z.to_string()))?.unwrap_or_default()[0]]),
                _ => self.levels.clone(),
            };
            reads.push(CellRead {
                cols: vec![col],
                rows: vec![row],
                times,
                levels,
            });
        }
        let steps = |r: &CellRead| r.times.as_ref().map_or(1, Vec::len) * r.levels.as_ref().map_or(1, Vec::len);
        // Each step is a cell of its own.
        let values = reads.iter().map(steps).sum::<usize>() as u64;
        self.refuse_whole(values)?;
        Ok(Job {
            values,
            places: Places::Trajectory,
            reads,
        })
    }

    /// A trajectory's `values`, placed at its steps: the times and levels
    /// become the union of those its `reads` picked.
    fn trajectory_shape(&mut self, reads: &[CellRead], values: Vec<Vec<f64>>) -> Shape {
        let (steps, times, levels) = self.steps_of(reads);
        self.times = times;
        self.levels = levels;
        Shape::Trajectory { steps, values }
    }

    /// What was read, at its places and labelled.
    fn extract(self, shape: Shape, held: Option<OwnedSemaphorePermit>) -> Extract {
        let (times, levels) = self.labels();
        Extract {
            vars: self.vars,
            times,
            levels,
            shape,
            held,
        }
    }

    /// A cell's centre in CRS84 (NaN when it has none).
    fn centre(&self, (col, row): (u64, u64)) -> (f64, f64) {
        let (_, lonlat) = self.vars[0].grid.centre(col, row);
        lonlat
            .map(|(lon, lat)| (wrap_longitude(lon), lat))
            .unwrap_or((f64::NAN, f64::NAN))
    }

    /// A trajectory's steps, each naming its positions in the union of
    /// the times and levels read (which it returns too).
    #[allow(clippy::type_complexity)]
    fn steps_of(&self, reads: &[CellRead]) -> (Vec<Step>, Option<Vec<u64>>, Option<Vec<u64>>) {
        let union = |pick: fn(&CellRead) -> &Option<Vec<u64>>| {
            let mut all: Vec<u64> = reads.iter().flat_map(|r| pick(r).clone().unwrap_or_default()).collect();
            all.sort_unstable();
            all.dedup();
            all
        };
        let (all_t, all_z) = (union(|r| &r.times), union(|r| &r.levels));
        let positions = |picked: &Option<Vec<u64>>, all: &[u64]| -> Vec<Option<usize>> {
            match picked {
                Some(list) => list.iter().map(|i| all.iter().position(|a| a == i)).collect(),
                None => vec![None],
            }
        };
        let mut steps = Vec::new();
        for read in reads {
            let (x, y) = self.centre((read.cols[0], read.rows[0]));
            for &t in &positions(&read.times, &all_t) {
                for &z in &positions(&read.levels, &all_z) {
                    steps.push(Step { x, y, t, z });
                }
            }
        }
        let grid = &self.vars[0].grid;
        (steps, grid.t_dim.map(|_| all_t), grid.z_dim.map(|_| all_z))
    }
}

/// Where a query's values go, known before anything is read.
enum Places {
    /// One cell a point.
    Points(Vec<(u64, u64)>),
    /// A window of the grid, and the parts it is read in.
    Window(Arc<GeoGrid>, Arc<CellWindow>, Vec<CellPart>),
    /// One cell a vertex, with its own times and levels (in the reads).
    Trajectory,
}

/// A query worked out before reading: where its values go, the cell
/// reads that fetch them, and how many values each variable gets.
struct Job {
    places: Places,
    reads: Vec<CellRead>,
    values: u64,
}

impl Job {
    /// What tells apart the places of two answers of the same request
    /// text read from the same keys: the cells read and their centres (the
    /// coordinates may change alone), their times and levels.
    fn key(&self, grid: &GeoGrid) -> Vec<u8> {
        let mut out = Vec::new();
        for read in &self.reads {
            for &c in &read.cols {
                out.extend(grid.x.centre(c).to_le_bytes());
            }
            for &r in &read.rows {
                out.extend(grid.y.centre(r).to_le_bytes());
            }
        }
        let list = |out: &mut Vec<u8>, list: &[u64]| {
            out.extend((list.len() as u64).to_le_bytes());
            for v in list {
                out.extend(v.to_le_bytes());
            }
        };
        for read in &self.reads {
            list(&mut out, &read.cols);
            list(&mut out, &read.rows);
            list(&mut out, read.times.as_deref().unwrap_or(&[u64::MAX]));
            list(&mut out, read.levels.as_deref().unwrap_or(&[u64::MAX]));
        }
        if let Places::Window(_, window, _) = &self.places {
            for word in window.inside.words() {
                out.extend(word.to_le_bytes());
            }
        }
        out
    }
}

/// The time step nearest an instant given in seconds since 1970-01-01 UTC.
fn nearest_instant(var: &GeoVariable, seconds: f64) -> Result<u64, ApiError> {
    let iso = crate::engine::format_epoch_seconds(seconds)
        .ok_or_else(|| bad(format!("coords: M value {seconds} is not an instant")))?;
    let pick = AxisPick::Labels(vec![Label::Text(iso.clone())], Method::Nearest);
    let picked = picked(var, Along::Time, Some(pick), "coords M", Some(&iso))?;
    Ok(picked.and_then(|p| p.first().copied()).unwrap_or(0))
}
