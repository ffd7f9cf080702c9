//! Labels of a coordinate and their lookup (contract 2.3): numbers,
//! strings, or instants (CF `units: "<unit> since <date>"`, or a
//! `numpy.datetime64` array); exact, nearest (ties to the smaller index)
//! and inclusive ranges, by binary search on a sorted coordinate.

use std::cmp::Ordering;

use serde_json::Value;

use crate::engine::error::{Error, Result};
use crate::engine::format::data_type::DataType;
use crate::engine::format::metadata::ArrayMetadata;
use crate::engine::format::time::{format_instant, parse_instant, NAT};
use crate::engine::format::values::{int_values, is_real, real_values, text_values};
use crate::engine::query::cf::TimeEncoding;
use crate::engine::query::selection::DimPick;

/// A label as a request gives it: text (query strings, JSON strings) or a
/// JSON number.
#[derive(Debug, Clone, PartialEq)]
pub enum Label {
    /// Text: a number, a string or an ISO 8601 instant.
    Text(String),
    /// A JSON number.
    Number(f64),
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Label::Text(t) => write!(f, "{t}"),
            Label::Number(n) => write!(f, "{n}"),
        }
    }
}

/// What `sel` asks of one dimension.
#[derive(Debug, Clone, PartialEq)]
pub enum LabelSel {
    /// One label: the dimension is dropped.
    Point(Label),
    /// Every position whose label lies between the two, inclusive.
    Range(Label, Label),
}

/// How a point label is matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    /// The label must be present.
    #[default]
    Exact,
    /// The closest label; a tie takes the smaller index.
    Nearest,
}

/// Label selection on a read: `sel` per dimension name, or points given
/// by labels (one per dimension each), and the matching method.
#[derive(Debug, Clone, Default)]
pub struct LabelQuery {
    /// `(dimension name, selection)` in request order.
    pub sel: Vec<(String, LabelSel)>,
    /// Vectorized selection by labels.
    pub points: Option<Vec<Vec<(String, Label)>>>,
    /// `sel_method`.
    pub method: Method,
}

/// A coordinate's labels, in stored order.
#[derive(Debug, Clone)]
enum Labels {
    Numbers(Vec<f64>),
    Text(Vec<String>),
    /// Nanoseconds since 1970-01-01 UTC; `None` for NaT/NaN.
    Instants(Vec<Option<i128>>),
}

/// The order of a coordinate's labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Ascending,
    Descending,
    Unsorted,
}

/// A dimension's coordinate: its labels and how they are ordered.
#[derive(Debug, Clone)]
pub struct Coordinate {
    name: String,
    labels: Labels,
    order: Order,
    /// A CF time encoding whose calendar label selection must accept.
    time: Option<TimeEncoding>,
    /// The coordinate array's attributes (`axis`, `units`, ...).
    attributes: Value,
}

/// A comparable label value.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
enum Key {
    Number(f64),
    Text(String),
    Instant(i128),
}

impl Key {
    fn distance(&self, other: &Key) -> f64 {
        match (self, other) {
            (Key::Number(a), Key::Number(b)) => (a - b).abs(),
            (Key::Instant(a), Key::Instant(b)) => (a - b).abs() as f64,
            _ => f64::NAN,
        }
    }
}

