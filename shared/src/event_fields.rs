//! The fields of an incident record that [`crate::event`] reads, decoded straight from the
//! event's JSON text.
//!
//! Every ticket of a storm passes through here, with 8–20 KB of alarm log in one field.
//! Building a `serde_json::Value` tree first and picking fields from it allocated every
//! field and object, copied the log out of the tree and freed the tree again. Decoding into
//! fixed slots instead skips unknown fields unread, borrows strings that hold no escapes
//! from the text, and hands the log over as the one `String` the decoder produced.
//!
//! The slots keep what `Value` would have said: the last occurrence of a repeated key wins,
//! numbers print as `Value` prints them, and every JSON type is kept apart so rejections
//! name the type found. [`RecordFields::from_map`] builds the same slots from an object
//! already decoded.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The record's fields the parser reads, in slot order.
const FIELD_NAMES: [&str; 30] = [
    "sys_id",
    "number",
    "sys_mod_count",
    "state",
    "impact",
    "urgency",
    "priority",
    "sys_updated_on",
    "opened_at",
    "category",
    "subcategory",
    "u_symptom",
    "contact_type",
    "cmdb_ci",
    "location",
    "u_region",
    "region",
    "assignment_group",
    "assigned_to",
    "caller_id",
    "short_description",
    "description",
    "u_customers_affected",
    "customers_affected",
    "parent_incident",
    "parent",
    "log_entries",
    "u_alarm_log",
    "work_notes",
    "comments",
];

fn slot_of(name: &str) -> Option<usize> {
    FIELD_NAMES.iter().position(|n| *n == name)
}

/// A JSON value as the parser needs it; strings borrow from the event's text when they can.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FieldValue<'a> {
    Null,
    Bool(bool),
    Number(Number),
    Text(Cow<'a, str>),
    /// A reference or display-value object (`{"link","value"}`, `{"display_value","value"}`).
    Object(Reference<'a>),
    /// A list (of log entries, when the field is a log field).
    Array(Vec<Item<'a>>),
}

impl FieldValue<'_> {
    /// The JSON type's name, as rejections report it.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            FieldValue::Null => "null",
            FieldValue::Bool(_) => "boolean",
            FieldValue::Number(_) => "number",
            FieldValue::Text(_) => "string",
            FieldValue::Object(_) => "object",
            FieldValue::Array(_) => "array",
        }
    }
}

/// The members of a reference object the parser reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Reference<'a> {
    pub value: Option<Member<'a>>,
    pub display_value: Option<Member<'a>>,
    pub has_link: bool,
}

/// One member of a reference object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Member<'a> {
    Text(Cow<'a, str>),
    Number(Number),
    /// null, a boolean, an object or an array: present, but never a value.
    Other,
}

impl Member<'_> {
    /// The member's text: a non-blank string, or a number as JSON prints it.
    pub(crate) fn text(&self) -> Option<String> {
        match self {
            Member::Text(s) if !s.trim().is_empty() => Some(s.clone().into_owned()),
            Member::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
}

/// One element of a list field.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item<'a> {
    Text(Cow<'a, str>),
    Entry(Entry<'a>),
    /// Anything else; the JSON type's name.
    Other(&'static str),
}

/// A journal or alarm entry object: each member is its last occurrence, kept only when it
/// is a string.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Entry<'a> {
    pub text: Option<Cow<'a, str>>,
    pub value: Option<Cow<'a, str>>,
    pub message: Option<Cow<'a, str>>,
    pub at: Option<Cow<'a, str>>,
    pub sys_created_on: Option<Cow<'a, str>>,
    pub timestamp: Option<Cow<'a, str>>,
    pub author: Option<Cow<'a, str>>,
    pub sys_created_by: Option<Cow<'a, str>>,
    pub element: Option<Cow<'a, str>>,
}

impl<'a> Entry<'a> {
    fn member(&mut self, name: &str) -> Option<&mut Option<Cow<'a, str>>> {
        Some(match name {
            "text" => &mut self.text,
            "value" => &mut self.value,
            "message" => &mut self.message,
            "at" => &mut self.at,
            "sys_created_on" => &mut self.sys_created_on,
            "timestamp" => &mut self.timestamp,
            "author" => &mut self.author,
            "sys_created_by" => &mut self.sys_created_by,
            "element" => &mut self.element,
            _ => return None,
        })
    }
}

/// The slots of one record.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RecordFields<'a> {
    slots: [Option<FieldValue<'a>>; FIELD_NAMES.len()],
}

/// What an event's JSON text holds at its top level.
pub(crate) enum Decoded<'a> {
    Record(Box<RecordFields<'a>>),
    /// Not an object: the JSON type's name.
    NotAnObject(&'static str),
}

impl<'a> RecordFields<'a> {
    /// Decodes an event's JSON text; an error only when the text is not JSON.
    pub(crate) fn from_json(text: &'a str) -> Result<Decoded<'a>, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let decoded = deserializer.deserialize_any(TopLevelVisitor)?;
        deserializer.end()?;
        Ok(decoded)
    }

    /// The same slots from an object already decoded.
    pub(crate) fn from_map(record: &'a Map<String, Value>) -> Self {
        let mut fields = RecordFields::default();
        for (name, value) in record {
            if let Some(slot) = slot_of(name) {
                fields.slots[slot] = Some(FieldValue::from_value(value));
            }
        }
        fields
    }

    /// Field `name` (one of the names the parser reads), if the record has it.
    pub(crate) fn get(&self, name: &str) -> Option<&FieldValue<'a>> {
        self.slots[slot_of(name)?].as_ref()
    }

    /// Takes field `name` out, so a large string moves instead of being copied.
    pub(crate) fn take(&mut self, name: &str) -> Option<FieldValue<'a>> {
        self.slots[slot_of(name)?].take()
    }
}

