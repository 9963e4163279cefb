//! Duplicate keys in a JSON text. `serde_json` keeps the last of two equal
//! keys silently; in a policy file that hides an edit, so it is an error.

use hcp_contracts::Problem;
use hcp_contracts::problem::pointer_token;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::collections::BTreeSet;
use std::fmt;

/// Duplicate keys reported of one text at most; past them the walk stops
/// recording (the file is refused all the same).
const MAX_REPORTED: usize = 100;

/// Every key that appears twice in the same object of `text`, at its
/// pointer (at most [`MAX_REPORTED`] of them). A text that is not JSON
/// yields nothing (the parser says why).
///
/// The pointer is one buffer, extended and cut back as the walk goes in
/// and out, and copied only for a duplicate: a pointer formatted for every
/// value, and kept for every duplicate, cost a hostile file's long key
/// once per element under it (gigabytes, minutes, for a 1 MiB file).
pub(crate) fn duplicate_keys(text: &str) -> Vec<Problem> {
    let mut found = Vec::new();
    let mut path = String::new();
    let mut de = serde_json::Deserializer::from_str(text);
    let _ = Walk {
        path: &mut path,
        found: &mut found,
    }
    .deserialize(&mut de);
    found
}

struct Walk<'a> {
    path: &'a mut String,
    found: &'a mut Vec<Problem>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = BTreeSet::new();
        let depth = self.path.len();
        while let Some(key) = map.next_key::<String>()? {
            self.path.push('/');
            self.path.push_str(&pointer_token(&key));
            if !seen.insert(key) && self.found.len() < MAX_REPORTED {
                self.found.push(Problem::new(
                    self.path.clone(),
                    "duplicate key: JSON would keep only the last one",
                ));
            }
            map.next_value_seed(Walk {
                path: &mut *self.path,
                found: &mut *self.found,
            })?;
            self.path.truncate(depth);
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let depth = self.path.len();
        let mut i = 0usize;
        loop {
            use std::fmt::Write as _;
            let _ = write!(self.path, "/{i}");
            let more = seq
                .next_element_seed(Walk {
                    path: &mut *self.path,
                    found: &mut *self.found,
                })?
                .is_some();
            self.path.truncate(depth);
            if !more {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_duplicates_at_any_depth() {
        let found = duplicate_keys(r#"{"a": 1, "b": [{"x/y": 1, "x/y": 2}], "a": 3}"#);
        let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "/b/0/x~1y: duplicate key: JSON would keep only the last one",
                "/a: duplicate key: JSON would keep only the last one",
            ]
        );
        assert!(duplicate_keys(r#"{"a": {"a": 1}}"#).is_empty());
        assert!(duplicate_keys("not json").is_empty());
    }

    /// A hostile text costs about its own size: a long key was copied into
    /// the pointer of every value under it, and into every duplicate's
    /// problem (a 1 MiB file asked for tens of GB).
    #[test]
    fn a_long_key_over_many_values_is_not_copied_for_each() {
        let key = "k".repeat(50_000);
        let duplicates = r#""a":0,"#.repeat(10_000);
        let values = "0,".repeat(100_000);
        let text = format!(r#"{{"{key}":{{{duplicates}"a":0}},"{key}2":[{values}0]}}"#);
        let found = duplicate_keys(&text);
        assert_eq!(found.len(), MAX_REPORTED);
        assert!(
            found[0]
                .to_string()
                .starts_with(&format!("/{key}/a: duplicate key"))
        );
    }
}
