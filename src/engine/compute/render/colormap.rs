//! The colormaps of `format=png`: matplotlib's 256-entry tables, generated
//! once by `scripts/colormaps.py` into `colormaps.txt` and built in.

use std::sync::LazyLock;

/// A named table of 256 RGB colours.
#[derive(Debug)]
pub struct Colormap {
    name: String,
    colors: Vec<[u8; 3]>,
}

static COLORMAPS: LazyLock<Vec<Colormap>> = LazyLock::new(|| parse(include_str!("colormaps.txt")));

fn parse(text: &str) -> Vec<Colormap> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let mut words = line.split_ascii_whitespace();
            let name = words.next().expect("a name").to_string();
            let colors: Vec<[u8; 3]> = words
                .map(|hex| {
                    let channel = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex colour");
                    [channel(0), channel(2), channel(4)]
                })
                .collect();
            assert_eq!(colors.len(), 256, "colormap {name} has 256 colours");
            Colormap { name, colors }
        })
        .collect()
}

impl Colormap {
    /// The built-in colormap called `name`.
    pub fn named(name: &str) -> Option<&'static Colormap> {
        COLORMAPS.iter().find(|c| c.name == name)
    }

    /// The names of the built-in colormaps.
    pub fn names() -> Vec<&'static str> {
        COLORMAPS.iter().map(|c| c.name.as_str()).collect()
    }

    /// Colour `index` of 256.
    pub fn color(&self, index: u8) -> [u8; 3] {
        self.colors[usize::from(index)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_the_nine_maps_of_the_contract() {
        let names = [
            "gray", "viridis", "plasma", "inferno", "magma", "cividis", "turbo", "coolwarm", "RdBu_r",
        ];
        assert_eq!(Colormap::names(), names);
        let gray = Colormap::named("gray").unwrap();
        assert_eq!(gray.color(0), [0, 0, 0]);
        assert_eq!(gray.color(255), [255, 255, 255]);
        // viridis runs from dark purple to yellow.
        let viridis = Colormap::named("viridis").unwrap();
        assert_eq!(viridis.color(0), [68, 1, 84]);
        assert_eq!(viridis.color(255), [253, 231, 36]);
    }
}