impl<'a> FieldValue<'a> {
    fn from_value(value: &'a Value) -> Self {
        match value {
            Value::Null => FieldValue::Null,
            Value::Bool(b) => FieldValue::Bool(*b),
            Value::Number(n) => FieldValue::Number(n.clone()),
            Value::String(s) => FieldValue::Text(Cow::Borrowed(s)),
            Value::Object(o) => {
                let member = |k: &str| {
                    o.get(k).map(|v| match v {
                        Value::String(s) => Member::Text(Cow::Borrowed(s)),
                        Value::Number(n) => Member::Number(n.clone()),
                        _ => Member::Other,
                    })
                };
                FieldValue::Object(Reference {
                    value: member("value"),
                    display_value: member("display_value"),
                    has_link: o.contains_key("link"),
                })
            }
            Value::Array(items) => FieldValue::Array(items.iter().map(Item::from_value).collect()),
        }
    }
}

impl<'a> Item<'a> {
    fn from_value(value: &'a Value) -> Self {
        match value {
            Value::String(s) => Item::Text(Cow::Borrowed(s)),
            Value::Object(o) => {
                let mut entry = Entry::default();
                for (name, v) in o {
                    if let Some(member) = entry.member(name) {
                        *member = v.as_str().map(Cow::Borrowed);
                    }
                }
                Item::Entry(entry)
            }
            other => Item::Other(json_type(other)),
        }
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

// --- Decoding from text -------------------------------------------------------------------

/// A map key, borrowed when it holds no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// The `Visitor` methods for values kept only as their JSON type's name (`"null"`,
/// `"boolean"`, `"number"`, `"array"`), wrapped in `$wrap`.
macro_rules! values_named_by_type {
    ($wrap:path) => {
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($wrap("null"))
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($wrap("boolean"))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($wrap("number"))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($wrap("number"))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($wrap("number"))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($wrap("array"))
        }
    };
}

struct TopLevelVisitor;

impl<'de> Visitor<'de> for TopLevelVisitor {
    type Value = Decoded<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    values_named_by_type!(Decoded::NotAnObject);
    fn visit_str<E>(self, _: &str) -> Result<Decoded<'de>, E> {
        Ok(Decoded::NotAnObject("string"))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Decoded<'de>, A::Error> {
        let mut fields = Box::<RecordFields<'de>>::default();
        while let Some(Key(name)) = map.next_key::<Key<'de>>()? {
            match slot_of(&name) {
                Some(slot) => fields.slots[slot] = Some(map.next_value::<FieldValue<'de>>()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Decoded::Record(fields))
    }
}

impl<'de> de::Deserialize<'de> for FieldValue<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FieldValueVisitor)
    }
}

struct FieldValueVisitor;

