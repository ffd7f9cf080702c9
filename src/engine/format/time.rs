//! NumPy's datetime units and ISO 8601 text, for the `numpy.datetime64`
//! and `numpy.timedelta64` data types.
//!
//! Spec: <https://github.com/zarr-developers/zarr-extensions/tree/main/data-types/numpy.datetime64>.
//! A value is a signed 64-bit count of `scale_factor` units since
//! 1970-01-01T00:00 (proleptic Gregorian, no leap seconds); `i64::MIN` is
//! NaT. Text is NumPy's `str(np.datetime64(v, unit))`.

use std::fmt::Write;

use crate::engine::error::{Error, Result};

/// The value NumPy reserves for "not a time".
pub const NAT: i64 = i64::MIN;

/// A NumPy datetime unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Years.
    Year,
    /// Months.
    Month,
    /// Weeks.
    Week,
    /// Days.
    Day,
    /// Hours.
    Hour,
    /// Minutes.
    Minute,
    /// Seconds.
    Second,
    /// Milliseconds.
    Milli,
    /// Microseconds.
    Micro,
    /// Nanoseconds.
    Nano,
    /// Picoseconds.
    Pico,
    /// Femtoseconds.
    Femto,
    /// Attoseconds.
    Atto,
}

const UNITS: [(Unit, &str); 13] = [
    (Unit::Year, "Y"),
    (Unit::Month, "M"),
    (Unit::Week, "W"),
    (Unit::Day, "D"),
    (Unit::Hour, "h"),
    (Unit::Minute, "m"),
    (Unit::Second, "s"),
    (Unit::Milli, "ms"),
    (Unit::Micro, "us"),
    (Unit::Nano, "ns"),
    (Unit::Pico, "ps"),
    (Unit::Femto, "fs"),
    (Unit::Atto, "as"),
];

/// A unit and the count of it one step stands for (`10s`: 10, seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeUnit {
    /// The unit.
    pub unit: Unit,
    /// Units per step, at least 1.
    pub scale: u32,
}

impl TimeUnit {
    /// Parse NumPy's bracketed unit text: `ns`, `D`, `10s`.
    pub fn parse(text: &str) -> Result<Self> {
        let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        let scale = match &text[..digits] {
            "" => 1,
            n => n.parse().ok().filter(|s| *s > 0).ok_or_else(|| bad_unit(text))?,
        };
        Self::new(&text[digits..], scale).ok_or_else(|| bad_unit(text))
    }

    /// A unit by its NumPy name (`ns`, `D`, ...) and scale.
    pub fn new(name: &str, scale: u32) -> Option<Self> {
        let unit = UNITS.iter().find(|(_, n)| *n == name)?.0;
        (scale > 0).then_some(Self { unit, scale })
    }

    /// The unit's NumPy name, without the scale.
    pub fn unit_name(&self) -> &'static str {
        UNITS
            .iter()
            .find(|(u, _)| *u == self.unit)
            .expect("every unit is named")
            .1
    }

    /// NumPy's unit text: `ns`, or `10s` with a scale.
    pub fn numpy(&self) -> String {
        match self.scale {
            1 => self.unit_name().to_string(),
            n => format!("{n}{}", self.unit_name()),
        }
    }

    /// NumPy's text of the instant `value` steps after the epoch (`None` for NaT).
    pub fn format_datetime(&self, value: i64) -> Option<String> {
        if value == NAT {
            return None;
        }
        let count = value as i128 * self.scale as i128;
        Some(match self.unit {
            Unit::Year => year_text(1970 + count),
            Unit::Month => {
                let (y, m) = (1970 + count.div_euclid(12), count.rem_euclid(12) + 1);
                format!("{}-{m:02}", year_text(y))
            }
            Unit::Week => date_text(count * 7),
            Unit::Day => date_text(count),
            _ => {
                let (per_second, digits) = self.sub_second();
                let count = match self.unit {
                    Unit::Hour => count * 3600,
                    Unit::Minute => count * 60,
                    _ => count,
                };
                let per_day = per_second * 86_400;
                let (days, rest) = (count.div_euclid(per_day), count.rem_euclid(per_day));
                let (seconds, fraction) = (rest / per_second, rest % per_second);
                let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
                let mut out = date_text(days);
                let _ = write!(out, "T{h:02}");
                if self.unit != Unit::Hour {
                    let _ = write!(out, ":{m:02}");
                }
                if !matches!(self.unit, Unit::Hour | Unit::Minute) {
                    let _ = write!(out, ":{s:02}");
                }
                if digits > 0 {
                    let _ = write!(out, ".{fraction:0digits$}");
                }
                out
            }
        })
    }

    /// Counts per second and fraction digits of units of a day or less
    /// (hours and minutes are counted in seconds).
    fn sub_second(&self) -> (i128, usize) {
        match self.unit {
            Unit::Hour | Unit::Minute | Unit::Second => (1, 0),
            Unit::Milli => (1_000, 3),
            Unit::Micro => (1_000_000, 6),
            Unit::Nano => (1_000_000_000, 9),
            Unit::Pico => (1_000_000_000_000, 12),
            Unit::Femto => (1_000_000_000_000_000, 15),
            _ => (1_000_000_000_000_000_000, 18),
        }
    }
}

