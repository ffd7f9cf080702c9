//! Kerchunk reference sets: a JSON document mapping Zarr (v2) keys to
//! inline values or to byte ranges of other objects (often NetCDF4/HDF5
//! files), read as a store of those keys.
//!
//! Spec: <https://fsspec.github.io/kerchunk/spec.html>. Version 0 is a flat
//! object of keys; version 1 has `templates` (`{{name}}` in URLs), `gen`
//! (keys generated over integer ranges) and `refs`. A value is text (UTF-8,
//! or bytes after `base64:`), `[url]` (a whole object) or `[url, offset,
//! length]`. Referenced objects are read only under the dataset's
//! `virtual_chunk_containers` ([`Containers`]).
//!
//! A set may also be a directory of Parquet files, as fsspec writes them
//! ([`parquet`]).
//!
//! The set is read on first use and read again once older than `ref_ttl`
//! when its ETag changed; a Parquet set's record files are read as needed
//! and kept with it.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use serde_json::Value;
use tokio::sync::Mutex;

use super::containers::Containers;
use super::{check_version, ByteRange, ObjectInfo, ReadResult, Store, StoreError};

mod parquet;
use self::parquet::ParquetRefs;

/// What a key refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reference {
    /// The value itself.
    Inline(Bytes),
    /// A whole object.
    Object(String),
    /// `length` bytes at `offset` of an object.
    Span(String, Range<u64>),
}

/// A parsed reference set, with the version of the document it came from.
#[derive(Debug)]
struct Parsed {
    refs: Refs,
    etag: Option<String>,
    last_modified: Option<std::time::SystemTime>,
}

/// The references of a set.
#[derive(Debug)]
enum Refs {
    /// Every key of a JSON set, sorted.
    Json(BTreeMap<String, Reference>),
    /// A Parquet set's metadata, and the record files read so far.
    Parquet(ParquetRefs, moka::future::Cache<String, Arc<Vec<Option<Reference>>>>),
}

/// Record files of a Parquet set kept at once.
const RECORD_FILES_KEPT: u64 = 256;

/// A kerchunk reference set of a dataset.
#[derive(Debug)]
pub(crate) struct ReferenceSet {
    /// The store holding the set's JSON document, and its key there.
    store: Store,
    key: String,
    ttl: Duration,
    loaded: Mutex<Option<(Instant, Arc<Parsed>)>>,
    containers: Arc<Containers>,
}

impl ReferenceSet {
    pub(crate) fn new(store: Store, key: String, ttl: Duration, containers: Arc<Containers>) -> Self {
        Self {
            store,
            key,
            ttl,
            loaded: Mutex::new(None),
            containers,
        }
    }

    /// The key of a Parquet set's `.zmetadata`.
    fn parquet_key(&self) -> String {
        format!("{}/.zmetadata", self.key)
    }

