//! GeoJSON (RFC 7946) FeatureCollections of points, written feature by
//! feature into the body: no document in memory. Numbers as serde_json
//! writes them, `null` where missing.

use std::io::{self, Write};

/// A FeatureCollection being written.
pub(crate) struct FeatureCollection<'w, W: Write> {
    w: &'w mut W,
    features: usize,
}

impl<'w, W: Write> FeatureCollection<'w, W> {
    /// Start the collection.
    pub(crate) fn start(w: &'w mut W) -> io::Result<Self> {
        w.write_all(br#"{"type":"FeatureCollection","features":["#)?;
        Ok(Self { w, features: 0 })
    }

    /// One Point feature at (`lon`, `lat`), its properties written by
    /// `properties`.
    pub(crate) fn point(
        &mut self,
        lon: f64,
        lat: f64,
        properties: impl FnOnce(&mut Properties<'_, W>) -> io::Result<()>,
    ) -> io::Result<()> {
        if self.features > 0 {
            self.w.write_all(b",")?;
        }
        self.features += 1;
        self.w
            .write_all(br#"{"type":"Feature","geometry":{"type":"Point","coordinates":["#)?;
        number(self.w, lon)?;
        self.w.write_all(b",")?;
        number(self.w, lat)?;
        self.w.write_all(br#"]},"properties":{"#)?;
        properties(&mut Properties { w: self.w, count: 0 })?;
        self.w.write_all(b"}}")
    }

    /// End the collection.
    pub(crate) fn finish(self) -> io::Result<()> {
        self.w.write_all(b"]}")
    }
}

/// The properties of one feature being written.
pub(crate) struct Properties<'a, W: Write> {
    w: &'a mut W,
    count: usize,
}

impl<W: Write> Properties<'_, W> {
    /// Property `name`: one value, or a list of `count` when that is not 1,
    /// item `i` written by `item`.
    pub(crate) fn values(
        &mut self,
        name: &str,
        count: usize,
        mut item: impl FnMut(&mut W, usize) -> io::Result<()>,
    ) -> io::Result<()> {
        if self.count > 0 {
            self.w.write_all(b",")?;
        }
        self.count += 1;
        serde_json::to_writer(&mut *self.w, name)?;
        self.w.write_all(b":")?;
        let list = count != 1;
        if list {
            self.w.write_all(b"[")?;
        }
        for i in 0..count {
            if i > 0 {
                self.w.write_all(b",")?;
            }
            item(self.w, i)?;
        }
        if list {
            self.w.write_all(b"]")?;
        }
        Ok(())
    }
}

/// A JSON number, `null` when not finite.
pub(crate) fn number(w: &mut (impl Write + ?Sized), v: f64) -> io::Result<()> {
    match v.is_finite() {
        true => Ok(serde_json::to_writer(w, &v)?),
        false => w.write_all(b"null"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_carry_one_value_or_a_list() {
        let mut out = Vec::new();
        let mut collection = FeatureCollection::start(&mut out).unwrap();
        collection
            .point(1.5, -2.0, |p| {
                p.values("t", 1, |w, _| number(w, 3.0))?;
                p.values("v", 2, |w, i| number(w, [f64::NAN, 4.0][i]))
            })
            .unwrap();
        collection.point(0.0, 0.0, |_| Ok(())).unwrap();
        collection.finish().unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            doc,
            serde_json::json!({"type": "FeatureCollection", "features": [
                {"type": "Feature", "geometry": {"type": "Point", "coordinates": [1.5, -2.0]},
                 "properties": {"t": 3.0, "v": [null, 4.0]}},
                {"type": "Feature", "geometry": {"type": "Point", "coordinates": [0.0, 0.0]},
                 "properties": {}}
            ]})
        );
    }
}
