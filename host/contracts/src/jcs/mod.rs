//! RFC 8785 (JCS) canonical JSON and SHA-256 over it.

use serde::Serialize;
use sha2::{Digest as _, Sha256};

mod ser;

/// The canonical (RFC 8785) bytes of `value`.
///
/// # Errors
///
/// Values JSON cannot represent canonically (non-finite numbers).
pub fn canonical_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(256);
    ser::write(&mut out, value).map_err(|e| format!("canonical JSON: {e}"))?;
    Ok(out)
}

/// JSON in its canonical (RFC 8785) form: made only by rendering a value
/// ([`Canonical::of`], [`Canonical::replacing`]), so its bytes are
/// canonical by construction and can be written into another canonical
/// document as they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Canonical(Box<[u8]>);

impl Canonical {
    /// The canonical form of `value`.
    ///
    /// # Errors
    ///
    /// As [`canonical_bytes`].
    pub fn of<T: Serialize + ?Sized>(value: &T) -> Result<Self, String> {
        canonical_bytes(value).map(|b| Self(b.into()))
    }

    /// The canonical form of `value`, an object whose member `name` has
    /// the value `with`: the bytes of [`Canonical::of`] on `value` with
    /// that member set to what `with` was made from, without rendering
    /// `with` again (for a large part that stays the same, such as an
    /// installed manifest).
    ///
    /// # Errors
    ///
    /// As [`canonical_bytes`]; or `value` has no member `name` (it is not
    /// an object, or a field was renamed).
    pub fn replacing<T: Serialize + ?Sized>(
        value: &T,
        name: &str,
        with: &Canonical,
    ) -> Result<Self, String> {
        let mut out = Vec::with_capacity(with.0.len() + 256);
        ser::write_replacing(&mut out, value, name, &with.0)
            .map_err(|e| format!("canonical JSON: {e}"))?;
        Ok(Self(out.into()))
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0.into_vec()
    }
}

/// SHA-256 of the canonical bytes of `value`.
///
/// # Errors
///
/// As [`canonical_bytes`].
pub fn sha256<T: Serialize + ?Sized>(value: &T) -> Result<[u8; 32], String> {
    Ok(Sha256::digest(canonical_bytes(value)?).into())
}

/// `sha256:<hex>` of the canonical bytes of `value`.
///
/// # Errors
///
/// As [`canonical_bytes`].
pub fn sha256_tagged<T: Serialize + ?Sized>(value: &T) -> Result<String, String> {
    Ok(format!("sha256:{}", hex::encode(sha256(value)?)))
}

