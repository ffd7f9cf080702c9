//! A JSON reference set (version 0 or 1) parsed into its keys, within
//! limits a hostile set cannot pass: keys, bytes rendered, depth.

use std::collections::BTreeMap;

use base64::Engine as _;
use bytes::Bytes;
use serde_json::Value;

use super::templates::{render, Names, Rendered, MAX_RENDERED_BYTES};
use super::Reference;

/// Most keys one reference set may hold, listed and generated together: a
/// few hundred bytes of `gen` could otherwise ask for billions. About 200
/// bytes each in memory, so a full set costs some 200 MiB.
pub(crate) const MAX_KEYS: u64 = 1_000_000;

/// Largest JSON reference set read (its parsed form takes several times
/// as much memory); kerchunk writes larger sets as Parquet.
pub(crate) const MAX_JSON_BYTES: u64 = 64 << 20;

/// Parse a reference set (version 0 or 1).
pub(super) fn parse(text: &[u8]) -> Result<BTreeMap<String, Reference>, String> {
    parse_at_most(text, MAX_KEYS)
}

/// The fuzz property of the reference-set parser (`fuzz/`): any bytes give
/// a set of at most `max_keys` keys whose spans are ranges, or an error.
pub(crate) fn check_parse(text: &[u8], max_keys: u64) {
    if let Ok(refs) = parse_at_most(text, max_keys) {
        assert!(refs.len() as u64 <= max_keys, "{} keys", refs.len());
        for reference in refs.values() {
            if let Reference::Span(_, span) = reference {
                assert!(span.start <= span.end, "{span:?}");
            }
        }
    }
}

