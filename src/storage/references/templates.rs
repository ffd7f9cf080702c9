//! `{{name}}` templates and the integer expressions of `gen` entries
//! (`i*100+8`), bounded in depth and in the bytes they may make.

use std::collections::BTreeMap;

/// Deepest nesting of parentheses and signs in a `gen` expression.
pub(super) const MAX_EXPRESSION_DEPTH: usize = 64;

/// Bytes of keys and URLs a set may make by expanding templates, in all: a
/// short template named many times in many keys could otherwise ask for
/// terabytes.
pub(super) const MAX_RENDERED_BYTES: usize = 256 << 20;

/// What is left of [`MAX_RENDERED_BYTES`] while a set is parsed.
pub(super) struct Rendered(pub(super) usize);

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
pub(super) struct Names<'a> {
    pub(super) vars: &'a [(String, String)],
    pub(super) templates: &'a BTreeMap<String, String>,
}

impl<'a> Names<'a> {
    pub(super) fn templates(templates: &'a BTreeMap<String, String>) -> Self {
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
pub(super) fn render(text: &str, values: Names<'_>, rendered: &mut Rendered) -> Result<String, String> {
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
pub(super) fn evaluate(expression: &str, values: Names<'_>) -> Result<String, String> {
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

pub(super) fn tokens(text: &str) -> Result<Vec<String>, String> {
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
pub(super) struct Expression<'a> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn deep_expressions_are_refused_not_recursed() {
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
    }
}