fn bad_unit(text: &str) -> Error {
    Error::Unsupported(format!("datetime unit \"{text}\""))
}

/// A year as NumPy writes it: four digits from 0 to 9999, else as it is.
fn year_text(year: i128) -> String {
    if (0..=9999).contains(&year) {
        format!("{year:04}")
    } else {
        year.to_string()
    }
}

/// Nanoseconds in a day.
pub(crate) const DAY_NS: i128 = 86_400_000_000_000;

/// ISO 8601 text of an instant given in seconds since 1970-01-01T00:00 UTC
/// (`None` when it is not finite).
pub fn format_epoch_seconds(seconds: f64) -> Option<String> {
    (seconds.is_finite() && seconds.abs() < 1e15).then(|| format_instant((seconds * 1e9).round() as i128))
}

/// Seconds since 1970-01-01T00:00 UTC of ISO 8601 text (`None` when it
/// is not an instant).
pub fn epoch_seconds(text: &str) -> Option<f64> {
    parse_instant(text).map(|ns| ns as f64 / 1e9)
}

/// ISO 8601 text of an instant given in nanoseconds since 1970-01-01T00:00
/// UTC: `2020-01-05T12:00:00`, with as many fraction digits as it needs.
pub(crate) fn format_instant(ns: i128) -> String {
    // Written digit by digit: an EDR series formats thousands of these an
    // answer, and `format!` of i128s showed up in its profile.
    let (days, rest) = (ns.div_euclid(DAY_NS), ns.rem_euclid(DAY_NS));
    let mut out = String::with_capacity(32);
    push_date(&mut out, days);
    let seconds = (rest / 1_000_000_000) as u32;
    out.push('T');
    for part in [seconds / 3600, seconds / 60 % 60, seconds % 60] {
        push_two_digits(&mut out, part);
        out.push(':');
    }
    out.pop();
    let fraction = (rest % 1_000_000_000) as u32;
    if fraction != 0 {
        let (mut digits, mut width) = (fraction, 9);
        while digits.is_multiple_of(10) {
            digits /= 10;
            width -= 1;
        }
        let _ = write!(out, ".{digits:0width$}");
    }
    out
}

/// `n` (below 100) as two digits.
fn push_two_digits(out: &mut String, n: u32) {
    out.push(char::from(b'0' + (n / 10) as u8));
    out.push(char::from(b'0' + (n % 10) as u8));
}

/// `YYYY-MM-DD` of the day `days` after 1970-01-01, onto `out`.
fn push_date(out: &mut String, days: i128) {
    let (y, m, d) = civil_from_days(days);
    if (0..=9999).contains(&y) {
        push_two_digits(out, (y / 100) as u32);
        push_two_digits(out, (y % 100) as u32);
    } else {
        out.push_str(&year_text(y));
    }
    out.push('-');
    push_two_digits(out, m);
    out.push('-');
    push_two_digits(out, d);
}

/// An ISO 8601 instant in nanoseconds since 1970-01-01T00:00 UTC:
/// `2020-01-05`, `2020-01-05T12:00`, `2020-01-05 12:00:00.5`, with `Z` or
/// `±HH:MM` (no offset: UTC). Months and days may have one digit, as CF
/// `units` often write them (`days since 1900-1-1`).
pub(crate) fn parse_instant(text: &str) -> Option<i128> {
    let text = text.trim();
    let (date, time) = match text.find(['T', ' ']) {
        Some(i) => (&text[..i], Some(text[i + 1..].trim())),
        None => (text, None),
    };
    let negative = date.starts_with('-');
    let mut parts = date.trim_start_matches('-').splitn(3, '-');
    let year: i128 = parts.next()?.parse().ok()?;
    let year = if negative { -year } else { year };
    let month: u32 = parts.next().map_or(Some(1), |m| m.parse().ok())?;
    let day: u32 = parts.next().map_or(Some(1), |d| d.parse().ok())?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut ns = days_from_civil(year, month, day) * DAY_NS;
    if let Some(time) = time.filter(|t| !t.is_empty()) {
        ns += parse_time_of_day(time)?;
    }
    Some(ns)
}

