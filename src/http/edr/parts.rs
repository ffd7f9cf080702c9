//! A window's values (area, cube, radius) read a part at a time while the
//! answer is written, so that an answer of any size streams in bounded
//! memory (api.md 4.1, 4): a task reads the parts, pinned to the versions
//! the answer's ETag names, in the order the writer asks for them, one
//! part ahead of it. A writer that stops (the client left, noticed at its
//! next write) stops the reads after the part being read; a read that
//! fails ends the body short.

use std::cell::RefCell;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::engine::geo::region::CellWindow;
use crate::engine::geo::{wrap_longitude, GeoGrid};
use crate::engine::{CellPart, Dataset, Error, GeoVariable, ReadPlan, Versions};
use crate::http::ApiError;
use crate::metrics::Metrics;

/// The order a writer takes the values in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Order {
    /// The variables at these indices in turn, each over every part (one
    /// variable's values a part).
    ByVariable(Vec<usize>),
    /// Each part in turn, with every variable's values.
    ByPart,
}

/// What one step of the order gives: per variable it names, the part's
/// values (T, Z, Y, X), NaN outside the region.
type Item = Result<Vec<Vec<f64>>, Error>;

/// The parts of a window and their reads.
pub(super) struct Parts {
    /// The parts, in the whole read's order.
    pub(super) list: Arc<Vec<CellPart>>,
    /// The window they cut (which of its cells lie inside the region).
    pub(super) window: Arc<CellWindow>,
    reads: Option<Reads>,
    received: Option<mpsc::Receiver<Item>>,
    first: Option<Item>,
    /// Where a failure after the status line is counted.
    metrics: Arc<Metrics>,
}

/// What reads the parts: per part, a plan per variable (each taken when
/// read).
struct Reads {
    dataset: Dataset,
    vars: Vec<GeoVariable>,
    plans: Vec<Vec<Option<ReadPlan>>>,
    pinned: Versions,
}

impl Parts {
    /// `list`'s parts of `window`, each read by its `plans` (one per
    /// variable of `vars`) pinned to `pinned`; failures once the answer has
    /// begun are counted in `metrics`.
    pub(super) fn new(
        list: Vec<CellPart>,
        window: Arc<CellWindow>,
        (dataset, vars): (&Dataset, &[GeoVariable]),
        (plans, pinned): (Vec<Vec<ReadPlan>>, &Versions),
        metrics: Arc<Metrics>,
    ) -> Self {
        let reads = Reads {
            dataset: dataset.clone(),
            vars: vars.to_vec(),
            plans: plans
                .into_iter()
                .map(|each| each.into_iter().map(Some).collect())
                .collect(),
            pinned: pinned.clone(),
        };
        Self {
            list: Arc::new(list),
            window,
            reads: Some(reads),
            received: None,
            first: None,
            metrics,
        }
    }