impl<'de> Visitor<'de> for FieldValueVisitor {
    type Value = FieldValue<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<FieldValue<'de>, E> {
        Ok(FieldValue::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<FieldValue<'de>, E> {
        Ok(FieldValue::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<FieldValue<'de>, E> {
        Ok(FieldValue::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<FieldValue<'de>, E> {
        Ok(FieldValue::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<FieldValue<'de>, E> {
        // JSON numbers are finite, so this always succeeds.
        Number::from_f64(v)
            .map(FieldValue::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<FieldValue<'de>, E> {
        Ok(FieldValue::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<FieldValue<'de>, E> {
        Ok(FieldValue::Text(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<FieldValue<'de>, E> {
        Ok(FieldValue::Text(Cow::Owned(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<FieldValue<'de>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Item<'de>>()? {
            items.push(item);
        }
        Ok(FieldValue::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FieldValue<'de>, A::Error> {
        let mut reference = Reference::default();
        while let Some(Key(name)) = map.next_key::<Key<'de>>()? {
            match &*name {
                "value" => reference.value = Some(map.next_value::<MemberValue>()?.0),
                "display_value" => {
                    reference.display_value = Some(map.next_value::<MemberValue>()?.0)
                }
                "link" => {
                    map.next_value::<IgnoredAny>()?;
                    reference.has_link = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(FieldValue::Object(reference))
    }
}

/// A reference object's member, decoded.
struct MemberValue<'a>(Member<'a>);

impl<'de> de::Deserialize<'de> for MemberValue<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(MemberValue(
            match deserializer.deserialize_any(FieldValueVisitor)? {
                FieldValue::Text(s) => Member::Text(s),
                FieldValue::Number(n) => Member::Number(n),
                _ => Member::Other,
            },
        ))
    }
}

impl<'de> de::Deserialize<'de> for Item<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ItemVisitor)
    }
}

struct ItemVisitor;

impl<'de> Visitor<'de> for ItemVisitor {
    type Value = Item<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a log entry")
    }

    values_named_by_type!(Item::Other);
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Item<'de>, E> {
        Ok(Item::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Item<'de>, E> {
        Ok(Item::Text(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Item<'de>, E> {
        Ok(Item::Text(Cow::Owned(v)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Item<'de>, A::Error> {
        let mut entry = Entry::default();
        while let Some(Key(name)) = map.next_key::<Key<'de>>()? {
            match entry.member(&name) {
                Some(member) => *member = map.next_value::<OptionalText<'de>>()?.0,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Item::Entry(entry))
    }
}

/// A value kept only when it is a string.
struct OptionalText<'a>(Option<Cow<'a, str>>);

impl<'de> de::Deserialize<'de> for OptionalText<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(OptionalText(
            match deserializer.deserialize_any(ItemVisitor)? {
                Item::Text(s) => Some(s),
                _ => None,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_without_escapes_are_borrowed_and_others_decoded() {
        let text = r#"{"number": "INC1", "u_alarm_log": "a\nb", "x_unknown": {"deep": [1]}}"#;
        let Ok(Decoded::Record(fields)) = RecordFields::from_json(text) else {
            panic!("a record");
        };
        assert!(matches!(
            fields.get("number"),
            Some(FieldValue::Text(Cow::Borrowed("INC1")))
        ));
        assert!(matches!(
            fields.get("u_alarm_log"),
            Some(FieldValue::Text(Cow::Owned(s))) if s == "a\nb"
        ));
        assert_eq!(fields.get("sys_id"), None);
    }

    #[test]
    fn the_last_of_a_repeated_key_wins_as_in_a_json_object() {
        let text = r#"{"number": "INC1", "number": 7}"#;
        let Ok(Decoded::Record(fields)) = RecordFields::from_json(text) else {
            panic!("a record");
        };
        let map: Map<String, Value> = serde_json::from_str(text).unwrap();
        assert_eq!(*fields, RecordFields::from_map(&map));
        assert_eq!(fields.get("number"), Some(&FieldValue::Number(7.into())));
    }

    #[test]
    fn a_top_level_value_that_is_not_an_object_is_named() {
        for (text, name) in [("[1, {}]", "array"), ("null", "null"), ("\"x\"", "string")] {
            assert!(matches!(
                RecordFields::from_json(text),
                Ok(Decoded::NotAnObject(n)) if n == name
            ));
        }
        assert!(RecordFields::from_json("{} x").is_err());
    }
}