    /// The set, read again when older than the TTL and changed.
    async fn parsed(&self) -> Result<Arc<Parsed>, StoreError> {
        let mut loaded = self.loaded.lock().await;
        if let Some((at, parsed)) = loaded.as_ref() {
            if at.elapsed() < self.ttl {
                return Ok(parsed.clone());
            }
            let document = match parsed.refs {
                Refs::Json(_) => self.key.clone(),
                Refs::Parquet(..) => self.parquet_key(),
            };
            // A set that cannot be checked now is kept until it can be.
            let now = self.store.head(&document).await.unwrap_or_else(|_| {
                Some(ObjectInfo {
                    size: 0,
                    etag: parsed.etag.clone(),
                    last_modified: std::time::SystemTime::UNIX_EPOCH,
                })
            });
            if now.is_some_and(|info| info.etag.is_some() && info.etag == parsed.etag) {
                let parsed = parsed.clone();
                *loaded = Some((Instant::now(), parsed.clone()));
                return Ok(parsed);
            }
        }
        let bad = |e: String| StoreError::Unavailable(format!("reference set '{}': {e}", self.key));
        if let Some(info) = self.store.head(&self.key).await? {
            if info.size > MAX_JSON_BYTES {
                return Err(bad(format!(
                    "{} bytes of JSON, more than the {MAX_JSON_BYTES} a JSON set may hold (write larger sets as Parquet)",
                    info.size
                )));
            }
        }
        let (read, refs) = match self.store.get(&self.key, ByteRange::All, None).await? {
            Some(read) if read.data.len() as u64 > MAX_JSON_BYTES => {
                return Err(bad(format!(
                "{} bytes of JSON, more than the {MAX_JSON_BYTES} a JSON set may hold (write larger sets as Parquet)",
                read.data.len()
            )))
            }
            Some(read) => {
                // A large set takes a while to parse: off the async threads.
                let data = read.data.clone();
                let refs = tokio::task::spawn_blocking(move || parse(&data))
                    .await
                    .map_err(|e| bad(e.to_string()))?
                    .map_err(bad)?;
                (read, Refs::Json(refs))
            }
            None => {
                // Not an object: a Parquet set is a directory.
                let read = self
                    .store
                    .get(&self.parquet_key(), ByteRange::All, None)
                    .await?
                    .ok_or_else(|| StoreError::Unavailable(format!("no reference set at '{}'", self.key)))?;
                let refs = ParquetRefs::parse(&read.data).map_err(bad)?;
                let records = moka::future::Cache::builder().max_capacity(RECORD_FILES_KEPT).build();
                (read, Refs::Parquet(refs, records))
            }
        };
        let parsed = Arc::new(Parsed {
            refs,
            etag: read.info.etag,
            last_modified: Some(read.info.last_modified),
        });
        *loaded = Some((Instant::now(), parsed.clone()));
        Ok(parsed)
    }

    /// What `key` refers to, `None` when the set has no such key.
    async fn lookup(&self, parsed: &Parsed, key: &str) -> Result<Option<Reference>, StoreError> {
        let (refs, records) = match &parsed.refs {
            Refs::Json(refs) => return Ok(refs.get(key).cloned()),
            Refs::Parquet(refs, records) => (refs, records),
        };
        if let Some(text) = refs.metadata.get(key) {
            return Ok(Some(Reference::Inline(text.clone())));
        }
        let Some((file, row)) = refs.locate(key) else {
            return Ok(None);
        };
        let path = format!("{}/{file}", self.key);
        let rows = records
            .try_get_with(file, async {
                match self.store.get(&path, ByteRange::All, None).await? {
                    // A record file that was never written holds no chunk.
                    None => Ok(Arc::new(Vec::new())),
                    Some(read) => parquet::read_records(read.data)
                        .map_err(|e| StoreError::Unavailable(format!("reference set '{path}': {e}"))),
                }
            })
            .await
            .map_err(|e: Arc<StoreError>| (*e).clone())?;
        Ok(rows.get(row as usize).cloned().flatten())
    }

    fn inline_info(parsed: &Parsed, size: u64) -> ObjectInfo {
        ObjectInfo {
            size,
            etag: parsed.etag.clone(),
            last_modified: parsed.last_modified.unwrap_or(std::time::SystemTime::UNIX_EPOCH),
        }
    }

    /// The version of a reference: the set's ETag with the span (or the
    /// whole object's ETag), so a key's version changes when the set
    /// points it elsewhere, never only when the set changes elsewhere.
    fn version(parsed: &Parsed, at: &str) -> String {
        format!("{}:{at}", parsed.etag.as_deref().unwrap_or("").trim_matches('"'))
    }

    fn span_version(parsed: &Parsed, span: &Range<u64>) -> String {
        Self::version(parsed, &format!("{}-{}", span.start, span.end))
    }

