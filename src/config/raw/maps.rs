//! `[maps.NAME]` (nginx `map`) as written: its `values` keep the order they are written
//! in, which is the order nginx tries regex keys in (toml's tables iterate by name; the
//! keys' spans give the file order back).

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_spanned::Spanned;

/// One `[maps.NAME]`.
#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = r#"a map table, e.g. { source = "$request_method", values = { GET = "301" } }"#
)]
pub(crate) struct RawMap {
    /// Required.
    pub source: Option<Spanned<String>>,
    pub values: Option<Spanned<MapValues>>,
    pub default: Option<Spanned<String>>,
}

/// A map's `values`: key to value, in the order written.
#[derive(Default)]
pub(crate) struct MapValues(pub Vec<(Spanned<String>, Spanned<String>)>);

impl<'de> Deserialize<'de> for MapValues {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ValuesVisitor;

        impl<'de> Visitor<'de> for ValuesVisitor {
            type Value = MapValues;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a table of keys to values, e.g. { GET = "301", "~^P" = "308" }"#)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries: Vec<(Spanned<String>, Spanned<String>)> = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                entries.sort_by_key(|(key, _)| key.span().start);
                Ok(MapValues(entries))
            }
        }

        deserializer.deserialize_map(ValuesVisitor)
    }
}

impl Serialize for MapValues {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let entries = self.0.iter().map(|(key, value)| (key.get_ref(), value.get_ref()));
        serializer.collect_map(entries)
    }
}