impl Coordinate {
    /// The coordinate named `name` from the elements `data` of a 1-D array.
    pub(crate) fn new(name: &str, meta: &ArrayMetadata, attributes: &Value, data: &[u8]) -> Result<Self> {
        let time = TimeEncoding::from_attributes(attributes);
        let labels = match meta.data_type {
            DataType::DateTime64(unit) => {
                let scale_ns = unit_ns(unit.unit_name()).map(|n| n * unit.scale as i128);
                let counts = int_values(meta.data_type, data).expect("datetimes are int64");
                match scale_ns {
                    Some(ns) => Labels::Instants(
                        counts
                            .into_iter()
                            .map(|c| (c != NAT as i128).then_some(c * ns))
                            .collect(),
                    ),
                    // Months and years have no fixed length: compare as counts.
                    None => Labels::Numbers(counts.into_iter().map(|c| c as f64).collect()),
                }
            }
            dt if is_real(dt) => match &time {
                Some(t) => match int_values(dt, data) {
                    Some(ints) => Labels::Instants(ints.into_iter().map(|v| Some(t.instant_of_int(v))).collect()),
                    None => Labels::Instants(real_values(dt, data)?.into_iter().map(|v| t.instant(v)).collect()),
                },
                None => Labels::Numbers(real_values(dt, data)?),
            },
            DataType::String | DataType::FixedUtf32(_) => Labels::Text(
                text_values(meta.data_type, data)
                    .expect("a text type")?
                    .into_iter()
                    .map(|t| t.into_owned())
                    .collect(),
            ),
            other => {
                return Err(Error::InvalidRequest(format!(
                    "coordinate '{name}' has {} labels, which cannot be selected by",
                    other.name()
                )))
            }
        };
        let order = order_of(&labels);
        Ok(Self {
            name: name.to_string(),
            labels,
            order,
            time: time.filter(|_| meta.data_type != DataType::String),
            attributes: attributes.clone(),
        })
    }

    /// The coordinate array's attributes.
    pub(crate) fn attributes(&self) -> &Value {
        &self.attributes
    }

    /// The labels as numbers, when they are plain numbers.
    pub fn numbers(&self) -> Option<&[f64]> {
        match &self.labels {
            Labels::Numbers(v) => Some(v),
            _ => None,
        }
    }

    /// Whether the labels are instants (datetimes or CF time units).
    pub fn is_time(&self) -> bool {
        matches!(self.labels, Labels::Instants(_))
    }

    /// The position of the latest instant (the last position otherwise).
    pub(crate) fn latest(&self) -> u64 {
        match &self.labels {
            Labels::Instants(v) => v
                .iter()
                .enumerate()
                .filter_map(|(i, t)| t.map(|t| (t, i)))
                .max()
                .map_or(v.len().saturating_sub(1), |(_, i)| i) as u64,
            _ => self.len().saturating_sub(1) as u64,
        }
    }

    fn len(&self) -> usize {
        match &self.labels {
            Labels::Numbers(v) => v.len(),
            Labels::Text(v) => v.len(),
            Labels::Instants(v) => v.len(),
        }
    }

    fn key(&self, i: usize) -> Option<Key> {
        match &self.labels {
            Labels::Numbers(v) => (!v[i].is_nan()).then(|| Key::Number(v[i])),
            Labels::Text(v) => Some(Key::Text(v[i].clone())),
            Labels::Instants(v) => v[i].map(Key::Instant),
        }
    }

    /// The label of position `i` as JSON (instants as ISO 8601 text).
    pub fn label_json(&self, i: u64) -> Value {
        let i = i as usize;
        match &self.labels {
            Labels::Numbers(v) if v[i].is_nan() => Value::String("NaN".into()),
            // Integral labels as integers (`5`, not `5.0`).
            Labels::Numbers(v) if v[i].fract() == 0.0 && v[i].abs() < 9.0e15 => Value::from(v[i] as i64),
            Labels::Numbers(v) => serde_json::Number::from_f64(v[i]).map_or(Value::Null, Value::Number),
            Labels::Text(v) => Value::String(v[i].clone()),
            Labels::Instants(v) => v[i].map_or(Value::Null, |ns| Value::String(format_instant(ns))),
        }
    }