    /// Read `range` of `key`; `None` when the set has no such key.
    pub(crate) async fn get(
        &self,
        key: &str,
        range: ByteRange,
        if_match: Option<&str>,
    ) -> Result<Option<ReadResult>, StoreError> {
        let parsed = self.parsed().await?;
        let Some(reference) = self.lookup(&parsed, key).await? else {
            return Ok(None);
        };
        let read = match &reference {
            Reference::Inline(data) => {
                check_version(key, if_match, parsed.etag.as_deref())?;
                let size = data.len() as u64;
                let r = range.within(size);
                ReadResult {
                    data: data.slice(r.start as usize..r.end as usize),
                    range: r,
                    info: Self::inline_info(&parsed, size),
                }
            }
            Reference::Span(url, span) => {
                let version = Self::span_version(&parsed, span);
                check_version(key, if_match, Some(&version))?;
                let mut read = self.containers.get(url, Some(span.clone()), range, None).await?;
                read.info.etag = Some(version);
                read
            }
            Reference::Object(url) => {
                let mut read = self.containers.get(url, None, range, None).await?;
                let version = Self::version(&parsed, read.info.etag.as_deref().unwrap_or("").trim_matches('"'));
                check_version(key, if_match, Some(&version))?;
                read.info.etag = Some(version);
                read
            }
        };
        Ok(Some(read))
    }

    /// Several ranges of `key`; `None` when missing.
    pub(crate) async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        let parsed = self.parsed().await?;
        match self.lookup(&parsed, key).await?.as_ref() {
            None => Ok(None),
            Some(Reference::Span(url, span)) => {
                check_version(key, if_match, Some(&Self::span_version(&parsed, span)))?;
                self.containers
                    .get_ranges(url, span.clone(), ranges, None)
                    .await
                    .map(Some)
            }
            Some(_) => {
                let reads = ranges
                    .iter()
                    .map(|r| self.get(key, ByteRange::Bounded(r.clone()), if_match));
                let reads = futures::future::try_join_all(reads).await?;
                Ok(reads.into_iter().map(|r| r.map(|r| r.data)).collect())
            }
        }
    }

    /// Metadata of `key` (a span's without reading it: the object is
    /// only checked against the allow-list).
    pub(crate) async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        let parsed = self.parsed().await?;
        match self.lookup(&parsed, key).await?.as_ref() {
            None => Ok(None),
            Some(Reference::Inline(data)) => Ok(Some(Self::inline_info(&parsed, data.len() as u64))),
            Some(Reference::Span(url, span)) => {
                self.containers.check(url, None)?;
                Ok(Some(ObjectInfo {
                    etag: Some(Self::span_version(&parsed, span)),
                    ..Self::inline_info(&parsed, span.end - span.start)
                }))
            }
            Some(Reference::Object(url)) => {
                let read = self.containers.get(url, None, ByteRange::Bounded(0..0), None).await?;
                let version = Self::version(&parsed, read.info.etag.as_deref().unwrap_or("").trim_matches('"'));
                Ok(Some(ObjectInfo {
                    etag: Some(version),
                    ..read.info
                }))
            }
        }
    }

    /// The children of `prefix`: (directories, keys), each sorted.
    pub(crate) async fn list_dir(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>), StoreError> {
        let parsed = self.parsed().await?;
        let start = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        let (mut dirs, mut files) = (Vec::<String>::new(), Vec::new());
        // A Parquet set lists its metadata keys (chunks are found by key).
        let keys: Vec<&String> = match &parsed.refs {
            Refs::Json(refs) => refs.keys().collect(),
            Refs::Parquet(refs, _) => refs.metadata.keys().collect(),
        };
        for key in keys.into_iter().filter(|k| k.starts_with(&start)) {
            match key[start.len()..].split_once('/') {
                Some((dir, _)) => {
                    if dirs.last().map(String::as_str) != Some(dir) {
                        dirs.push(dir.to_string());
                    }
                }
                None => files.push(key[start.len()..].to_string()),
            }
        }
        dirs.dedup();
        Ok((dirs, files))
    }
}

