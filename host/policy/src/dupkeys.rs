//! Duplicate keys in a JSON text. `serde_json` keeps the last of two equal
//! keys silently; in a policy file that hides an edit, so it is an error.

use hcp_contracts::Problem;
use hcp_contracts::problem::pointer_token;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::collections::BTreeSet;
use std::fmt;

/// Every key that appears twice in the same object of `text`, at its
/// pointer. A text that is not JSON yields nothing (the parser says why).
pub(crate) fn duplicate_keys(text: &str) -> Vec<Problem> {
    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text);
    let _ = Walk {
        path: String::new(),
        found: &mut found,
    }
    .deserialize(&mut de);
    found
}

struct Walk<'a> {
    path: String,
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
        while let Some(key) = map.next_key::<String>()? {
            let path = format!("{}/{}", self.path, pointer_token(&key));
            if !seen.insert(key) {
                self.found.push(Problem::new(
                    path.clone(),
                    "duplicate key: JSON would keep only the last one",
                ));
            }
            map.next_value_seed(Walk {
                path,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        while seq
            .next_element_seed(Walk {
                path: format!("{}/{i}", self.path),
                found: &mut *self.found,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
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
}