/// [`parse`] with at most `max_keys` keys.
pub(super) fn parse_at_most(text: &[u8], max_keys: u64) -> Result<BTreeMap<String, Reference>, String> {
    let doc: Value = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
    let object = doc.as_object().ok_or("not a JSON object")?;
    let version = object.get("version").and_then(Value::as_u64);
    let mut refs = BTreeMap::new();
    if object.len() as u64 > max_keys {
        return Err(format!(
            "{} keys, more than the {max_keys} a reference set may hold",
            object.len()
        ));
    }
    let mut rendered = Rendered(MAX_RENDERED_BYTES);
    let templates: BTreeMap<String, String> = match version {
        None => {
            for (key, value) in object {
                refs.insert(
                    key.clone(),
                    reference(value, Names::templates(&BTreeMap::new()), &mut rendered)
                        .map_err(|e| format!("key '{key}': {e}"))?,
                );
            }
            return Ok(refs);
        }
        Some(1) => object
            .get("templates")
            .and_then(Value::as_object)
            .map(|t| {
                t.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default(),
        Some(v) => return Err(format!("unsupported version {v} (expected 0 or 1)")),
    };
    let listed = object
        .get("refs")
        .and_then(Value::as_object)
        .ok_or("version 1 without 'refs'")?;
    if listed.len() as u64 > max_keys {
        return Err(format!(
            "{} keys, more than the {max_keys} a reference set may hold",
            listed.len()
        ));
    }
    let mut budget = max_keys - listed.len() as u64;
    for generator in object.get("gen").and_then(Value::as_array).into_iter().flatten() {
        budget -= generate(generator, &templates, budget, max_keys, &mut rendered, &mut refs)?;
    }
    for (key, value) in listed {
        refs.insert(
            key.clone(),
            reference(value, Names::templates(&templates), &mut rendered).map_err(|e| format!("key '{key}': {e}"))?,
        );
    }
    Ok(refs)
}

/// The keys of one `gen` entry: every combination of its dimensions, at
/// most `budget` of them (counted before any is made); how many it made.
fn generate(
    generator: &Value,
    templates: &BTreeMap<String, String>,
    budget: u64,
    max_keys: u64,
    rendered: &mut Rendered,
    refs: &mut BTreeMap<String, Reference>,
) -> Result<u64, String> {
    let field = |name: &str| {
        generator
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("gen entry without '{name}'"))
    };
    let (key, url) = (field("key")?, field("url")?);
    let offset = generator.get("offset").and_then(Value::as_str);
    let length = generator.get("length").and_then(Value::as_str);
    let dimensions = generator
        .get("dimensions")
        .and_then(Value::as_object)
        .ok_or("gen entry without 'dimensions'")?;
    let too_many =
        || format!("gen entry '{key}' makes more than {budget} keys (a reference set holds at most {max_keys})");
    let mut axes: Vec<(String, Vec<i64>)> = Vec::new();
    let mut total: u64 = 1;
    for (name, spec) in dimensions {
        let count = match spec {
            Value::Array(items) => items.len() as u64,
            _ => axis_range(name, spec)?.1,
        };
        // Each axis on its own too: an empty axis makes the product zero,
        // and the others are still materialised below.
        if count > budget {
            return Err(too_many());
        }
        total = total.checked_mul(count).filter(|t| *t <= budget).ok_or_else(too_many)?;
    }
    if total == 0 {
        return Ok(0);
    }
    for (name, spec) in dimensions {
        let values: Vec<i64> = match spec {
            Value::Array(items) => items.iter().filter_map(Value::as_i64).collect(),
            _ => {
                let ((start, step), count) = axis_range(name, spec)?;
                (0..count as i64).map(|k| start + k * step).collect()
            }
        };
        axes.push((name.clone(), values));
    }
    let total = axes.iter().map(|(_, v)| v.len()).product::<usize>();
    let mut vars: Vec<(String, String)> = axes.iter().map(|(name, _)| (name.clone(), String::new())).collect();
    for mut index in 0..total {
        for ((_, axis), (_, value)) in axes.iter().zip(&mut vars).rev() {
            *value = axis[index % axis.len()].to_string();
            index /= axis.len();
        }
        let values = Names { vars: &vars, templates };
        let url = render(url, values, rendered)?;
        let reference = match (offset, length) {
            (Some(o), Some(l)) => {
                let mut number = |t: &str| {
                    render(t, values, rendered)?
                        .trim()
                        .parse::<u64>()
                        .map_err(|e| format!("gen '{key}': {e}"))
                };
                let (o, l) = (number(o)?, number(l)?);
                let end = o
                    .checked_add(l)
                    .ok_or_else(|| format!("gen '{key}': offset {o} + length {l} overflows"))?;
                Reference::Span(url, o..end)
            }
            _ => Reference::Object(url),
        };
        refs.insert(render(key, values, rendered)?, reference);
    }
    Ok(total as u64)
}

/// A `{start, stop, step}` dimension of a `gen` entry: its start and step,
/// and how many values it has (none when stop is not past start).
fn axis_range(name: &str, spec: &Value) -> Result<((i64, i64), u64), String> {
    if !spec.is_object() {
        return Err(format!(
            "gen dimension '{name}' is neither a list nor {{start, stop, step}}"
        ));
    }
    let get = |k: &str, d: i64| spec.get(k).and_then(Value::as_i64).unwrap_or(d);
    let (start, stop, step) = (get("start", 0), get("stop", 0), get("step", 1));
    if step <= 0 {
        return Err(format!("gen dimension '{name}' has step {step}"));
    }
    let span = (i128::from(stop) - i128::from(start)).max(0);
    let count = (span + i128::from(step) - 1) / i128::from(step);
    Ok(((start, step), count as u64))
}

/// One value of `refs`.
fn reference(value: &Value, templates: Names<'_>, rendered: &mut Rendered) -> Result<Reference, String> {
    match value {
        Value::String(text) => match text.strip_prefix("base64:") {
            Some(encoded) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map(|b| Reference::Inline(b.into()))
                .map_err(|e| format!("bad base64: {e}")),
            None => Ok(Reference::Inline(Bytes::from(text.clone()))),
        },
        Value::Array(items) => {
            let url = items
                .first()
                .and_then(Value::as_str)
                .ok_or("a reference's first item must be a URL")?;
            let url = render(url, templates, rendered)?;
            match items.len() {
                1 => Ok(Reference::Object(url)),
                3 => {
                    let number = |v: &Value| v.as_u64().ok_or("offset and length must be non-negative integers");
                    let (offset, length) = (number(&items[1])?, number(&items[2])?);
                    let end = offset.checked_add(length).ok_or("offset + length overflows")?;
                    Ok(Reference::Span(url, offset..end))
                }
                n => Err(format!("a reference has 1 or 3 items, not {n}")),
            }
        }
        // Metadata written as a JSON object rather than as its text.
        Value::Object(_) => Ok(Reference::Inline(Bytes::from(value.to_string()))),
        _ => Err("a value must be text or a list".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_0_and_1_parse() {
        let v0 = br#"{".zgroup": "{\"zarr_format\": 2}", "a/0": ["s3://b/f.nc", 10, 5], "a/1": "base64:AAEC", "a/2": ["s3://b/g.nc"]}"#;
        let refs = parse(v0).unwrap();
        assert_eq!(
            refs[".zgroup"],
            Reference::Inline(Bytes::from_static(b"{\"zarr_format\": 2}"))
        );
        assert_eq!(refs["a/0"], Reference::Span("s3://b/f.nc".into(), 10..15));
        assert_eq!(refs["a/1"], Reference::Inline(Bytes::from_static(&[0, 1, 2])));
        assert_eq!(refs["a/2"], Reference::Object("s3://b/g.nc".into()));
        let v1 = br#"{"version": 1, "templates": {"u": "s3://bucket/path/file.nc"},
            "gen": [{"key": "x/{{i}}.{{j}}", "url": "{{u}}", "offset": "{{100 + (i*2 + j)*10}}", "length": "10",
                     "dimensions": {"i": {"stop": 3}, "j": [0, 1]}}],
            "refs": {"x/.zarray": "{}", "y/0": ["{{u}}", 0, 4]}}"#;
        let refs = parse(v1).unwrap();
        assert_eq!(refs.len(), 8);
        assert_eq!(
            refs["x/2.1"],
            Reference::Span("s3://bucket/path/file.nc".into(), 150..160)
        );
        assert_eq!(
            refs["x/0.0"],
            Reference::Span("s3://bucket/path/file.nc".into(), 100..110)
        );
        assert_eq!(refs["y/0"], Reference::Span("s3://bucket/path/file.nc".into(), 0..4));
        for bad in [
            &br#"[1]"#[..],
            br#"{"a": 1}"#,
            br#"{"a": ["u", 1]}"#,
            br#"{"version": 2, "refs": {}}"#,
            br#"{"a": "base64:@@"}"#,
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn hostile_sets_are_refused_before_they_cost_anything() {
        let gen = |dims: &str| {
            format!(
                r#"{{"version": 1, "refs": {{}}, "gen": [{{"key": "a/{{{{i}}}}", "url": "s3://b/f", "dimensions": {dims}}}]}}"#
            )
        };
        // A range that would allocate 32 GB, or overflow when multiplied.
        for dims in [
            r#"{"i": {"stop": 4000000000}}"#,
            r#"{"i": {"start": -9223372036854775808, "stop": 9223372036854775807}}"#,
            r#"{"i": {"stop": 1001}, "j": {"stop": 1000}}"#,
            r#"{"i": {"stop": 4294967296}, "j": {"stop": 4294967296}, "k": {"stop": 4294967296}}"#,
            r#"{"e": [], "i": {"stop": 4000000000, "step": 7}}"#,
        ] {
            let err = parse(gen(dims).as_bytes()).unwrap_err();
            assert!(err.contains("more than") && err.contains("1000000"), "{dims}: {err}");
        }
        // A dimension that is a bare number is no dimension.
        let err = parse(gen(r#"{"n": 1, "i": [0]}"#).as_bytes()).unwrap_err();
        assert!(err.contains("neither a list"), "{err}");
        // Within the limit: made, and an empty range makes nothing.
        assert_eq!(
            parse(gen(r#"{"i": {"stop": 1000}, "j": [1, 2]}"#).as_bytes())
                .unwrap()
                .len(),
            1000
        );
        assert_eq!(
            parse(gen(r#"{"i": {"start": 5, "stop": 2}}"#).as_bytes())
                .unwrap()
                .len(),
            0
        );
        let stepped = parse(gen(r#"{"i": {"start": 1, "stop": 10, "step": 4}}"#).as_bytes()).unwrap();
        assert_eq!(stepped.keys().collect::<Vec<_>>(), ["a/1", "a/5", "a/9"]);
        // Listed keys count too.
        let two = r#"{"version": 1, "refs": {"x": "1", "y": "2"}, "gen": [{"key": "a/{{i}}", "url": "u", "dimensions": {"i": {"stop": 999999}}}]}"#;
        assert!(parse(two.as_bytes()).unwrap_err().contains("more than 999998"));
        // Templates named many times in many keys: bounded bytes, not keys.
        let big = format!(
            r#"{{"version": 1, "templates": {{"t": "{}"}}, "refs": {{}}, "gen": [{{"key": "a/{{{{i}}}}", "url": "{}", "dimensions": {{"i": {{"stop": 100000}}}}}}]}}"#,
            "x".repeat(10_000),
            "{{t}}".repeat(100)
        );
        let err = parse(big.as_bytes()).unwrap_err();
        assert!(err.contains("expand to more than"), "{err}");
        // Offsets that overflow.
        let span = r#"{"version": 1, "refs": {}, "gen": [{"key": "a/{{i}}", "url": "u", "offset": "18446744073709551615", "length": "{{i}}", "dimensions": {"i": [0, 1]}}]}"#;
        assert!(parse(span.as_bytes()).unwrap_err().contains("overflows"));
    }
}
