//! The grants of the table's newer interfaces (`grants.config`,
//! `grants.keyvalue`, ...), held by grant rather than in a field each.
//!
//! A grant whose [`Grant::shape`] is `Some` has no field of its own in
//! [`super::GrantsDoc`], [`super::Grants`] or the PEP's surface: it is an
//! entry of [`TableGrants`], written and read as `grants.<field>` by its
//! shape (a list of names, or of items each with a name and an access).
//! Adding such a grant is a `Grant` variant and its row in
//! [`crate::interfaces`]; this module, the loader's checks (each name
//! once), review, diff and the surface follow it with no further code.

use super::access::Access;
use crate::interfaces::{Grant, GrantShape};
use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// The grants of the table's grants with a [`GrantShape`], by grant (in
/// [`Grant::ALL`]'s order). Serialized as the `grants.<field>` entries of
/// the non-empty ones, so that a manifest or a surface without them reads
/// and hashes as before.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableGrants(BTreeMap<Grant, Vec<GrantItem>>);

/// One item of a table grant: a name, and its access when the grant's
/// shape is [`GrantShape::Items`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantItem {
    /// The name granted (a config key, a bucket).
    pub name: String,
    /// Read-only or read-write; `None` for a grant of names.
    pub access: Option<Access>,
}

impl GrantItem {
    /// How reports show it: the name, with its access when it has one
    /// (`cache (read-write)`).
    pub fn line(&self) -> String {
        match self.access {
            Some(a) => format!("{} ({})", self.name, a.as_str()),
            None => self.name.clone(),
        }
    }
}

impl TableGrants {
    /// The items of `grant`, as written (empty when not granted).
    pub fn items(&self, grant: Grant) -> &[GrantItem] {
        self.0.get(&grant).map_or(&[], Vec::as_slice)
    }

    /// The names `grant` gives, in order.
    pub fn names(&self, grant: Grant) -> Vec<String> {
        self.items(grant).iter().map(|i| i.name.clone()).collect()
    }

    /// Whether `grant` names `name`.
    pub fn holds(&self, grant: Grant, name: &str) -> bool {
        self.item(grant, name).is_some()
    }

    /// The item of `grant` named `name`.
    pub fn item(&self, grant: Grant, name: &str) -> Option<&GrantItem> {
        self.items(grant).iter().find(|i| i.name == name)
    }

    /// Sets the items of `grant` (none: not granted).
    pub fn set(&mut self, grant: Grant, items: Vec<GrantItem>) {
        if items.is_empty() {
            self.0.remove(&grant);
        } else {
            self.0.insert(grant, items);
        }
    }

    /// Sets `grant` to the names `names`, without access.
    pub fn set_names(&mut self, grant: Grant, names: Vec<String>) {
        let items = names
            .into_iter()
            .map(|name| GrantItem { name, access: None })
            .collect();
        self.set(grant, items);
    }

    /// Every granted grant with its items.
    pub fn iter(&self) -> impl Iterator<Item = (Grant, &[GrantItem])> {
        self.0.iter().map(|(g, items)| (*g, items.as_slice()))
    }
}

impl Serialize for TableGrants {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (grant, items) in &self.0 {
            match grant.shape() {
                Some(GrantShape::Items { name }) => {
                    let items: Vec<Item<'_>> = items.iter().map(|i| Item(name, i)).collect();
                    map.serialize_entry(grant.field(), &items)?;
                }
                _ => {
                    let names: Vec<&str> = items.iter().map(|i| i.name.as_str()).collect();
                    map.serialize_entry(grant.field(), &names)?;
                }
            }
        }
        map.end()
    }
}

/// An item of a [`GrantShape::Items`] grant as written: its name under
/// the shape's key, and `access`, keys in order (canonical JSON).
struct Item<'a>(&'static str, &'a GrantItem);

impl Serialize for Item<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Item(key, item) = self;
        let mut map = s.serialize_map(Some(2))?;
        let access = item.access.map(Access::as_str);
        if *key < "access" {
            map.serialize_entry(key, &item.name)?;
            map.serialize_entry("access", &access)?;
        } else {
            map.serialize_entry("access", &access)?;
            map.serialize_entry(key, &item.name)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for TableGrants {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TableVisitor)
    }
}

struct TableVisitor;

impl<'de> Visitor<'de> for TableVisitor {
    type Value = TableGrants;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("grants")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TableGrants, A::Error> {
        let mut grants = TableGrants::default();
        while let Some(key) = map.next_key::<String>()? {
            let Some(grant) = Grant::by_field(&key) else {
                return Err(de::Error::unknown_field(&key, &Grant::FIELDS));
            };
            let Some(shape) = grant.shape() else {
                return Err(de::Error::unknown_field(&key, &Grant::FIELDS));
            };
            if grants.0.contains_key(&grant) {
                return Err(de::Error::duplicate_field(grant.field()));
            }
            let value: serde_json::Value = map.next_value()?;
            let items = parse(grant, shape, value).map_err(de::Error::custom)?;
            grants.set(grant, items);
        }
        Ok(grants)
    }
}

/// The items of `grants.<field>` as written.
fn parse(
    grant: Grant,
    shape: GrantShape,
    value: serde_json::Value,
) -> Result<Vec<GrantItem>, String> {
    use serde_json::Value;
    let field = grant.field();
    let Value::Array(list) = value else {
        return Err(format!("grants.{field} is not a list"));
    };
    list.into_iter()
        .enumerate()
        .map(|(i, v)| match (shape, v) {
            (GrantShape::Names, Value::String(name)) => Ok(GrantItem { name, access: None }),
            (GrantShape::Items { name: key }, Value::Object(mut o)) => {
                let name = match o.remove(key) {
                    Some(Value::String(s)) => s,
                    _ => return Err(format!("grants.{field}[{i}] has no string `{key}`")),
                };
                let access = match o.remove("access") {
                    Some(Value::String(s)) if s == "read-only" => Access::ReadOnly,
                    Some(Value::String(s)) if s == "read-write" => Access::ReadWrite,
                    _ => {
                        return Err(format!(
                            "grants.{field}[{i}].access is not `read-only` or `read-write`"
                        ));
                    }
                };
                if let Some(other) = o.keys().next() {
                    return Err(format!("unknown field `{other}` in grants.{field}[{i}]"));
                }
                Ok(GrantItem {
                    name,
                    access: Some(access),
                })
            }
            (GrantShape::Names, _) => Err(format!("grants.{field}[{i}] is not a string")),
            (GrantShape::Items { .. }, _) => Err(format!("grants.{field}[{i}] is not an object")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table grant reads and writes back as written; an unknown field is
    /// refused as the derived `GrantsDoc` refused it.
    #[test]
    fn round_trip_and_unknown_fields() {
        let doc: super::super::GrantsDoc =
            serde_json::from_str(r#"{"env":["A"],"config":["k","s"]}"#).expect("grants");
        assert_eq!(doc.table.names(Grant::Config), ["k", "s"]);
        assert_eq!(
            serde_json::to_string(&doc).expect("json"),
            r#"{"env":["A"],"config":["k","s"]}"#
        );
        let err =
            serde_json::from_str::<super::super::GrantsDoc>(r#"{"nope":[]}"#).expect_err("unknown");
        assert!(
            err.to_string()
                .starts_with("unknown field `nope`, expected one of `filesystem`"),
            "{err}"
        );
        assert!(serde_json::from_str::<super::super::GrantsDoc>(r#"{"config":[1]}"#).is_err());
    }
}