    /// A request's label as a key of this coordinate's kind.
    fn parse(&self, label: &Label) -> Result<Key> {
        let bad =
            |kind: &str| Error::InvalidRequest(format!("label '{label}' for dimension '{}' is not {kind}", self.name));
        Ok(match (&self.labels, label) {
            (Labels::Numbers(_), Label::Number(n)) => Key::Number(*n),
            (Labels::Numbers(_), Label::Text(t)) => Key::Number(t.trim().parse().map_err(|_| bad("a number"))?),
            (Labels::Text(_), Label::Text(t)) => Key::Text(t.clone()),
            (Labels::Text(_), Label::Number(n)) => Key::Text(n.to_string()),
            (Labels::Instants(_), Label::Text(t)) => {
                Key::Instant(parse_instant(t).ok_or_else(|| bad("an ISO 8601 date or instant"))?)
            }
            (Labels::Instants(_), Label::Number(_)) => return Err(bad("an ISO 8601 date or instant")),
        })
    }

    /// The positions `sel` picks, by `method`.
    pub(crate) fn pick(&self, sel: &LabelSel, method: Method) -> Result<DimPick> {
        if let Some(time) = &self.time {
            time.check_calendar(&self.name)?;
        }
        match sel {
            LabelSel::Point(label) => self.point(label, method).map(DimPick::Index),
            LabelSel::Range(a, b) => {
                if method == Method::Nearest {
                    return Err(Error::InvalidRequest(format!(
                        "sel_method=nearest applies to single labels, not the range given for dimension '{}'",
                        self.name
                    )));
                }
                let (a, b) = (self.parse(a)?, self.parse(b)?);
                let (lo, hi) = if a.partial_cmp(&b) == Some(Ordering::Greater) {
                    (b, a)
                } else {
                    (a, b)
                };
                Ok(self.range(&lo, &hi))
            }
        }
    }

    /// The positions whose labels lie between `lo` and `hi` (inclusive;
    /// either may be open), in stored order.
    pub fn within(&self, lo: Option<&Label>, hi: Option<&Label>) -> Result<Vec<u64>> {
        if let Some(time) = &self.time {
            time.check_calendar(&self.name)?;
        }
        let lo = lo.map(|l| self.parse(l)).transpose()?;
        let hi = hi.map(|l| self.parse(l)).transpose()?;
        let keep = |k: &Key| {
            lo.as_ref()
                .is_none_or(|lo| k.partial_cmp(lo).is_some_and(|o| o != Ordering::Less))
                && hi
                    .as_ref()
                    .is_none_or(|hi| k.partial_cmp(hi).is_some_and(|o| o != Ordering::Greater))
        };
        Ok((0..self.len())
            .filter(|&i| self.key(i).is_some_and(|k| keep(&k)))
            .map(|i| i as u64)
            .collect())
    }

    /// The position of one label.
    pub fn point(&self, label: &Label, method: Method) -> Result<u64> {
        if let Some(time) = &self.time {
            time.check_calendar(&self.name)?;
        }
        let key = self.parse(label)?;
        let found = match method {
            Method::Exact => self.exact(&key),
            Method::Nearest => {
                if matches!(key, Key::Text(_)) {
                    return Err(Error::InvalidRequest(format!(
                        "sel_method=nearest needs numeric or time labels; dimension '{}' has strings",
                        self.name
                    )));
                }
                self.nearest(&key)
            }
        };
        found.map(|i| i as u64).ok_or_else(|| {
            Error::InvalidRequest(format!(
                "label '{label}' is not in dimension '{}' (labels from {} to {})",
                self.name,
                self.extreme(Ordering::Less),
                self.extreme(Ordering::Greater)
            ))
        })
    }

    /// The smallest (`Less`) or largest label, as text.
    fn extreme(&self, which: Ordering) -> String {
        let best = (0..self.len())
            .filter_map(|i| self.key(i).map(|k| (i, k)))
            .reduce(|a, b| if b.1.partial_cmp(&a.1) == Some(which) { b } else { a });
        match best {
            Some((i, _)) => match self.label_json(i as u64) {
                Value::String(s) => s,
                other => other.to_string(),
            },
            None => "(none)".into(),
        }
    }

