//! The keys that rewrite what an upstream's answer says about URLs, as written:
//! `redirect_rewrite` (a word or a list of `{ from, to }` tables) and `cookie_path` /
//! `cookie_domain` (a table from → to whose order is kept: the first rule that matches
//! wins, as in nginx; the order of a table's keys is read from their places in the file).

use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_spanned::Spanned;

/// `redirect_rewrite`: `"off"`, `"default"`, or a list of rules.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum RawRedirectRewrite {
    /// Checked in `config/redirects.rs`.
    Word(String),
    Rules(Vec<Spanned<RawRewriteRule>>),
}

/// One item of `redirect_rewrite`'s list.
#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { from = \"http://app/v2/\", to = \"/api/\" }"
)]
pub(crate) struct RawRewriteRule {
    /// Required.
    pub from: Option<Spanned<String>>,
    /// Required.
    pub to: Option<Spanned<String>>,
}

/// `cookie_path` or `cookie_domain`: from → to, in file order.
#[derive(Default)]
pub(crate) struct RawCookieRewrites(pub Vec<(Spanned<String>, Spanned<String>)>);

impl<'de> Deserialize<'de> for RawRedirectRewrite {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RewriteVisitor;

        impl<'de> Visitor<'de> for RewriteVisitor {
            type Value = RawRedirectRewrite;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    r#""off", "default", or a list like [{ from = "http://app/v2/", to = "/api/" }]"#,
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawRedirectRewrite::Word(v.to_owned()))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut rules = Vec::new();
                while let Some(rule) = seq.next_element()? {
                    rules.push(rule);
                }
                Ok(RawRedirectRewrite::Rules(rules))
            }
        }

        deserializer.deserialize_any(RewriteVisitor)
    }
}

impl<'de> Deserialize<'de> for RawCookieRewrites {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TableVisitor;

        impl<'de> Visitor<'de> for TableVisitor {
            type Value = RawCookieRewrites;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a table like { "/app/" = "/" }"#)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut rules: Vec<(Spanned<String>, Spanned<String>)> = Vec::new();
                while let Some(rule) = map.next_entry()? {
                    rules.push(rule);
                }
                // A table reaches us with its keys sorted; their places in the file
                // give back the order written (a model built in code keeps its own).
                rules.sort_by_key(|(from, _)| from.span().start);
                Ok(RawCookieRewrites(rules))
            }
        }

        deserializer.deserialize_map(TableVisitor)
    }
}

impl Serialize for RawCookieRewrites {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (from, to) in &self.0 {
            map.serialize_entry(from, to)?;
        }
        map.end()
    }
}