    /// Start reading in `order`, and wait for its first step: a failure
    /// there is the answer's, before its status line. Reading stops, even
    /// within a part, once `gone` completes (the body was dropped).
    pub(super) async fn start(
        &mut self,
        order: Order,
        gone: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ApiError> {
        let mut reads = self.reads.take().expect("the reads start once");
        let steps: Vec<(usize, Vec<usize>)> = match order {
            Order::ByVariable(vars) => vars
                .iter()
                .flat_map(|&v| (0..self.list.len()).map(move |p| (p, vec![v])))
                .collect(),
            Order::ByPart => {
                let all: Vec<usize> = (0..reads.vars.len()).collect();
                (0..self.list.len()).map(|p| (p, all.clone())).collect()
            }
        };
        let (tx, mut rx) = mpsc::channel(1);
        let (list, window) = (self.list.clone(), self.window.clone());
        let reading = async move {
            for (p, vars) in steps {
                // Read a part only once the writer has taken the one before:
                // two parts at most are held, and a writer that has gone
                // stops the reads here.
                let Ok(slot) = tx.reserve().await else {
                    return;
                };
                let item = reads.part(&list[p], &window, p, &vars).await;
                let failed = item.is_err();
                slot.send(item);
                if failed {
                    return;
                }
            }
        };
        tokio::spawn(async move {
            tokio::select! {
                () = reading => {}
                () = gone => {}
            }
        });
        match rx.recv().await {
            Some(Err(e)) => Err(e.into()),
            first => {
                self.first = first;
                self.received = Some(rx);
                Ok(())
            }
        }
    }

    /// The values of the order's next step, on the writer's thread.
    pub(super) fn next(&mut self) -> io::Result<Vec<Vec<f64>>> {
        let item = match self.first.take() {
            Some(item) => Some(item),
            None => self.received.as_mut().and_then(mpsc::Receiver::blocking_recv),
        };
        let failed = match item {
            Some(Ok(values)) => return Ok(values),
            Some(Err(e)) => e.to_string(),
            None => "the answer's reads ended early".to_string(),
        };
        self.metrics.stream_errors.fetch_add(1, Ordering::Relaxed);
        tracing::error!(error = %failed, "an EDR answer failed part way");
        Err(io::Error::other(failed))
    }

    /// The values of the next step's first variable ([`Order::ByVariable`]).
    pub(super) fn next_one(&mut self) -> io::Result<Vec<f64>> {
        Ok(self.next()?.swap_remove(0))
    }

    /// The most values a part holds (per variable).
    pub(super) fn most_values(list: &[CellPart]) -> u64 {
        list.iter().map(CellPart::values).max().unwrap_or(0)
    }

    /// Each part in turn, with the values of the order's step (read as
    /// the writer gets there).
    pub(super) fn each(
        cell: &RefCell<Self>,
        mut f: impl FnMut(&Self, &CellPart, &[Vec<f64>]) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut parts = cell.borrow_mut();
        for p in 0..parts.list.len() {
            let values = parts.next()?;
            let parts = &*parts;
            f(parts, &parts.list[p], &values)?;
        }
        Ok(())
    }

    /// A part's cells inside the region that have a CRS84 centre on
    /// `grid`: `(index among the part's cells, longitude in −180..180,
    /// latitude)`, row by row.
    pub(super) fn inside<'a>(
        &'a self,
        part: &CellPart,
        grid: &'a GeoGrid,
    ) -> impl Iterator<Item = (usize, f64, f64)> + 'a {
        let window = &self.window;
        let width = window.cols.len();
        let cols = part.cols.clone();
        part.rows
            .clone()
            .flat_map(move |r| cols.clone().map(move |c| (r, c)))
            .enumerate()
            .filter(move |(_, (r, c))| window.inside.get(r * width + c))
            .filter_map(move |(k, (r, c))| {
                let (lon, lat) = grid.centre(window.cols[c], window.rows[r]).1?;
                Some((k, wrap_longitude(lon), lat))
            })
    }
}

impl Reads {
    /// Part `p`'s values of `vars`, NaN outside the region (each plan is
    /// read once, and dropped).
    async fn part(&mut self, part: &CellPart, window: &CellWindow, p: usize, vars: &[usize]) -> Item {
        let mut out = Vec::with_capacity(vars.len());
        for &v in vars {
            let plan = self.plans[p][v]
                .take()
                .ok_or_else(|| Error::Internal("a part read twice".into()))?;
            let (mut values, _) = self
                .dataset
                .read_cells(&self.vars[v], &plan, Some(&self.pinned))
                .await?;
            mask(&mut values, part, window);
            out.push(values);
        }
        Ok(out)
    }
}

/// NaN at the part's cells outside the region, at every step.
fn mask(values: &mut [f64], part: &CellPart, window: &CellWindow) {
    let width = window.cols.len();
    let row_len = part.cols.len();
    let cells = part.rows.len() * row_len;
    if cells == 0 {
        return;
    }
    for step in values.chunks_mut(cells) {
        for (row, r) in step.chunks_mut(row_len).zip(part.rows.clone()) {
            for (value, c) in row.iter_mut().zip(part.cols.clone()) {
                if !window.inside.get(r * width + c) {
                    *value = f64::NAN;
                }
            }
        }
    }
}

impl crate::encode::coverage_json::Pieces for Parts {
    fn next_piece(&mut self) -> io::Result<Vec<f64>> {
        self.next_one()
    }
}