/// `HH[:MM[:SS[.fff]]]` with an optional `Z` or `±HH[:MM]`, in nanoseconds
/// after midnight UTC (before it, for a positive offset).
fn parse_time_of_day(text: &str) -> Option<i128> {
    let (clock, offset) = match text.find(['Z', 'z', '+', '-']) {
        Some(i) => (&text[..i], &text[i..]),
        None => (text, ""),
    };
    let mut fields = clock.split(':');
    let hours: i128 = fields.next()?.parse().ok()?;
    let minutes: i128 = fields.next().map_or(Some(0), |m| m.parse().ok())?;
    let (seconds, fraction) = match fields.next() {
        None => (0, 0),
        Some(s) => {
            let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
            if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let frac_ns: i128 = if frac.is_empty() {
                0
            } else {
                format!("{frac:0<9}").parse().ok()?
            };
            (whole.parse::<i128>().ok()?, frac_ns)
        }
    };
    if fields.next().is_some() || hours > 24 || minutes > 59 || seconds > 60 {
        return None;
    }
    let offset_ns = match offset {
        "" | "Z" | "z" => 0,
        signed => {
            let sign = if signed.starts_with('-') { -1 } else { 1 };
            let body = &signed[1..];
            let (h, m) = match body.split_once(':') {
                Some((h, m)) => (h, m),
                None if body.len() == 4 => body.split_at(2),
                None => (body, "0"),
            };
            let (h, m): (i128, i128) = (h.parse().ok()?, m.parse().ok()?);
            sign * (h * 3600 + m * 60) * 1_000_000_000
        }
    };
    Some(((hours * 60 + minutes) * 60 + seconds) * 1_000_000_000 + fraction - offset_ns)
}

/// A CF time unit (`units` of a time variable) for elements of `unit`,
/// as [`TimeUnit::cf_count`] gives them: NumPy's weeks become days, its
/// years and months days since the epoch, and units finer than
/// nanoseconds nanoseconds.
impl TimeUnit {
    /// The CF name of the unit counts are given in: `seconds`, `days`, ...
    pub fn cf_unit(&self) -> &'static str {
        match self.unit {
            Unit::Year | Unit::Month | Unit::Week | Unit::Day => "days",
            Unit::Hour => "hours",
            Unit::Minute => "minutes",
            Unit::Second => "seconds",
            Unit::Milli => "milliseconds",
            Unit::Micro => "microseconds",
            Unit::Nano | Unit::Pico | Unit::Femto | Unit::Atto => "nanoseconds",
        }
    }

    /// Stored value `value` as a count of [`Self::cf_unit`] since the
    /// epoch (NaN for NaT). Years and months are calendar ones, so as a
    /// duration (a `timedelta64`) they have no count: `None`.
    pub fn cf_count(&self, value: i64, instant: bool) -> Option<f64> {
        if value == NAT {
            return Some(f64::NAN);
        }
        let steps = value as i128 * self.scale as i128;
        Some(match self.unit {
            Unit::Year if instant => days_from_civil(1970 + steps, 1, 1) as f64,
            Unit::Month if instant => {
                let month = steps.rem_euclid(12) as u32 + 1;
                days_from_civil(1970 + steps.div_euclid(12), month, 1) as f64
            }
            Unit::Year | Unit::Month => return None,
            Unit::Week => (steps * 7) as f64,
            Unit::Pico => steps as f64 / 1e3,
            Unit::Femto => steps as f64 / 1e6,
            Unit::Atto => steps as f64 / 1e9,
            _ => steps as f64,
        })
    }
}

