//! Well-known text geometries, as EDR's `coords` gives them: `POINT`,
//! `MULTIPOINT`, `LINESTRING` (with `Z`, `M` or `ZM`), `POLYGON` and
//! `MULTIPOLYGON`. A parse error names the character offset where the text
//! stops making sense (api.md 3.5), which the `wkt` crate's errors do not
//! carry; the grammar is small enough to read here.

use std::fmt;

/// A vertex: x (longitude), y (latitude), and the optional Z and M values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Vertex {
    pub(super) x: f64,
    pub(super) y: f64,
    pub(super) z: Option<f64>,
    pub(super) m: Option<f64>,
}

/// A polygon: its outer ring, then its holes, each closed or not.
pub(super) type Polygon = Vec<Vec<Vertex>>;

/// A parsed geometry.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Geometry {
    Point(Vertex),
    MultiPoint(Vec<Vertex>),
    LineString(Vec<Vertex>),
    Polygon(Polygon),
    MultiPolygon(Vec<Polygon>),
}

impl Geometry {
    /// The geometry's WKT type name.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Geometry::Point(_) => "POINT",
            Geometry::MultiPoint(_) => "MULTIPOINT",
            Geometry::LineString(_) => "LINESTRING",
            Geometry::Polygon(_) => "POLYGON",
            Geometry::MultiPolygon(_) => "MULTIPOLYGON",
        }
    }
}

/// Where and why a WKT text does not parse.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct WktError {
    /// The character offset (from 0) where parsing failed.
    pub(super) offset: usize,
    /// What was expected there.
    pub(super) expected: String,
}

impl fmt::Display for WktError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "WKT does not parse at character {}: expected {}",
            self.offset, self.expected
        )
    }
}

/// Parse `text` as one geometry.
pub(super) fn parse(text: &str) -> Result<Geometry, WktError> {
    let mut p = Parser {
        chars: text.chars().collect(),
        at: 0,
    };
    let geometry = p.geometry()?;
    p.space();
    if p.at < p.chars.len() {
        return Err(p.error("the end of the geometry"));
    }
    Ok(geometry)
}

const KINDS: [&str; 5] = ["POINT", "MULTIPOINT", "LINESTRING", "POLYGON", "MULTIPOLYGON"];

struct Parser {
    chars: Vec<char>,
    at: usize,
}

/// Which of Z and M each vertex carries.
#[derive(Clone, Copy)]
struct Dims {
    z: bool,
    m: bool,
}

impl Parser {
    fn error(&self, expected: &str) -> WktError {
        WktError {
            offset: self.at,
            expected: expected.to_string(),
        }
    }

    fn space(&mut self) {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
    }

    fn word(&mut self) -> String {
        self.space();
        let start = self.at;
        while self.chars.get(self.at).is_some_and(|c| c.is_ascii_alphabetic()) {
            self.at += 1;
        }
        self.chars[start..self.at]
            .iter()
            .collect::<String>()
            .to_ascii_uppercase()
    }

    fn expect(&mut self, c: char) -> Result<(), WktError> {
        self.space();
        match self.chars.get(self.at) {
            Some(&found) if found == c => {
                self.at += 1;
                Ok(())
            }
            _ => Err(self.error(&format!("'{c}'"))),
        }
    }

    /// Whether the next character is `c` (consumed if so).
    fn next_is(&mut self, c: char) -> bool {
        self.space();
        let yes = self.chars.get(self.at) == Some(&c);
        if yes {
            self.at += 1;
        }
        yes
    }

    fn geometry(&mut self) -> Result<Geometry, WktError> {
        let start = {
            self.space();
            self.at
        };
        let word = self.word();
        // `LINESTRINGM`, `POINTZ`: the dimensions may be written joined on.
        let (kind, joined) = ["ZM", "Z", "M"]
            .iter()
            .find_map(|d| {
                let base = word.strip_suffix(d)?;
                KINDS.contains(&base).then(|| (base.to_string(), Some(*d)))
            })
            .unwrap_or((word, None));
        let dims = match joined {
            Some(d) => Dims {
                z: d.contains('Z'),
                m: d.contains('M'),
            },
            None => self.dims(),
        };
        let geometry = match kind.as_str() {
            "POINT" => {
                self.expect('(')?;
                let v = self.vertex(dims)?;
                self.expect(')')?;
                Geometry::Point(v)
            }
            "MULTIPOINT" => Geometry::MultiPoint(self.list(|p| {
                // Both `MULTIPOINT (1 2, 3 4)` and `MULTIPOINT ((1 2), (3 4))`.
                if p.next_is('(') {
                    let v = p.vertex(dims)?;
                    p.expect(')')?;
                    Ok(v)
                } else {
                    p.vertex(dims)
                }
            })?),
            "LINESTRING" => Geometry::LineString(self.list(|p| p.vertex(dims))?),
            "POLYGON" => Geometry::Polygon(self.polygon(dims)?),
            "MULTIPOLYGON" => Geometry::MultiPolygon(self.list(|p| p.polygon(dims))?),
            _ => {
                self.at = start;
                return Err(self.error("POINT, MULTIPOINT, LINESTRING, POLYGON or MULTIPOLYGON"));
            }
        };
        Ok(geometry)
    }

    /// `Z`, `M` or `ZM` after the type name.
    fn dims(&mut self) -> Dims {
        let before = self.at;
        match self.word().as_str() {
            "Z" => Dims { z: true, m: false },
            "M" => Dims { z: false, m: true },
            "ZM" => Dims { z: true, m: true },
            _ => {
                self.at = before;
                Dims { z: false, m: false }
            }
        }
    }

