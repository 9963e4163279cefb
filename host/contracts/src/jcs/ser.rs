//! A serde serializer that writes RFC 8785 (JCS) canonical JSON straight
//! into one buffer.
//!
//! The bytes are those of `serde_json_canonicalizer` (the reference this
//! module is tested against, and which still formats the numbers a double
//! cannot hold as an integer): object members sorted by the UTF-16 code
//! units of their names, strings escaped as ECMAScript's `JSON.stringify`
//! does, numbers as ECMAScript writes a double. What differs is the cost:
//! an object's members are written once into the output, then put in
//! order, instead of each member going through its own buffer and its name
//! being parsed again to sort it.

use serde::ser::{self, Serialize};
use std::fmt;

/// Why a value has no canonical form.
#[derive(Debug)]
pub(super) struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self(msg.to_string())
    }
}

type Result<T> = std::result::Result<T, Error>;

/// Integers up to 2^53 are written as they are: a double holds them
/// exactly and ECMAScript writes them without an exponent.
const EXACT: u64 = 1 << 53;

/// Writes `value` canonically at the end of `out`.
pub(super) fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<()> {
    value.serialize(Canon { out, replace: None })
}

/// Writes `value` (an object) canonically at the end of `out`, the value
/// of its member `name` replaced by `with`, which is written as it is.
/// The caller vouches that `with` is canonical JSON.
pub(super) fn write_replacing<T: Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
    name: &str,
    with: &[u8],
) -> Result<()> {
    let done = std::cell::Cell::new(false);
    let replace = Replace {
        name,
        with,
        done: &done,
    };
    value.serialize(Canon {
        out,
        replace: Some(replace),
    })?;
    if done.get() {
        Ok(())
    } else {
        Err(Error(format!("no member {name:?} to replace")))
    }
}

struct Canon<'a> {
    out: &'a mut Vec<u8>,
    /// A member of this value (an object) written as given.
    replace: Option<Replace<'a>>,
}

/// A member whose value is written as given ([`write_replacing`]).
#[derive(Clone, Copy)]
struct Replace<'a> {
    name: &'a str,
    with: &'a [u8],
    /// Set once the member was written.
    done: &'a std::cell::Cell<bool>,
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    static HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x00..=0x1f => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ],
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(escape);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// A number as ECMAScript writes the double it becomes.
fn write_double(out: &mut Vec<u8>, value: f64) -> Result<()> {
    let text = serde_json_canonicalizer::to_vec(&value).map_err(|e| Error(e.to_string()))?;
    out.extend_from_slice(&text);
    Ok(())
}

fn write_unsigned(out: &mut Vec<u8>, value: u64) -> Result<()> {
    if value <= EXACT {
        out.extend_from_slice(itoa_u64(value, &mut [0; 20]));
        Ok(())
    } else {
        #[expect(clippy::cast_precision_loss, reason = "JSON numbers are doubles")]
        write_double(out, value as f64)
    }
}

fn write_signed(out: &mut Vec<u8>, value: i64) -> Result<()> {
    if value < 0 {
        if value.unsigned_abs() <= EXACT {
            out.push(b'-');
            out.extend_from_slice(itoa_u64(value.unsigned_abs(), &mut [0; 20]));
            Ok(())
        } else {
            #[expect(clippy::cast_precision_loss, reason = "JSON numbers are doubles")]
            write_double(out, value as f64)
        }
    } else {
        write_unsigned(out, value.unsigned_abs())
    }
}

fn write_i128(out: &mut Vec<u8>, value: i128) -> Result<()> {
    match i64::try_from(value) {
        Ok(v) => write_signed(out, v),
        #[expect(clippy::cast_precision_loss, reason = "JSON numbers are doubles")]
        Err(_) => write_double(out, value as f64),
    }
}

fn write_u128(out: &mut Vec<u8>, value: u128) -> Result<()> {
    match u64::try_from(value) {
        Ok(v) => write_unsigned(out, v),
        #[expect(clippy::cast_precision_loss, reason = "JSON numbers are doubles")]
        Err(_) => write_double(out, value as f64),
    }
}

fn itoa_u64(mut value: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        // The remainder is below 10.
        buf[i] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            return &buf[i..];
        }
    }
}

/// UTF-16 code unit order (RFC 8785 §3.2.3), which is byte order unless
/// both names hold characters beyond U+007F.
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    if a.is_ascii() || b.is_ascii() {
        // An ASCII byte sorts the same way in UTF-8 and UTF-16; where one
        // name is ASCII, the first difference involves an ASCII character.
        a.as_bytes().cmp(b.as_bytes())
    } else {
        a.encode_utf16().cmp(b.encode_utf16())
    }
}

