//! Units that risk rules and envelopes convert between: temperatures and
//! pressures. A rule states the unit of its bound; the input's own unit is
//! converted to it before comparing.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What a unit measures; only units of the same quantity convert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// Temperature.
    Temperature,
    /// Pressure.
    Pressure,
}

/// A unit this crate can convert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Degrees Celsius.
    Celsius,
    /// Kelvin.
    Kelvin,
    /// Degrees Fahrenheit.
    Fahrenheit,
    /// Pascal.
    Pa,
    /// Kilopascal.
    Kpa,
    /// Bar.
    Bar,
    /// Standard atmosphere.
    Atm,
    /// Torr (1/760 atm).
    Torr,
    /// Pound-force per square inch.
    Psi,
}

impl Unit {
    /// Every unit.
    pub const ALL: [Unit; 9] = [
        Self::Celsius,
        Self::Kelvin,
        Self::Fahrenheit,
        Self::Pa,
        Self::Kpa,
        Self::Bar,
        Self::Atm,
        Self::Torr,
        Self::Psi,
    ];

    /// The name used in policy files and inputs, e.g. `celsius`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Celsius => "celsius",
            Self::Kelvin => "kelvin",
            Self::Fahrenheit => "fahrenheit",
            Self::Pa => "pa",
            Self::Kpa => "kpa",
            Self::Bar => "bar",
            Self::Atm => "atm",
            Self::Torr => "torr",
            Self::Psi => "psi",
        }
    }

    /// What it measures.
    pub fn quantity(self) -> Quantity {
        match self {
            Self::Celsius | Self::Kelvin | Self::Fahrenheit => Quantity::Temperature,
            _ => Quantity::Pressure,
        }
    }

    /// Names of the units of the same quantity, for error messages.
    pub fn siblings(self) -> String {
        Self::ALL
            .iter()
            .filter(|u| u.quantity() == self.quantity())
            .map(|u| u.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `v` in this unit, expressed in the quantity's base unit (kelvin, pascal).
    fn to_base(self, v: f64) -> f64 {
        match self {
            Self::Celsius => v + 273.15,
            Self::Kelvin | Self::Pa => v,
            Self::Fahrenheit => (v - 32.0) * 5.0 / 9.0 + 273.15,
            Self::Kpa => v * 1_000.0,
            Self::Bar => v * 100_000.0,
            Self::Atm => v * 101_325.0,
            Self::Torr => v * 101_325.0 / 760.0,
            Self::Psi => v * 6_894.757_293_168,
        }
    }

    /// `v` in the quantity's base unit, expressed in this unit.
    fn base_to(self, v: f64) -> f64 {
        match self {
            Self::Celsius => v - 273.15,
            Self::Kelvin | Self::Pa => v,
            Self::Fahrenheit => (v - 273.15) * 9.0 / 5.0 + 32.0,
            Self::Kpa => v / 1_000.0,
            Self::Bar => v / 100_000.0,
            Self::Atm => v / 101_325.0,
            Self::Torr => v * 760.0 / 101_325.0,
            Self::Psi => v / 6_894.757_293_168,
        }
    }

    /// `v`, given in `self`, expressed in `to`; `None` across quantities.
    pub fn convert(self, v: f64, to: Unit) -> Option<f64> {
        if self == to {
            return Some(v);
        }
        (self.quantity() == to.quantity()).then(|| to.base_to(self.to_base(v)))
    }

    /// `v` with this unit's symbol, e.g. `800°C`, `1073.15 K`, `5 atm`.
    pub fn show(self, v: f64) -> String {
        let n = number(v);
        match self {
            Self::Celsius => format!("{n}°C"),
            Self::Fahrenheit => format!("{n}°F"),
            Self::Kelvin => format!("{n} K"),
            Self::Pa => format!("{n} Pa"),
            Self::Kpa => format!("{n} kPa"),
            Self::Bar => format!("{n} bar"),
            Self::Atm => format!("{n} atm"),
            Self::Torr => format!("{n} Torr"),
            Self::Psi => format!("{n} psi"),
        }
    }
}

/// `v` rounded to at most 6 decimals, without trailing zeros
/// (`1073.1500000001` → `1073.15`, `800.0` → `800`).
pub fn number(v: f64) -> String {
    let text = format!("{v:.6}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Unit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|u| u.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|u| u.name()).collect();
                format!("{s:?} is not a known unit ({})", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn temperatures_convert() {
        assert!(close(Unit::Kelvin.convert(1473.15, Unit::Celsius), 1200.0));
        assert!(close(Unit::Celsius.convert(800.0, Unit::Kelvin), 1073.15));
        assert!(close(Unit::Fahrenheit.convert(212.0, Unit::Celsius), 100.0));
        assert!(close(Unit::Celsius.convert(-40.0, Unit::Fahrenheit), -40.0));
        assert_eq!(Unit::Celsius.convert(1.0, Unit::Atm), None);
    }

    #[test]
    fn pressures_convert() {
        assert!(close(Unit::Atm.convert(1.0, Unit::Kpa), 101.325));
        assert!(close(Unit::Torr.convert(760.0, Unit::Atm), 1.0));
        assert!(close(Unit::Bar.convert(1.0, Unit::Pa), 100_000.0));
    }

    #[test]
    fn display() {
        assert_eq!(Unit::Celsius.show(800.0), "800°C");
        assert_eq!(Unit::Kelvin.show(800.0 + 273.15), "1073.15 K");
        assert_eq!(Unit::Atm.show(0.5), "0.5 atm");
        assert_eq!(number(-0.0000001), "0");
        assert_eq!(
            "rankine".parse::<Unit>().expect_err("unknown"),
            "\"rankine\" is not a known unit (celsius, kelvin, fahrenheit, pa, kpa, bar, atm, torr, psi)"
        );
        assert_eq!(Unit::Kelvin.siblings(), "celsius, kelvin, fahrenheit");
    }
}
