//! Text for XML 1.0 and HTML documents (WMS capabilities and exception
//! reports, listings, the explorer's pages): markup characters escaped, and
//! characters XML 1.0 forbids anywhere in a document (C0 controls other
//! than tab, newline and carriage return; U+FFFE and U+FFFF) replaced by
//! U+FFFD, since no escape of them is well-formed and a parser stops at the
//! first. Attribute values from data can hold any of them.

/// `text` safe inside XML or HTML text and single- or double-quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if !allowed(c) => out.push(char::REPLACEMENT_CHARACTER),
            c => out.push(c),
        }
    }
    out
}

/// Whether XML 1.0 allows `c` in a document (its production `Char`).
pub fn allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_replaces_forbidden_characters() {
        assert_eq!(escape(r#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(
            escape("a\u{1}b\u{b}c\u{1f}d\te\nf"),
            "a\u{fffd}b\u{fffd}c\u{fffd}d\te\nf"
        );
        assert_eq!(escape("\u{fffe}\u{ffff}\u{10000}é"), "\u{fffd}\u{fffd}\u{10000}é");
    }

    #[test]
    fn every_escaped_text_is_well_formed() {
        for c in (0u32..0x11_0000).filter_map(char::from_u32) {
            let text = escape(&c.to_string());
            assert!(text.chars().all(allowed), "U+{:04X}", c as u32);
            assert!(!text.contains(['<', '>', '"', '\'']), "U+{:04X}", c as u32);
        }
    }
}
