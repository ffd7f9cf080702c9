//! Store keys: validated before they reach any store.
//!
//! A valid key uses only `a-z A-Z 0-9 / . - _`, has no leading or trailing
//! `/`, no empty segment, and no `.` or `..` segment, so it can never leave
//! the dataset root whatever the backend.

/// Check `key` (relative to the dataset root; `""` is the root itself).
pub fn validate_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Ok(());
    }
    if let Some(c) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_')))
    {
        return Err(format!(
            "invalid key '{}': character {c:?} is not allowed",
            key.escape_default()
        ));
    }
    for segment in key.split('/') {
        match segment {
            "" => {
                return Err(format!(
                    "invalid key '{key}': empty path segment (leading, trailing or double '/')"
                ))
            }
            "." | ".." => return Err(format!("invalid key '{key}': '{segment}' segments are not allowed")),
            _ => {}
        }
    }
    Ok(())
}

/// Join a node path and a relative key (either may be empty).
pub fn join(prefix: &str, key: &str) -> String {
    match (prefix.is_empty(), key.is_empty()) {
        (true, _) => key.to_string(),
        (_, true) => prefix.to_string(),
        _ => format!("{prefix}/{key}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_zarr_keys() {
        for key in ["", "zarr.json", "a/b/zarr.json", "arr/c/0/1", "arr/0.1", "x-y_z/c.0.1"] {
            assert!(validate_key(key).is_ok(), "{key}");
        }
    }

    #[test]
    fn rejects_traversal_and_odd_characters() {
        for key in [
            "..", "a/../b", "./a", "a/.", "/a", "a/", "a//b", "a\\b", "%2e%2e", "a\0b", "a\nb", "a b", "ä", "a?b",
        ] {
            assert!(validate_key(key).is_err(), "{key:?}");
        }
    }
}