    /// The first position whose label equals `key`.
    fn exact(&self, key: &Key) -> Option<usize> {
        match self.order {
            Order::Unsorted => (0..self.len()).find(|&i| self.key(i).as_ref() == Some(key)),
            _ => {
                let i = self.first_not_before(key);
                (i < self.len() && self.key(i).as_ref() == Some(key)).then_some(i)
            }
        }
    }

    /// The position whose label is closest to `key`; a tie takes the smaller index.
    fn nearest(&self, key: &Key) -> Option<usize> {
        let candidates: Vec<usize> = match self.order {
            Order::Unsorted => (0..self.len()).collect(),
            _ => {
                let i = self.first_not_before(key);
                // The neighbours of the insertion point, and the first of any run of equal labels.
                [i.checked_sub(1), Some(i)]
                    .into_iter()
                    .flatten()
                    .filter(|&j| j < self.len())
                    .map(|j| self.first_equal(j))
                    .collect()
            }
        };
        let mut best: Option<(usize, f64)> = None;
        for i in candidates {
            let Some(label) = self.key(i) else { continue };
            let d = label.distance(key);
            let better = match best {
                None => true,
                Some((bi, bd)) => d < bd || (d == bd && i < bi),
            };
            if better {
                best = Some((i, d));
            }
        }
        best.map(|(i, _)| i)
    }

    /// The first index of the run of labels equal to label `i` (sorted only).
    fn first_equal(&self, mut i: usize) -> usize {
        let key = self.key(i);
        while i > 0 && self.key(i - 1) == key {
            i -= 1;
        }
        i
    }

