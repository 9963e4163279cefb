//! Risk levels (R1–R5) and data classifications (T1–T4) of HCP L3.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Risk level of HCP L3, ordered from minimal (`R1`) to critical (`R5`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RiskLevel {
    /// Minimal: read-only, no side effects.
    R1,
    /// Low: reversible side effects in a sandbox.
    R2,
    /// Moderate: irreversible side effects in a controlled environment.
    R3,
    /// High: physical resources or sensitive systems.
    R4,
    /// Critical: safety of life, hazardous materials.
    R5,
}

impl RiskLevel {
    /// All levels, lowest first.
    pub const ALL: [RiskLevel; 5] = [Self::R1, Self::R2, Self::R3, Self::R4, Self::R5];

    /// The level's name, `R1`…`R5`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::R1 => "R1",
            Self::R2 => "R2",
            Self::R3 => "R3",
            Self::R4 => "R4",
            Self::R5 => "R5",
        }
    }

    /// 1 for `R1` … 5 for `R5`.
    pub fn rank(self) -> u8 {
        self as u8 + 1
    }
}

impl fmt::Display for RiskLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RiskLevel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| format!("{s:?} is not a risk level (R1 to R5)"))
    }
}

/// Data classification of HCP L3, ordered from public (`T1`) to restricted (`T4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DataClass {
    /// Public.
    T1,
    /// Internal: access logging.
    T2,
    /// Confidential: encryption in transit and at rest.
    T3,
    /// Restricted: encryption, audit trail, access approval.
    T4,
}

impl DataClass {
    /// All classes, least sensitive first.
    pub const ALL: [DataClass; 4] = [Self::T1, Self::T2, Self::T3, Self::T4];

    /// The class's name, `T1`…`T4`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::T1 => "T1",
            Self::T2 => "T2",
            Self::T3 => "T3",
            Self::T4 => "T4",
        }
    }

    /// Whether data of this class must be encrypted at rest.
    pub fn encrypted_at_rest(self) -> bool {
        self >= Self::T3
    }
}

impl fmt::Display for DataClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DataClass {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| format!("{s:?} is not a data classification (T1 to T4)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order_and_round_trip() {
        assert!(RiskLevel::R1 < RiskLevel::R5);
        assert!(DataClass::T2 < DataClass::T4);
        for l in RiskLevel::ALL {
            assert_eq!(l.as_str().parse::<RiskLevel>(), Ok(l));
        }
        for c in DataClass::ALL {
            assert_eq!(c.as_str().parse::<DataClass>(), Ok(c));
        }
        assert!("R6".parse::<RiskLevel>().is_err());
        assert!("t1".parse::<DataClass>().is_err());
        assert!(DataClass::T3.encrypted_at_rest() && !DataClass::T2.encrypted_at_rest());
    }
}