/// Most keys one reference set may hold, listed and generated together: a
/// few hundred bytes of `gen` could otherwise ask for billions. About 200
/// bytes each in memory, so a full set costs some 200 MiB.
pub(crate) const MAX_KEYS: u64 = 1_000_000;

/// Largest JSON reference set read (its parsed form takes several times
/// as much memory); kerchunk writes larger sets as Parquet.
pub(crate) const MAX_JSON_BYTES: u64 = 64 << 20;

/// Deepest nesting of parentheses and signs in a `gen` expression.
const MAX_EXPRESSION_DEPTH: usize = 64;

/// Parse a reference set (version 0 or 1).
fn parse(text: &[u8]) -> Result<BTreeMap<String, Reference>, String> {
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
fn parse_at_most(text: &[u8], max_keys: u64) -> Result<BTreeMap<String, Reference>, String> {
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

/// Bytes of keys and URLs a set may make by expanding templates, in all: a
/// short template named many times in many keys could otherwise ask for
/// terabytes.
const MAX_RENDERED_BYTES: usize = 256 << 20;

/// What is left of [`MAX_RENDERED_BYTES`] while a set is parsed.
struct Rendered(usize);

impl Rendered {
    /// Count `text`'s bytes; an error once the set has made too many.
    fn take(&mut self, text: String) -> Result<String, String> {
        self.0 = self
            .0
            .checked_sub(text.len())
            .ok_or_else(|| format!("its templates expand to more than {MAX_RENDERED_BYTES} bytes of keys and URLs"))?;
        Ok(text)
    }
}

/// The names a `{{...}}` may use: a `gen` entry's variables, then the
/// templates (borrowed, never copied per key).
#[derive(Clone, Copy)]
struct Names<'a> {
    vars: &'a [(String, String)],
    templates: &'a BTreeMap<String, String>,
}

impl<'a> Names<'a> {
    fn templates(templates: &'a BTreeMap<String, String>) -> Self {
        Self { vars: &[], templates }
    }

    fn get(&self, name: &str) -> Option<&'a str> {
        match self.vars.iter().find(|(n, _)| n == name) {
            Some((_, v)) => Some(v),
            None => self.templates.get(name).map(String::as_str),
        }
    }
}

/// `{{name}}` replaced by each template (or variable) of `values`; an
/// error past `rendered`'s bytes.
fn render(text: &str, values: Names<'_>, rendered: &mut Rendered) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find("}}")
            .ok_or_else(|| format!("unclosed '{{{{' in '{text}'"))?
            + open;
        let expression = rest[open + 2..close].trim();
        out.push_str(&evaluate(expression, values)?);
        if out.len() > rendered.0 {
            return rendered.take(out);
        }
        rest = &rest[close + 2..];
    }
    out.push_str(rest);
    rendered.take(out)
}

/// A template name, or an integer expression of the variables (`i*100+8`).
fn evaluate(expression: &str, values: Names<'_>) -> Result<String, String> {
    if let Some(value) = values.get(expression) {
        return Ok(value.to_string());
    }
    let mut parser = Expression {
        tokens: tokens(expression)?,
        at: 0,
        depth: 0,
        values,
    };
    let value = parser.sum()?;
    if parser.at != parser.tokens.len() {
        return Err(format!("cannot evaluate '{expression}'"));
    }
    Ok(value.to_string())
}

fn tokens(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            out.push("//".into());
            i += 2;
        } else if "+-*/%()".contains(c) {
            out.push(c.to_string());
            i += 1;
        } else {
            return Err(format!("unexpected '{c}' in '{text}'"));
        }
    }
    Ok(out)
}

/// Integer arithmetic over `gen` variables: + - * // % and parentheses.
struct Expression<'a> {
    tokens: Vec<String>,
    at: usize,
    /// Parentheses and signs open around the current token.
    depth: usize,
    values: Names<'a>,
}