    /// On a sorted coordinate, the first position not before `key` in
    /// stored order (ascending: label >= key; descending: label <= key).
    fn first_not_before(&self, key: &Key) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let before = match (self.key(mid), self.order) {
                (Some(l), Order::Ascending) => l < *key,
                (Some(l), _) => l > *key,
                (None, _) => true,
            };
            if before {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Positions whose label lies in `lo..=hi`, in stored order.
    fn range(&self, lo: &Key, hi: &Key) -> DimPick {
        let inside = |i: usize| self.key(i).is_some_and(|l| *lo <= l && l <= *hi);
        match self.order {
            Order::Unsorted => DimPick::List((0..self.len()).filter(|&i| inside(i)).map(|i| i as u64).collect()),
            order => {
                let (first, last) = match order {
                    Order::Ascending => (lo, hi),
                    _ => (hi, lo),
                };
                let start = self.first_not_before(first);
                let mut stop = self.first_not_before(last);
                while stop < self.len() && inside(stop) {
                    stop += 1;
                }
                DimPick::Range(start as u64, stop.max(start) as u64)
            }
        }
    }
}

/// Nanoseconds of a NumPy unit of fixed length.
fn unit_ns(unit: &str) -> Option<i128> {
    Some(match unit {
        "W" => 7 * 86_400_000_000_000,
        "D" => 86_400_000_000_000,
        "h" => 3_600_000_000_000,
        "m" => 60_000_000_000,
        "s" => 1_000_000_000,
        "ms" => 1_000_000,
        "us" => 1_000,
        "ns" => 1,
        _ => return None,
    })
}

fn order_of(labels: &Labels) -> Order {
    fn monotonic<T: PartialOrd>(v: &[T]) -> Order {
        if v.windows(2).all(|w| w[0] <= w[1]) {
            Order::Ascending
        } else if v.windows(2).all(|w| w[0] >= w[1]) {
            Order::Descending
        } else {
            Order::Unsorted
        }
    }
    match labels {
        Labels::Numbers(v) if v.iter().any(|x| x.is_nan()) => Order::Unsorted,
        Labels::Numbers(v) => monotonic(v),
        Labels::Text(v) => monotonic(v),
        Labels::Instants(v) if v.iter().any(Option::is_none) => Order::Unsorted,
        Labels::Instants(v) => monotonic(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(v: &[f64]) -> Coordinate {
        let labels = Labels::Numbers(v.to_vec());
        let order = order_of(&labels);
        Coordinate {
            name: "x".into(),
            labels,
            order,
            time: None,
            attributes: Value::Null,
        }
    }

    fn point(c: &Coordinate, v: f64, method: Method) -> Option<u64> {
        c.point(&Label::Number(v), method).ok()
    }

    #[test]
    fn exact_and_nearest_on_every_order() {
        for values in [
            vec![0.0, 10.0, 20.0, 30.0],
            vec![30.0, 20.0, 10.0, 0.0],
            vec![20.0, 0.0, 30.0, 10.0],
        ] {
            let c = numbers(&values);
            let at = |v: f64| values.iter().position(|x| *x == v).map(|i| i as u64);
            assert_eq!(point(&c, 20.0, Method::Exact), at(20.0), "{values:?}");
            assert_eq!(point(&c, 21.0, Method::Exact), None);
            assert_eq!(point(&c, 21.0, Method::Nearest), at(20.0));
            assert_eq!(point(&c, -5.0, Method::Nearest), at(0.0));
            assert_eq!(point(&c, 99.0, Method::Nearest), at(30.0));
            // A tie takes the smaller index, whatever the label order.
            let tie = [at(10.0).unwrap(), at(20.0).unwrap()].into_iter().min();
            assert_eq!(point(&c, 15.0, Method::Nearest), tie, "{values:?}");
        }
    }

    #[test]
    fn ranges_in_stored_order_either_way_round() {
        let asc = numbers(&[0.0, 10.0, 20.0, 30.0]);
        let range = |c: &Coordinate, a: f64, b: f64| {
            c.pick(&LabelSel::Range(Label::Number(a), Label::Number(b)), Method::Exact)
                .unwrap()
        };
        assert_eq!(range(&asc, 5.0, 20.0), DimPick::Range(1, 3));
        assert_eq!(range(&asc, 20.0, 5.0), DimPick::Range(1, 3));
        assert_eq!(range(&asc, 31.0, 40.0), DimPick::Range(4, 4));
        let desc = numbers(&[30.0, 20.0, 10.0, 0.0]);
        assert_eq!(range(&desc, 5.0, 20.0), DimPick::Range(1, 3));
        let unsorted = numbers(&[20.0, 0.0, 30.0, 10.0]);
        assert_eq!(range(&unsorted, 5.0, 20.0), DimPick::List(vec![0, 3]));
        let e = asc.pick(
            &LabelSel::Range(Label::Number(1.0), Label::Number(2.0)),
            Method::Nearest,
        );
        assert!(e.is_err());
        let e = asc.point(&Label::Number(5.0), Method::Exact).unwrap_err().to_string();
        assert!(e.contains("'5'") && e.contains("from 0 to 30"), "{e}");
    }

    #[test]
    fn text_and_instants() {
        let labels = Labels::Text(vec!["Bergen".into(), "Oslo".into(), "Tromsø".into()]);
        let c = Coordinate {
            name: "station".into(),
            order: order_of(&labels),
            labels,
            time: None,
            attributes: Value::Null,
        };
        assert_eq!(c.point(&Label::Text("Oslo".into()), Method::Exact).unwrap(), 1);
        assert!(c.point(&Label::Text("Oslo".into()), Method::Nearest).is_err());
        let day = 86_400_000_000_000i128;
        let labels = Labels::Instants((0..10).map(|d| Some(18_262 * day + d * day)).collect());
        let c = Coordinate {
            name: "time".into(),
            order: order_of(&labels),
            labels,
            time: None,
            attributes: Value::Null,
        };
        assert_eq!(c.point(&Label::Text("2020-01-05".into()), Method::Exact).unwrap(), 4);
        assert_eq!(
            c.point(&Label::Text("2020-01-05T13:00".into()), Method::Nearest)
                .unwrap(),
            5
        );
        assert!(c.point(&Label::Text("2020-01-05T12:00".into()), Method::Exact).is_err());
        assert_eq!(c.label_json(4), Value::String("2020-01-05T00:00:00".into()));
    }
}