    /// `( item, item, ... )`.
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Result<T, WktError>) -> Result<Vec<T>, WktError> {
        self.expect('(')?;
        let mut out = vec![item(self)?];
        while self.next_is(',') {
            out.push(item(self)?);
        }
        self.expect(')')?;
        Ok(out)
    }

    fn polygon(&mut self, dims: Dims) -> Result<Polygon, WktError> {
        self.list(|p| {
            let start = p.at;
            let ring = p.list(|p| p.vertex(dims))?;
            if ring.len() < 3 {
                p.at = start;
                return Err(p.error("a ring of at least 3 vertices"));
            }
            Ok(ring)
        })
    }

    /// X and Y, then Z and M as `dims` says; a bare third (and fourth)
    /// number is Z (then M) as many writers give them.
    fn vertex(&mut self, dims: Dims) -> Result<Vertex, WktError> {
        let x = self.number()?;
        let y = self.number()?;
        let mut extra = Vec::new();
        loop {
            self.space();
            match self.chars.get(self.at) {
                Some(c) if c.is_ascii_digit() || matches!(c, '-' | '+' | '.') => extra.push(self.number()?),
                _ => break,
            }
        }
        let wanted = usize::from(dims.z) + usize::from(dims.m);
        let (z, m) = match (extra.as_slice(), dims.z, dims.m) {
            ([], false, false) => (None, None),
            ([z], false, false) | ([z], true, false) => (Some(*z), None),
            ([z, m], false, false) | ([z, m], true, true) => (Some(*z), Some(*m)),
            ([m], false, true) => (None, Some(*m)),
            _ => {
                return Err(self.error(&format!(
                    "{} numbers in a vertex",
                    if wanted == 0 { 2 } else { 2 + wanted }
                )))
            }
        };
        Ok(Vertex { x, y, z, m })
    }

    fn number(&mut self) -> Result<f64, WktError> {
        self.space();
        let start = self.at;
        while self
            .chars
            .get(self.at)
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
        {
            self.at += 1;
        }
        let text: String = self.chars[start..self.at].iter().collect();
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => {
                self.at = start;
                Err(self.error("a number"))
            }
        }
    }
}

/// The fuzz property of [`parse`]: a geometry of finite coordinates, or
/// an error naming an offset inside the text.
pub(crate) fn check_parse(text: &str) {
    match parse(text) {
        Ok(geometry) => {
            let finite = |v: &Vertex| v.x.is_finite() && v.y.is_finite();
            let ok = match &geometry {
                Geometry::Point(p) => finite(p),
                Geometry::MultiPoint(ps) | Geometry::LineString(ps) => ps.iter().all(finite),
                Geometry::Polygon(rings) => rings.iter().flatten().all(finite),
                Geometry::MultiPolygon(ps) => ps.iter().flatten().flatten().all(finite),
            };
            assert!(ok, "{text:?}: {geometry:?}");
        }
        Err(e) => assert!(e.offset <= text.len(), "{text:?}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(x: f64, y: f64) -> Vertex {
        Vertex { x, y, z: None, m: None }
    }

    #[test]
    fn parses_the_geometries_edr_takes() {
        assert_eq!(parse("POINT(10 20)").unwrap(), Geometry::Point(v(10.0, 20.0)));
        assert_eq!(parse(" point ( -1.5e1 2 ) ").unwrap(), Geometry::Point(v(-15.0, 2.0)));
        assert_eq!(
            parse("MULTIPOINT((1 2),(3 4))").unwrap(),
            parse("MULTIPOINT(1 2, 3 4)").unwrap()
        );
        let Geometry::LineString(line) = parse("LINESTRINGM(1 2 100, 3 4 200)").unwrap() else {
            panic!()
        };
        assert_eq!(
            parse("LINESTRING M (1 2 100, 3 4 200)").unwrap(),
            Geometry::LineString(line.clone())
        );
        assert_eq!(line[1].m, Some(200.0));
        assert_eq!(line[1].z, None);
        let Geometry::LineString(line) = parse("LINESTRING ZM (1 2 3 4)").unwrap() else {
            panic!()
        };
        assert_eq!((line[0].z, line[0].m), (Some(3.0), Some(4.0)));
        let Geometry::Polygon(p) = parse("POLYGON((0 0,10 0,10 10,0 10,0 0),(2 2,3 2,3 3,2 2))").unwrap() else {
            panic!()
        };
        assert_eq!((p.len(), p[1].len()), (2, 4));
        let g = parse("MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((5 5,6 5,6 6,5 5)))").unwrap();
        assert_eq!(g.kind(), "MULTIPOLYGON");
    }

    #[test]
    fn errors_name_the_offset() {
        let at = |text: &str| parse(text).unwrap_err().offset;
        assert_eq!(at("POINT(10 x)"), 9);
        assert_eq!(at("POINT(10 20"), 11);
        assert_eq!(at("CIRCLE(1 2)"), 0);
        assert_eq!(at("POINT(1 2) extra"), 11);
        assert_eq!(at("POLYGON((0 0, 1 1))"), 8);
        assert_eq!(at("POINT(1 2 3 4 5)"), 15);
        assert!(parse("POINT(10 x)").unwrap_err().to_string().contains("character 9"));
    }
}
