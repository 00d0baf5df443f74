//! How the model deserializes where a derive alone cannot say it: the keys that take
//! either a plain value or a table (`listen` and `servers` items, an upstream group's
//! `tls`, a `response_headers` value), with an `expecting` message that names both forms.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{
    RawAuth, RawAuthTable, RawListenItem, RawListenTable, RawResponseHeader, RawResponseHeaderTable, RawServerItem, RawServerTable, RawUpstreamTls,
    RawUpstreamTlsTable,
};

impl<'de> Deserialize<'de> for RawServerItem {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ItemVisitor;

        impl<'de> Visitor<'de> for ItemVisitor {
            type Value = RawServerItem;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    r#"a "HOST:PORT" string or a table like { addr = "HOST:PORT", weight = 2 }"#,
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawServerItem::Addr(v.to_owned()))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let table =
                    RawServerTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RawServerItem::Table(table))
            }
        }

        deserializer.deserialize_any(ItemVisitor)
    }
}

impl<'de> Deserialize<'de> for RawUpstreamTls {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TlsVisitor;

        impl<'de> Visitor<'de> for TlsVisitor {
            type Value = RawUpstreamTls;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    r#"true, false, or a table like { server_name = "app.internal", ca = "ca.pem" }"#,
                )
            }

            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(RawUpstreamTls::On(v))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let table =
                    RawUpstreamTlsTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RawUpstreamTls::Table(table))
            }
        }

        deserializer.deserialize_any(TlsVisitor)
    }
}

impl<'de> Deserialize<'de> for RawResponseHeader {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct HeaderVisitor;

        impl<'de> Visitor<'de> for HeaderVisitor {
            type Value = RawResponseHeader;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    r#"a string or a table like { value = "DENY", when = "always" }"#,
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawResponseHeader::Value(v.to_owned()))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let table =
                    RawResponseHeaderTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RawResponseHeader::Table(table))
            }
        }

        deserializer.deserialize_any(HeaderVisitor)
    }
}

impl<'de> Deserialize<'de> for RawAuth {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AuthVisitor;

        impl<'de> Visitor<'de> for AuthVisitor {
            type Value = RawAuth;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    r#""off" or a table like { basic = { realm = "Admin", users = "admin.htpasswd" } }"#,
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawAuth::Off(v.to_owned()))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let table = RawAuthTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RawAuth::Table(Box::new(table)))
            }
        }

        deserializer.deserialize_any(AuthVisitor)
    }
}

impl<'de> Deserialize<'de> for RawListenItem {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ItemVisitor;

        impl<'de> Visitor<'de> for ItemVisitor {
            type Value = RawListenItem;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    r#"an "IP:PORT" string or a table like { addr = "IP:PORT", http2 = false }"#,
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawListenItem::Addr(v.to_owned()))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let table =
                    RawListenTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RawListenItem::Table(table))
            }
        }

        deserializer.deserialize_any(ItemVisitor)
    }
}