impl Expression<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn sum(&mut self) -> Result<i64, String> {
        let mut value = self.product()?;
        while let Some(op @ ("+" | "-")) = self.peek() {
            let add = op == "+";
            self.at += 1;
            let rhs = self.product()?;
            value = if add {
                value.checked_add(rhs)
            } else {
                value.checked_sub(rhs)
            }
            .ok_or("overflow")?;
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<i64, String> {
        let mut value = self.atom()?;
        while let Some(op @ ("*" | "/" | "//" | "%")) = self.peek() {
            let op = op.to_string();
            self.at += 1;
            let rhs = self.atom()?;
            value = match op.as_str() {
                "*" => value.checked_mul(rhs),
                "%" => value.checked_rem_euclid(rhs),
                _ => value.checked_div_euclid(rhs),
            }
            .ok_or("overflow or division by zero")?;
        }
        Ok(value)
    }

    fn atom(&mut self) -> Result<i64, String> {
        let token = self.peek().ok_or("expression ends early")?.to_string();
        self.at += 1;
        if matches!(token.as_str(), "(" | "-") {
            self.depth += 1;
            if self.depth > MAX_EXPRESSION_DEPTH {
                return Err(format!("expression nested deeper than {MAX_EXPRESSION_DEPTH}"));
            }
            let value = self.nested(&token);
            self.depth -= 1;
            return value;
        }
        token
            .parse()
            .ok()
            .or_else(|| self.values.get(&token).and_then(|v| v.parse().ok()))
            .ok_or_else(|| format!("unknown name '{token}'"))
    }

    /// What follows an opening `(` or a sign.
    fn nested(&mut self, opened: &str) -> Result<i64, String> {
        match opened {
            "(" => {
                let value = self.sum()?;
                if self.peek() != Some(")") {
                    return Err("missing ')'".into());
                }
                self.at += 1;
                Ok(value)
            }
            _ => self.atom()?.checked_neg().ok_or_else(|| "overflow".into()),
        }
    }
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
        total = total.checked_mul(count).filter(|t| *t <= budget).ok_or_else(too_many)?;
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
    fn expressions_evaluate() {
        let values = BTreeMap::from([("i".to_string(), "7".to_string())]);
        for (text, want) in [
            ("i", "7"),
            ("i*3+1", "22"),
            ("(i+1)*2", "16"),
            ("i//2", "3"),
            ("i%4", "3"),
            ("-i + 10", "3"),
        ] {
            assert_eq!(evaluate(text, Names::templates(&values)).unwrap(), want, "{text}");
        }
        for bad in ["j", "i +", "i / 0", "(i", "i $ 2", "-(-9223372036854775807 - 1)"] {
            assert!(evaluate(bad, Names::templates(&values)).is_err(), "{bad}");
        }
    }

    #[test]
    fn hostile_sets_are_refused_before_they_cost_anything() {
        // Deep nesting: an error, not a blown stack (100,000 deep).
        let deep = format!("{}i{}", "(".repeat(100_000), ")".repeat(100_000));
        let one = BTreeMap::from([("i".into(), "1".into())]);
        let err = evaluate(&deep, Names::templates(&one)).unwrap_err();
        assert!(err.contains("deeper than 64"), "{err}");
        let signs = format!("{}1", "-".repeat(100_000));
        let none = BTreeMap::new();
        assert!(evaluate(&signs, Names::templates(&none))
            .unwrap_err()
            .contains("deeper"));
        assert_eq!(
            evaluate(
                &format!("{}7{}", "(".repeat(60), ")".repeat(60)),
                Names::templates(&none)
            )
            .unwrap(),
            "7"
        );
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
        ] {
            let err = parse(gen(dims).as_bytes()).unwrap_err();
            assert!(err.contains("more than") && err.contains("1000000"), "{dims}: {err}");
        }
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
