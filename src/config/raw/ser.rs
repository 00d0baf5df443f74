//! How the model serializes where a derive alone cannot say it: a section as its table
//! (nothing when absent or unreadable), a named family (`[upstreams.NAME]`) as a table of
//! tables in file order, lists without the entries that could not be read, and the core's
//! words (`algorithm`, `on_error`) as the file spells them. A `Spanned` value is its
//! inner value (serde_spanned's own `Serialize`), so spans never reach the output.

use serde::{Serialize, Serializer};

use super::{Named, RawSiteEntry, Section, Span};

impl<T: Serialize> Serialize for Section<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Section::Present(_, table) => serializer.serialize_some(table),
            Section::Absent | Section::Invalid => serializer.serialize_none(),
        }
    }
}

/// `[upstreams.NAME]` or `[zones.NAME]`: name to table, in file order.
pub(super) fn named<T: Serialize, S: Serializer>(
    family: &[Named<T>],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let entries = family
        .iter()
        .filter_map(|entry| Some((entry.name.get_ref(), entry.body.as_ref()?)));
    serializer.collect_map(entries)
}

/// `[[location]]` or `[[site.location]]`: the ones that were read.
pub(super) fn present<T: Serialize, S: Serializer>(
    list: &[Option<T>],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(list.iter().flatten())
}

/// `[[site]]`: the ones that were read.
pub(super) fn sites<S: Serializer>(
    sites: &Option<(Span, Vec<Option<RawSiteEntry>>)>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match sites {
        Some((_, list)) => present(list, serializer),
        None => serializer.serialize_none(),
    }
}
