//! HTML building blocks of the explorer: escaping, links and the page frame.

use std::fmt::Write;

pub(super) use crate::encode::xml::escape;

pub(in crate::http) use crate::http::{url_path, url_segment};

/// The explorer page of node `path` (empty: the root) of dataset `ds`.
pub(super) fn explore_href(ds: &str, path: &str) -> String {
    let ds = url_segment(ds);
    match url_path(path).as_str() {
        "" => format!("/explore/{ds}"),
        p => format!("/explore/{ds}/{p}"),
    }
}

/// A whole page: `title`, a breadcrumb of `(text, href)` links ending in
/// the current page, and `main` (HTML).
pub(super) fn page(title: &str, crumbs: &[(String, Option<String>)], main: &str) -> String {
    let mut nav = String::new();
    for (i, (text, href)) in crumbs.iter().enumerate() {
        if i > 0 {
            nav.push_str(" <span aria-hidden=\"true\">/</span> ");
        }
        match href {
            Some(href) => {
                let _ = write!(nav, "<a href=\"{}\">{}</a>", escape(href), escape(text));
            }
            None => {
                let _ = write!(nav, "<span aria-current=\"page\">{}</span>", escape(text));
            }
        }
    }
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · zarr-serve</title>
<link rel="icon" href="/explore-assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/explore-assets/explorer.css">
<script src="/explore-assets/explorer.js" defer></script>
</head>
<body>
<header><a class="brand" href="/">zarr-serve</a><nav aria-label="Breadcrumb">{nav}</nav></header>
<main>
{main}
</main>
<footer>API: <a href="/openapi.yaml">openapi.yaml</a></footer>
</body>
</html>
"#,
        title = escape(title),
    )
}

/// A `<dl>` of `(term, value)` pairs; values are escaped.
pub(super) fn definitions(items: &[(&str, String)]) -> String {
    let mut out = String::from("<dl class=\"meta\">\n");
    for (term, value) in items {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", escape(term), escape(value));
    }
    out.push_str("</dl>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_encodes() {
        assert_eq!(escape(r#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(explore_href("sample", ""), "/explore/sample");
        assert_eq!(explore_href("my data", "/a b/c%"), "/explore/my%20data/a%20b/c%25");
        let html = page("t<", &[("a".into(), Some("/".into())), ("b".into(), None)], "<p>x</p>");
        assert!(html.contains("<title>t&lt; · zarr-serve</title>"));
        assert!(html.contains("<span aria-current=\"page\">b</span>"));
    }
}
