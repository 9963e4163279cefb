//! Units of the quantities an envelope bounds: temperature, pressure, flow,
//! rate and time. A value is converted into the envelope's unit before it is
//! compared; a unit the host does not know, or of another dimension, refuses
//! the command (it is never compared unconverted).

use std::fmt;

/// Why a value could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// The unit is not known.
    #[error("unknown unit {0:?}")]
    Unknown(String),
    /// The units measure different things.
    #[error("cannot convert {from} to {to}: different dimensions")]
    Mismatch {
        /// Source unit.
        from: String,
        /// Target unit.
        to: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dimension {
    Temperature,
    Pressure,
    Flow,
    TemperatureRate,
    Time,
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Temperature => "temperature",
            Self::Pressure => "pressure",
            Self::Flow => "flow",
            Self::TemperatureRate => "temperature rate",
            Self::Time => "time",
        })
    }
}

/// (dimension, scale, offset): `base = value * scale + offset`. Bases:
/// kelvin, pascal, sccm, kelvin per minute, seconds.
fn lookup(unit: &str) -> Option<(Dimension, f64, f64)> {
    use Dimension::*;
    Some(match unit.trim().to_ascii_lowercase().as_str() {
        "celsius" | "c" | "°c" | "degc" => (Temperature, 1.0, 273.15),
        "kelvin" | "k" => (Temperature, 1.0, 0.0),
        "fahrenheit" | "f" | "°f" | "degf" => (Temperature, 5.0 / 9.0, 273.15 - 32.0 * 5.0 / 9.0),
        "pa" | "pascal" => (Pressure, 1.0, 0.0),
        "kpa" => (Pressure, 1e3, 0.0),
        "mbar" => (Pressure, 100.0, 0.0),
        "bar" => (Pressure, 1e5, 0.0),
        "atm" => (Pressure, 101_325.0, 0.0),
        "torr" | "mmhg" => (Pressure, 101_325.0 / 760.0, 0.0),
        "sccm" => (Flow, 1.0, 0.0),
        "slm" => (Flow, 1000.0, 0.0),
        "celsius_per_minute" | "kelvin_per_minute" | "c/min" | "k/min" => {
            (TemperatureRate, 1.0, 0.0)
        }
        "s" | "second" | "seconds" => (Time, 1.0, 0.0),
        "min" | "minute" | "minutes" => (Time, 60.0, 0.0),
        "h" | "hour" | "hours" => (Time, 3600.0, 0.0),
        _ => return None,
    })
}

/// Converts `value` from `from` into `to`.
///
/// # Errors
///
/// An unknown unit, or units of different dimensions.
pub fn convert(value: f64, from: &str, to: &str) -> Result<f64, UnitError> {
    let (df, sf, of) = lookup(from).ok_or_else(|| UnitError::Unknown(from.to_owned()))?;
    let (dt, st, ot) = lookup(to).ok_or_else(|| UnitError::Unknown(to.to_owned()))?;
    if sf == st && of == ot && df == dt {
        return Ok(value);
    }
    if df != dt {
        return Err(UnitError::Mismatch {
            from: format!("{from} ({df})"),
            to: format!("{to} ({dt})"),
        });
    }
    Ok((value * sf + of - ot) / st)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn conversions() {
        assert!(close(
            convert(1073.15, "kelvin", "celsius").expect("ok"),
            800.0
        ));
        assert!(close(convert(800.0, "celsius", "K").expect("ok"), 1073.15));
        assert!(close(
            convert(212.0, "fahrenheit", "celsius").expect("ok"),
            100.0
        ));
        assert!(close(convert(760.0, "torr", "atm").expect("ok"), 1.0));
        assert!(close(convert(1.0, "slm", "sccm").expect("ok"), 1000.0));
        assert!(close(convert(5.0, "bar", "atm").expect("ok"), 4.934_616_4));
    }

    #[test]
    fn refusals() {
        assert_eq!(
            convert(1.0, "furlongs", "atm"),
            Err(UnitError::Unknown("furlongs".into()))
        );
        assert!(matches!(
            convert(1.0, "celsius", "atm"),
            Err(UnitError::Mismatch { .. })
        ));
    }
}