fn days_in_month(year: i128, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
pub(crate) fn days_from_civil(year: i128, month: u32, day: u32) -> i128 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = month as i128;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i128 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DD` of the day `days` after 1970-01-01.
fn date_text(days: i128) -> String {
    let mut out = String::with_capacity(10);
    push_date(&mut out, days);
    out
}

/// The proleptic Gregorian (year, month, day) of a day count since
/// 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i128) -> (i128, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i128::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cf_counts_of_every_unit() {
        let unit = |t: &str| TimeUnit::parse(t).unwrap();
        assert_eq!(unit("ns").cf_unit(), "nanoseconds");
        assert_eq!(unit("10s").cf_count(3, true), Some(30.0));
        assert_eq!(unit("W").cf_count(2, true), Some(14.0));
        assert_eq!(unit("Y").cf_count(1, true), Some(365.0));
        assert_eq!(unit("M").cf_count(-1, true), Some(-31.0));
        assert_eq!(unit("M").cf_count(1, false), None);
        assert_eq!(unit("ps").cf_count(5_000, true), Some(5.0));
        assert!(unit("s").cf_count(NAT, true).unwrap().is_nan());
    }

    fn text(unit: &str, v: i64) -> String {
        TimeUnit::parse(unit).unwrap().format_datetime(v).unwrap()
    }

    #[test]
    fn formats_like_numpy() {
        // Each expected text is NumPy 2.3's `str(np.datetime64(v, unit))`.
        assert_eq!(text("ns", -1), "1969-12-31T23:59:59.999999999");
        assert_eq!(text("10s", 5), "1970-01-01T00:00:50");
        assert_eq!(text("W", 1), "1970-01-08");
        assert_eq!(text("D", -800_000), "-221-09-04");
        assert_eq!(text("D", 3_000_000), "10183-09-21");
        assert_eq!(text("ps", 1), "1970-01-01T00:00:00.000000000001");
        assert_eq!(text("Y", 1), "1971");
        assert_eq!(text("M", 1), "1970-02");
        assert_eq!(text("M", -1), "1969-12");
        assert_eq!(text("h", 1), "1970-01-01T01");
        assert_eq!(text("m", 1), "1970-01-01T00:01");
        assert_eq!(text("D", 18_262), "2020-01-01");
        assert_eq!(text("ms", 1_582_934_400_123), "2020-02-29T00:00:00.123");
        assert_eq!(TimeUnit::parse("s").unwrap().format_datetime(NAT), None);
    }

    #[test]
    fn instants_parse_and_print() {
        let day = |d: i128| d * DAY_NS;
        assert_eq!(parse_instant("1970-01-01"), Some(0));
        assert_eq!(parse_instant("2020-01-05"), Some(day(18_266)));
        assert_eq!(
            parse_instant("2020-01-05T12:00"),
            Some(day(18_266) + 12 * 3_600_000_000_000)
        );
        assert_eq!(
            parse_instant("2020-01-05T12:00Z"),
            parse_instant("2020-01-05T14:00:00+02:00")
        );
        assert_eq!(parse_instant("1900-1-1 00:00:00"), Some(day(-25_567)));
        assert_eq!(parse_instant("2000-01-01T00:00:00.5"), Some(day(10_957) + 500_000_000));
        for bad in [
            "",
            "2020-13-01",
            "2021-02-29",
            "2020-01-05T25:00",
            "x",
            "2020-01-05T12:00:00.1234567891",
        ] {
            assert_eq!(parse_instant(bad), None, "{bad}");
        }
        assert_eq!(format_instant(day(18_266) + 1_500_000_000), "2020-01-05T00:00:01.5");
        assert_eq!(format_instant(-1), "1969-12-31T23:59:59.999999999");
        // Digit by digit as `format!` would write them, across eras, years
        // outside 0..=9999 and fractions of every width.
        let reference = |ns: i128| {
            let (days, rest) = (ns.div_euclid(DAY_NS), ns.rem_euclid(DAY_NS));
            let (y, m, d) = civil_from_days(days);
            let s = rest / 1_000_000_000;
            let mut out = format!(
                "{}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
                year_text(y),
                s / 3600,
                s / 60 % 60,
                s % 60
            );
            let fraction = format!("{:09}", rest % 1_000_000_000);
            if rest % 1_000_000_000 != 0 {
                out.push('.');
                out.push_str(fraction.trim_end_matches('0'));
            }
            out
        };
        let mut ns: i128 = -400 * 366 * DAY_NS * 30;
        while ns < 400 * 366 * DAY_NS * 30 {
            for extra in [0, 1, 10_000, 123_456_789, 500_000_000] {
                assert_eq!(format_instant(ns + extra), reference(ns + extra));
            }
            ns += 7_919 * DAY_NS + 3_601_000_000_007;
        }
        for d in [-800_000i128, -1, 0, 59, 60, 18_262, 2_932_896] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }

    #[test]
    fn units_parse_and_print() {
        assert_eq!(TimeUnit::parse("10s").unwrap().numpy(), "10s");
        assert_eq!(TimeUnit::parse("us").unwrap().scale, 1);
        for bad in ["", "x", "0s", "s1", "-1s"] {
            assert!(TimeUnit::parse(bad).is_err(), "{bad}");
        }
    }
}