/// `sha256:<hex>` of raw bytes.
pub fn sha256_bytes_tagged(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_and_normalizes_numbers() {
        let v = json!({"b": 1.0, "a": [true, null, "\u{20ac}"], "c": 1e21});
        let bytes = canonical_bytes(&v).expect("canonical");
        assert_eq!(
            String::from_utf8(bytes).expect("utf8"),
            r#"{"a":[true,null,"€"],"b":1,"c":1e+21}"#
        );
    }

    /// The reference implementation's bytes (or its refusal).
    fn reference<T: Serialize>(value: &T) -> Result<Vec<u8>, String> {
        serde_json_canonicalizer::to_vec(value).map_err(|e| e.to_string())
    }

    fn same_as_reference<T: Serialize + std::fmt::Debug>(value: &T) {
        let ours = canonical_bytes(value);
        match reference(value) {
            Ok(bytes) => assert_eq!(
                ours.as_deref().map(String::from_utf8_lossy),
                Ok(String::from_utf8_lossy(&bytes)),
                "{value:?}"
            ),
            Err(e) => assert!(
                ours.is_err(),
                "{value:?}: the reference refused ({e}), we wrote {ours:?}"
            ),
        }
    }

    #[test]
    fn rfc_8785_examples() {
        // RFC 8785 §3.2.3: sorting by UTF-16 code units.
        let v = json!({
            "\u{20ac}": "Euro Sign",
            "\r": "Carriage Return",
            "\u{fb33}": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\u{1f600}": "Emoji: Grinning Face",
            "\u{80}": "Control",
            "\u{f6}": "Latin Small Letter O With Diaeresis"
        });
        let text = String::from_utf8(canonical_bytes(&v).expect("canonical")).expect("utf8");
        assert_eq!(
            text,
            "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
             \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
             \"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}"
        );
        // §3.2.2.3: numbers as ECMAScript writes them.
        let n: serde_json::Value = serde_json::from_str(
            "[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001, \
             9007199254740992, 9007199254740993, -9007199254740993, -0.0, 1.0e21]",
        )
        .expect("json");
        assert_eq!(
            String::from_utf8(canonical_bytes(&n).expect("canonical")).expect("utf8"),
            "[333333333.3333333,1e+30,4.5,0.002,1e-27,9007199254740992,9007199254740992,-9007199254740992,0,1e+21]"
        );
        same_as_reference(&n);
        same_as_reference(&v);
    }

    #[test]
    fn structs_enums_and_maps_as_the_reference_writes_them() {
        use std::collections::{BTreeMap, HashMap};
        #[derive(Serialize, Debug)]
        struct Unordered {
            zeta: u8,
            alpha: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            skipped: Option<u8>,
            mid: Vec<Kind>,
            bytes: serde_bytes_like::Bytes,
            unit: (),
            tuple: (i8, char, f32),
        }
        #[derive(Serialize, Debug)]
        enum Kind {
            Plain,
            New(i64),
            Tuple(u8, String),
            Struct { b: bool, a: u128 },
        }
        mod serde_bytes_like {
            #[derive(Debug)]
            pub(super) struct Bytes(pub(super) Vec<u8>);
            impl serde::Serialize for Bytes {
                fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    s.serialize_bytes(&self.0)
                }
            }
        }
        same_as_reference(&Unordered {
            zeta: 255,
            alpha: None,
            skipped: None,
            mid: vec![
                Kind::Plain,
                Kind::New(i64::MIN),
                Kind::Tuple(7, "t\u{0}\u{1f}\"\\/\u{7f}\u{2028}".into()),
                Kind::Struct {
                    b: true,
                    a: u128::MAX,
                },
            ],
            bytes: serde_bytes_like::Bytes(vec![0, 1, 255]),
            unit: (),
            tuple: (-128, '\u{10ffff}', 0.1),
        });
        let mut numbered: BTreeMap<i64, &str> = BTreeMap::new();
        numbered.insert(10, "ten");
        numbered.insert(9, "nine");
        numbered.insert(-1, "minus one");
        same_as_reference(&numbered);
        let mut flags: HashMap<bool, u8> = HashMap::new();
        flags.insert(true, 1);
        flags.insert(false, 0);
        same_as_reference(&flags);
        same_as_reference(&BTreeMap::from([('b', 1), ('a', 2)]));
    }

    #[test]
    fn what_has_no_canonical_form_is_refused() {
        use std::collections::BTreeMap;
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(canonical_bytes(&bad).is_err());
            assert!(canonical_bytes(&vec![1.0, bad]).is_err());
            assert!(reference(&bad).is_err());
        }
        let nested = BTreeMap::from([(vec![1u8], 1)]);
        assert!(canonical_bytes(&nested).is_err());
        // A member twice (here through a flattened map).
        #[derive(Serialize)]
        struct Twice {
            a: u8,
            #[serde(flatten)]
            more: BTreeMap<String, u8>,
        }
        let twice = Twice {
            a: 1,
            more: BTreeMap::from([("a".to_owned(), 2)]),
        };
        let err = canonical_bytes(&twice).expect_err("duplicate");
        assert!(err.contains("duplicate object key \"a\""), "{err}");
        assert!(reference(&twice).is_err());
    }

    #[test]
    fn a_member_replaced_is_the_member_rendered() {
        #[derive(Serialize)]
        struct Outer<M> {
            zed: u8,
            inner: Option<M>,
            alpha: &'static str,
        }
        let inner = json!({"b": [1.0, "\u{1f600}"], "a": {"y": null, "x": 1e21}});
        let with = Canonical::of(&inner).expect("canonical");
        let whole = Outer {
            zed: 1,
            inner: Some(&inner),
            alpha: "a",
        };
        let replaced = Outer::<()> {
            zed: 1,
            inner: None,
            alpha: "a",
        };
        assert_eq!(
            Canonical::replacing(&replaced, "inner", &with).expect("replaced"),
            Canonical::of(&whole).expect("whole")
        );
        // Only the object's own member: a nested one of the same name is
        // rendered.
        let nested = json!({"inner": {"inner": null}, "z": 0});
        let text = Canonical::replacing(&nested, "inner", &with).expect("replaced");
        assert_eq!(
            String::from_utf8_lossy(text.as_bytes()),
            format!(
                "{{\"inner\":{},\"z\":0}}",
                String::from_utf8_lossy(with.as_bytes())
            )
        );
        // No such member, or no object at all: refused, never a document
        // without it.
        for missing in [json!({"other": 1}), json!([1, 2]), json!("inner")] {
            let err = Canonical::replacing(&missing, "inner", &with).expect_err("missing");
            assert!(err.contains("no member \"inner\""), "{err}");
        }
    }

    fn any_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let name = prop_oneof![
            "[a-z]{0,3}",
            any::<String>(),
            proptest::sample::select(vec![
                "\u{e000}".to_owned(),
                "\u{1f600}".to_owned(),
                "\u{ffff}".to_owned(),
                "a\u{10000}".to_owned(),
                "\u{7f}\"\\".to_owned(),
            ]),
        ];
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<u64>().prop_map(serde_json::Value::from),
            (-(1i64 << 54)..(1i64 << 54)).prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            any::<String>().prop_map(serde_json::Value::from),
            "[\\x00-\\x1f\"\\\\/a\u{2028}\u{7f}]{0,8}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 64, 8, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                proptest::collection::vec((name.clone(), inner), 0..8).prop_map(|members| {
                    serde_json::Value::Object(members.into_iter().collect())
                }),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        #[test]
        fn any_json_value_as_the_reference_writes_it(v in any_value()) {
            let ours = canonical_bytes(&v).expect("canonical");
            let theirs = reference(&v).expect("reference");
            proptest::prop_assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&theirs));
        }

        #[test]
        fn any_member_replaced_as_if_rendered(
            outer in proptest::collection::btree_map("[a-z]{0,3}", any_value(), 1..6),
            with in any_value(),
            pick in 0usize..6,
        ) {
            let name = outer.keys().nth(pick % outer.len()).expect("a member").clone();
            let mut whole = outer.clone();
            whole.insert(name.clone(), with.clone());
            let replaced = Canonical::replacing(
                &outer,
                &name,
                &Canonical::of(&with).expect("canonical"),
            )
            .expect("replaced");
            let rendered = canonical_bytes(&whole).expect("canonical");
            proptest::prop_assert_eq!(
                String::from_utf8_lossy(replaced.as_bytes()),
                String::from_utf8_lossy(&rendered)
            );
        }
    }
}
