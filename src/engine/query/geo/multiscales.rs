//! Multiscale pyramids (contract 3.3): the levels of a variable, from a
//! group's `multiscales` attribute in the zarr-conventions layout
//! (`{"layout": [{"asset": "0"}, {"asset": "1", "derived_from": "0"}...]}`)
//! or OME-Zarr's (`[{"datasets": [{"path": "0"}, ...]}]`, as ndpyramid
//! writes it too). An asset names a level's array, or a group holding the
//! variable under the same name.

use serde_json::Value;

/// The paths (relative to the group with `attributes`) of every level of
/// the pyramid that holds the variable at `relative`, in the order the
/// group lists them; `None` when that group has no pyramid holding it.
pub fn levels(attributes: &Value, relative: &str) -> Option<Vec<String>> {
    let assets = assets(attributes.get("multiscales")?)?;
    let rest = assets.iter().find_map(|asset| {
        let asset = asset.trim_matches('/');
        if relative == asset {
            Some("")
        } else {
            relative.strip_prefix(asset).and_then(|r| r.strip_prefix('/'))
        }
    })?;
    Some(
        assets
            .iter()
            .map(|asset| match rest {
                "" => asset.trim_matches('/').to_string(),
                rest => format!("{}/{rest}", asset.trim_matches('/')),
            })
            .collect(),
    )
}

/// The level paths a `multiscales` attribute lists.
fn assets(multiscales: &Value) -> Option<Vec<String>> {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let list: Vec<String> = match multiscales {
        Value::Object(_) => multiscales
            .get("layout")?
            .as_array()?
            .iter()
            .filter_map(|l| text(l, "asset"))
            .collect(),
        // OME-Zarr: the first multiscale's datasets.
        Value::Array(all) => all
            .first()?
            .get("datasets")?
            .as_array()?
            .iter()
            .filter_map(|d| text(d, "path"))
            .collect(),
        _ => return None,
    };
    let safe = |p: &String| !p.is_empty() && !p.split('/').any(|s| s.is_empty() || s == "." || s == "..");
    (list.len() > 1 && list.iter().all(safe)).then_some(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn levels_from_either_convention_and_layout() {
        let groups = json!({"multiscales": {"layout": [
            {"asset": "0", "transform": {"scale": [1.0, 1.0]}},
            {"asset": "1", "derived_from": "0", "transform": {"scale": [2.0, 2.0]}}
        ]}});
        assert_eq!(levels(&groups, "0/tas"), Some(vec!["0/tas".into(), "1/tas".into()]));
        assert_eq!(levels(&groups, "1/tas"), Some(vec!["0/tas".into(), "1/tas".into()]));
        assert_eq!(levels(&groups, "10/tas"), None);
        assert_eq!(levels(&groups, "tas"), None);
        let arrays = json!({"multiscales": [{"datasets": [{"path": "s0"}, {"path": "s1"}, {"path": "s2"}]}]});
        assert_eq!(levels(&arrays, "s1"), Some(vec!["s0".into(), "s1".into(), "s2".into()]));
        assert_eq!(levels(&json!({}), "s1"), None);
        // Paths out of the group are not levels.
        let escape = json!({"multiscales": {"layout": [{"asset": "0"}, {"asset": "../x"}]}});
        assert_eq!(levels(&escape, "0"), None);
    }
}