impl<'a> ser::Serializer for Canon<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    fn serialize_bool(self, v: bool) -> Result<()> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<()> {
        write_signed(self.out, v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<()> {
        write_signed(self.out, v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<()> {
        write_signed(self.out, v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<()> {
        write_signed(self.out, v)
    }
    fn serialize_i128(self, v: i128) -> Result<()> {
        write_i128(self.out, v)
    }
    fn serialize_u8(self, v: u8) -> Result<()> {
        write_unsigned(self.out, v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<()> {
        write_unsigned(self.out, v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<()> {
        write_unsigned(self.out, v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<()> {
        write_unsigned(self.out, v)
    }
    fn serialize_u128(self, v: u128) -> Result<()> {
        write_u128(self.out, v)
    }
    fn serialize_f32(self, v: f32) -> Result<()> {
        write_double(self.out, v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<()> {
        write_double(self.out, v)
    }
    fn serialize_char(self, v: char) -> Result<()> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<()> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<()> {
        self.out.push(b'[');
        for (i, b) in v.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.out
                .extend_from_slice(itoa_u64(u64::from(*b), &mut [0; 20]));
        }
        self.out.push(b']');
        Ok(())
    }
    fn serialize_none(self) -> Result<()> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<()> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<()> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<()> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<()> {
        // One member: nothing to sort.
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        value.serialize(Canon {
            out: self.out,
            replace: None,
        })?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>> {
        self.out.push(b'[');
        Ok(Seq {
            out: self.out,
            first: true,
            variant: false,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Seq<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.extend_from_slice(b":[");
        Ok(Seq {
            out: self.out,
            first: true,
            variant: true,
        })
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Object<'a>> {
        Ok(Object::new(self.out, len.unwrap_or(0), false).replacing(self.replace))
    }
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Object<'a>> {
        if name == "$serde_json::private::RawValue" {
            return Err(Error(
                "raw JSON has no canonical form without parsing it".into(),
            ));
        }
        Ok(Object::new(self.out, len, false).replacing(self.replace))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Object<'a>> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        Ok(Object::new(self.out, len, true))
    }
}

/// An array being written.
pub(super) struct Seq<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    /// Inside `{"variant":[…]}`.
    variant: bool,
}

impl Seq<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        value.serialize(Canon {
            out: self.out,
            replace: None,
        })
    }
    fn close(self) {
        self.out.push(b']');
        if self.variant {
            self.out.push(b'}');
        }
    }
}

/// serde's four kinds of array (a sequence, a tuple, a tuple struct, a
/// tuple variant) are written alike.
macro_rules! array {
    ($trait:ident, $method:ident) => {
        impl ser::$trait for Seq<'_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
                self.element(value)
            }
            fn end(self) -> Result<()> {
                self.close();
                Ok(())
            }
        }
    };
}

array!(SerializeSeq, serialize_element);
array!(SerializeTuple, serialize_element);
array!(SerializeTupleStruct, serialize_field);
array!(SerializeTupleVariant, serialize_field);

/// An object being written: each member goes to the end of the output as
/// it comes (`"name":value`); at the end, members that did not come in
/// order (a map's, a struct's whose fields are not declared in order) are
/// put in order.
pub(super) struct Object<'a> {
    out: &'a mut Vec<u8>,
    /// Where the object's members start in `out` (after its `{`).
    start: usize,
    /// Each member's name and its range in `out` (name and value).
    members: Vec<(Name, std::ops::Range<usize>)>,
    /// The name of the member whose value comes next (a map's).
    key: Option<Name>,
    /// Inside `{"variant":{…}}`.
    variant: bool,
    /// A member written as given.
    replace: Option<Replace<'a>>,
}

/// A member's name: a struct's field names are static.
enum Name {
    Static(&'static str),
    Owned(String),
}

impl Name {
    fn as_str(&self) -> &str {
        match self {
            Name::Static(s) => s,
            Name::Owned(s) => s,
        }
    }
}

impl<'a> Object<'a> {
    fn new(out: &'a mut Vec<u8>, len: usize, variant: bool) -> Self {
        out.push(b'{');
        let start = out.len();
        Self {
            out,
            start,
            members: Vec::with_capacity(len),
            key: None,
            variant,
            replace: None,
        }
    }

    fn replacing(self, replace: Option<Replace<'a>>) -> Self {
        Self { replace, ..self }
    }

    fn member<T: Serialize + ?Sized>(&mut self, name: Name, value: &T) -> Result<()> {
        if !self.members.is_empty() {
            self.out.push(b',');
        }
        let from = self.out.len();
        write_str(self.out, name.as_str());
        self.out.push(b':');
        match self.replace {
            Some(r) if r.name == name.as_str() => {
                self.out.extend_from_slice(r.with);
                r.done.set(true);
            }
            _ => value.serialize(Canon {
                out: self.out,
                replace: None,
            })?,
        }
        self.members.push((name, from..self.out.len()));
        Ok(())
    }

    fn close(mut self) -> Result<()> {
        let in_order = self
            .members
            .windows(2)
            .all(|w| utf16_order(w[0].0.as_str(), w[1].0.as_str()).is_lt());
        if !in_order {
            self.members
                .sort_unstable_by(|a, b| utf16_order(a.0.as_str(), b.0.as_str()));
            if let Some(w) = self
                .members
                .windows(2)
                .find(|w| w[0].0.as_str() == w[1].0.as_str())
            {
                return Err(Error(format!("duplicate object key {:?}", w[0].0.as_str())));
            }
            let written = self.out.split_off(self.start);
            for (i, (_, range)) in self.members.iter().enumerate() {
                if i > 0 {
                    self.out.push(b',');
                }
                self.out
                    .extend_from_slice(&written[range.start - self.start..range.end - self.start]);
            }
        }
        self.out.push(b'}');
        if self.variant {
            self.out.push(b'}');
        }
        Ok(())
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        self.key = Some(Name::Owned(key.serialize(KeyName)?));
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let name = self
            .key
            .take()
            .ok_or_else(|| Error("a map value came without its key".into()))?;
        self.member(name, value)
    }
    fn end(self) -> Result<()> {
        self.close()
    }
}

impl ser::SerializeStruct for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.member(Name::Static(key), value)
    }
    fn end(self) -> Result<()> {
        self.close()
    }
}

impl ser::SerializeStructVariant for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.member(Name::Static(key), value)
    }
    fn end(self) -> Result<()> {
        self.close()
    }
}

/// A map key as the member name serde_json would give it: a string, or a
/// number or boolean written as one.
struct KeyName;

fn number_name(write: impl FnOnce(&mut Vec<u8>) -> Result<()>) -> Result<String> {
    let mut text = Vec::new();
    write(&mut text)?;
    String::from_utf8(text).map_err(|e| Error(e.to_string()))
}

fn key_must_be_a_string() -> Error {
    Error("an object key must be a string".into())
}

impl ser::Serializer for KeyName {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = ser::Impossible<String, Error>;
    type SerializeTuple = ser::Impossible<String, Error>;
    type SerializeTupleStruct = ser::Impossible<String, Error>;
    type SerializeTupleVariant = ser::Impossible<String, Error>;
    type SerializeMap = ser::Impossible<String, Error>;
    type SerializeStruct = ser::Impossible<String, Error>;
    type SerializeStructVariant = ser::Impossible<String, Error>;

    fn serialize_bool(self, v: bool) -> Result<String> {
        Ok(v.to_string())
    }
    fn serialize_i8(self, v: i8) -> Result<String> {
        number_name(|o| write_signed(o, v.into()))
    }
    fn serialize_i16(self, v: i16) -> Result<String> {
        number_name(|o| write_signed(o, v.into()))
    }
    fn serialize_i32(self, v: i32) -> Result<String> {
        number_name(|o| write_signed(o, v.into()))
    }
    fn serialize_i64(self, v: i64) -> Result<String> {
        number_name(|o| write_signed(o, v))
    }
    fn serialize_i128(self, v: i128) -> Result<String> {
        number_name(|o| write_i128(o, v))
    }
    fn serialize_u8(self, v: u8) -> Result<String> {
        number_name(|o| write_unsigned(o, v.into()))
    }
    fn serialize_u16(self, v: u16) -> Result<String> {
        number_name(|o| write_unsigned(o, v.into()))
    }
    fn serialize_u32(self, v: u32) -> Result<String> {
        number_name(|o| write_unsigned(o, v.into()))
    }
    fn serialize_u64(self, v: u64) -> Result<String> {
        number_name(|o| write_unsigned(o, v))
    }
    fn serialize_u128(self, v: u128) -> Result<String> {
        number_name(|o| write_u128(o, v))
    }
    fn serialize_f32(self, v: f32) -> Result<String> {
        number_name(|o| write_double(o, v.into()))
    }
    fn serialize_f64(self, v: f64) -> Result<String> {
        number_name(|o| write_double(o, v))
    }
    fn serialize_char(self, v: char) -> Result<String> {
        Ok(v.to_string())
    }
    fn serialize_str(self, v: &str) -> Result<String> {
        Ok(v.to_owned())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<String> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<String> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<String> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit(self) -> Result<String> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<String> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<String> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<String> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<String> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(key_must_be_a_string())
    }
}
