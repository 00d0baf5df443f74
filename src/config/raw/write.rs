//! The model written back as a gateway.toml that an operator reads ([`write()`]): what
//! `tollgate import` will produce, read by the same [`parse`](super::parse) as any file.
//!
//! `toml::to_string` of a [`RawConfig`] reads back the same too, but it writes every
//! nested table as a table of its own (`[[location.limit]]`, `[location.return]`). This
//! writer lays the file out as docs/config.md writes it: a header per section, per named
//! table and per location, and inside one `key = value` a line, nested values inline
//! (`limit = [{ zone = "per_ip", burst = 5 }]`). Each value is written by toml's own
//! [`ValueSerializer`] from the model's `Serialize`, so quoting and escaping are toml's,
//! and a key added to a raw struct is written with no change here.
//!
//! [`write_noted`] adds comments: [`Notes`] holds lines for the top of the file, above a
//! section's, named table's, site's or location's header, and for the end (what
//! `tollgate import` says of each block's source, `# nginx.conf:41`). They are kept
//! beside the model, not in it: the model stays what the file means.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::ser::{self, Impossible, Serialize, SerializeStruct};
use toml::ser::{Error, ValueSerializer};

use super::{Named, RawConfig, RawSiteEntry, RawTls, Section};

/// `raw` as TOML text that [`parse`](super::parse) reads back as the same model.
///
/// Sections come in the order of the shipped gateway.toml and docs/config.md: `[server]`
/// and the sections of the whole gateway, then the upstream groups and zones, then
/// `[api_keys]`, then the locations or sites that use them (the order of [`RawConfig`]'s
/// fields, which `toml::to_string` follows too). Upstream groups, zones, sites and
/// locations keep their order; keys follow their struct's field order; a key not set
/// (`None`) is left out, an absent section too. What could not be read (a
/// `Section::Invalid`, a `None` entry) is left out: the text of a model read from a file
/// with errors is not that file. Fails only where toml cannot write a value, which none
/// of the model's types asks for.
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "the tests write models without notes")
)]
pub(crate) fn write(raw: &RawConfig) -> Result<String, Error> {
    write_noted(raw, &Notes::default())
}

/// Comment lines (without their `#`) for [`write_noted`]. A line may hold anything:
/// line breaks start a new comment line, and control characters are written escaped,
/// so no note can end its comment.
#[derive(Default, Debug, Clone)]
pub(crate) struct Notes {
    /// At the top of the file.
    pub head: Vec<String>,
    /// Above a section's header, by its name (`"server"`, `"real_ip"`, `"tls"`…).
    pub sections: BTreeMap<&'static str, Vec<String>>,
    /// Above `[upstreams.NAME]`, by name.
    pub upstreams: BTreeMap<String, Vec<String>>,
    /// Above `[maps.NAME]`, by name.
    pub maps: BTreeMap<String, Vec<String>>,
    /// Above `[zones.NAME]`, by name.
    pub zones: BTreeMap<String, Vec<String>>,
    /// Above each top-level `[[location]]`, by its index in [`RawConfig::locations`].
    pub locations: BTreeMap<usize, Vec<String>>,
    /// Above each `[[site]]` and its locations, by the site's index.
    pub sites: BTreeMap<usize, SiteNotes>,
    /// At the end of the file.
    pub tail: Vec<String>,
}

/// The notes of one site: above its `[[site]]`, and above each `[[site.location]]` by
/// its index in [`RawSiteEntry::locations`].
#[derive(Default, Debug, Clone)]
pub(crate) struct SiteNotes {
    pub site: Vec<String>,
    pub locations: BTreeMap<usize, Vec<String>>,
}

/// [`write()`] with `notes` as comments where they say. The text reads back as the
/// same model: comments are no part of it.
pub(crate) fn write_noted(raw: &RawConfig, notes: &Notes) -> Result<String, Error> {
    let mut doc = Doc::default();
    doc.comment(&notes.head);
    let none = Vec::new();
    let above = |name: &str| notes.sections.get(name).unwrap_or(&none);
    doc.section("server", &raw.server, above("server"))?;
    doc.section("real_ip", &raw.real_ip, above("real_ip"))?;
    doc.section("access", &raw.access, above("access"))?;
    doc.section("log", &raw.log, above("log"))?;
    doc.section("admin", &raw.admin, above("admin"))?;
    doc.tls(&raw.tls, above("tls"))?;
    doc.section("redis", &raw.redis, above("redis"))?;
    doc.section("acme", &raw.acme, above("acme"))?;
    doc.section("quic", &raw.quic, above("quic"))?;
    doc.section("trace", &raw.trace, above("trace"))?;
    doc.named("upstreams", &raw.upstreams, &notes.upstreams)?;
    doc.named("maps", &raw.maps, &notes.maps)?;
    doc.named("zones", &raw.zones, &notes.zones)?;
    doc.section("api_keys", &raw.api_keys, above("api_keys"))?;
    for (i, location) in raw.locations.iter().enumerate() {
        if let Some(location) = location {
            let note = notes.locations.get(&i).unwrap_or(&none);
            doc.table("[[location]]", location.get_ref(), &[], note)?;
        }
    }
    let sites = raw.sites.iter().flat_map(|(_, sites)| sites.iter());
    for (i, site) in sites.enumerate() {
        if let Some(site) = site {
            doc.site(site, notes.sites.get(&i))?;
        }
    }
    if !notes.tail.is_empty() {
        doc.out.push('\n');
        doc.comment(&notes.tail);
    }
    Ok(doc.out)
}

/// The text so far.
#[derive(Default)]
struct Doc {
    out: String,
}

impl Doc {
    /// `# line` for each line of `lines`.
    fn comment(&mut self, lines: &[String]) {
        for line in lines.iter().flat_map(|line| line.split(['\n', '\r'])) {
            self.out.push('#');
            if !line.is_empty() {
                self.out.push(' ');
            }
            for c in line.chars() {
                match c {
                    '\t' => self.out.push(c),
                    c if c.is_control() => self.out.extend(c.escape_default()),
                    c => self.out.push(c),
                }
            }
            self.out.push('\n');
        }
    }

    /// `note`, `header`, then the keys of `table` but those in `leave`; a blank line
    /// before.
    fn table<T: Serialize>(
        &mut self,
        header: &str,
        table: &T,
        leave: &[&str],
        note: &[String],
    ) -> Result<(), Error> {
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        self.comment(note);
        writeln!(self.out, "{header}")?;
        table.serialize(Keys {
            out: &mut self.out,
            leave,
        })
    }

    fn section<T: Serialize>(
        &mut self,
        name: &str,
        section: &Section<T>,
        note: &[String],
    ) -> Result<(), Error> {
        match section {
            Section::Present(_, table) => self.table(&format!("[{name}]"), table, &[], note),
            Section::Absent | Section::Invalid => Ok(()),
        }
    }

    /// `[FAMILY.NAME]` for each table of the family that was read.
    fn named<T: Serialize>(
        &mut self,
        family: &str,
        tables: &[Named<T>],
        notes: &BTreeMap<String, Vec<String>>,
    ) -> Result<(), Error> {
        for entry in tables {
            if let Some(body) = &entry.body {
                let name = entry.name.get_ref();
                let header = format!("[{family}.{}]", key(name));
                let note = notes.get(name).map_or(&[][..], Vec::as_slice);
                self.table(&header, body.get_ref(), &[], note)?;
            }
        }
        Ok(())
    }

    /// `[tls]`, with each certificate as a `[[tls.certificates]]` of its own (as the
    /// examples write them); an empty list stays `certificates = []`.
    fn tls(&mut self, tls: &Section<RawTls>, note: &[String]) -> Result<(), Error> {
        let Section::Present(_, tls) = tls else {
            return Ok(());
        };
        self.table("[tls]", tls, &["certificates"], note)?;
        let Some(certificates) = &tls.certificates else {
            return Ok(());
        };
        if certificates.get_ref().is_empty() {
            writeln!(self.out, "certificates = []")?;
        }
        for certificate in certificates.get_ref() {
            self.table("[[tls.certificates]]", certificate.get_ref(), &[], &[])?;
        }
        Ok(())
    }

    /// `[[site]]` and its `[[site.location]]`s.
    fn site(&mut self, entry: &RawSiteEntry, notes: Option<&SiteNotes>) -> Result<(), Error> {
        let none = Vec::new();
        let site_note = notes.map_or(&none, |n| &n.site);
        self.table("[[site]]", &entry.site, &[], site_note)?;
        for (i, location) in entry.locations.iter().enumerate() {
            if let Some(location) = location {
                let note = notes.and_then(|n| n.locations.get(&i)).unwrap_or(&none);
                self.table("[[site.location]]", location.get_ref(), &[], note)?;
            }
        }
        Ok(())
    }
}

/// A key as TOML has it: bare when it can be, else a quoted string.
fn key(name: &str) -> String {
    let bare = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if !name.is_empty() && name.bytes().all(bare) {
        return name.to_owned();
    }
    let mut quoted = String::with_capacity(name.len() + 2);
    quoted.push('"');
    for c in name.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '\r' => quoted.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(quoted, "\\u{:04X}", u32::from(c));
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Writes the fields of one struct as `key = value` lines, each value inline as toml's
/// [`ValueSerializer`] writes it. A field whose value is `None` is left out, and so are
/// the fields named in `leave` (written apart by the caller). Anything but a struct is
/// refused: every table of the model is one.
struct Keys<'a> {
    out: &'a mut String,
    leave: &'a [&'a str],
}

impl SerializeStruct for Keys<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        if self.leave.contains(&name) {
            return Ok(());
        }
        let mut text = String::new();
        let written = value.serialize(ValueSerializer::new(&mut text)).map(|_| ());
        match written {
            Ok(()) => Ok(writeln!(self.out, "{} = {text}", key(name))?),
            Err(err) if Some(&err) == unset().as_ref() => Ok(()),
            Err(err) => Err(err),
        }
    }

    fn end(self) -> Result<(), Error> {
        Ok(())
    }
}

/// The error toml's value writer gives for `None`: toml has no null, so the key is left out.
fn unset() -> Option<Error> {
    None::<()>
        .serialize(ValueSerializer::new(&mut String::new()))
        .err()
}

fn not_a_table() -> Error {
    ser::Error::custom("the model's sections are structs")
}

/// `fn name(self, _: T) -> Result<(), Error>` refusing a value that is not a table.
macro_rules! refuse {
    ($($name:ident($($arg:ty),*) -> $ok:ty;)*) => {
        $(fn $name(self, $(_: $arg),*) -> Result<$ok, Error> {
            Err(not_a_table())
        })*
    };
}

impl<'a> ser::Serializer for Keys<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Self;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Error> {
        Ok(self)
    }

    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(not_a_table())
    }

    refuse! {
        serialize_bool(bool) -> ();
        serialize_i8(i8) -> ();
        serialize_i16(i16) -> ();
        serialize_i32(i32) -> ();
        serialize_i64(i64) -> ();
        serialize_u8(u8) -> ();
        serialize_u16(u16) -> ();
        serialize_u32(u32) -> ();
        serialize_u64(u64) -> ();
        serialize_f32(f32) -> ();
        serialize_f64(f64) -> ();
        serialize_char(char) -> ();
        serialize_str(&str) -> ();
        serialize_bytes(&[u8]) -> ();
        serialize_none() -> ();
        serialize_unit() -> ();
        serialize_unit_struct(&'static str) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_seq(Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
        serialize_map(Option<usize>) -> Self::SerializeMap;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
    }
}

#[cfg(test)]
mod tests {
    use serde_spanned::Spanned;

    use super::super::{parse, RawUpstream};
    use super::*;
    use crate::config::diag::Diagnostics;

    #[test]
    fn notes_are_comments_above_their_headers_and_read_back_as_nothing() {
        let mut model = RawConfig::default();
        model.upstreams.push(Named {
            name: Spanned::new(0..0, "app".to_owned()),
            body: Some(Spanned::new(0..0, RawUpstream::default())),
        });
        let site = RawSiteEntry {
            span: 0..0,
            site: Default::default(),
            locations: vec![None, Some(Spanned::new(0..0, Default::default()))],
        };
        model.sites = Some((0..0, vec![Some(site)]));
        let mut notes = Notes {
            head: vec!["imported".to_owned()],
            tail: vec!["unsupported: gzip on;".to_owned()],
            ..Notes::default()
        };
        notes.upstreams.insert("app".to_owned(), vec!["nginx.conf:3".to_owned()]);
        let mut site_notes = SiteNotes {
            site: vec!["nginx.conf:7\nsecond line\u{1b}".to_owned()],
            ..SiteNotes::default()
        };
        site_notes.locations.insert(1, vec!["nginx.conf:9".to_owned()]);
        notes.sites.insert(0, site_notes);
        let text = write_noted(&model, &notes).unwrap();
        assert_eq!(
            text,
            "# imported\n\n# nginx.conf:3\n[upstreams.app]\n\n# nginx.conf:7\n# second line\\u{1b}\n[[site]]\n\n# nginx.conf:9\n[[site.location]]\n\n# unsupported: gzip on;\n"
        );
        let mut diag = Diagnostics::new(&text);
        let read = parse(&text, &mut diag);
        assert!(!diag.has_errors(), "{text}");
        assert_eq!(write(&read).unwrap(), write(&model).unwrap());
    }

    #[test]
    fn keys_are_bare_where_toml_allows_and_quoted_elsewhere() {
        assert_eq!(key("per_ip-2"), "per_ip-2");
        assert_eq!(key("a.b"), "\"a.b\"");
        assert_eq!(key(""), "\"\"");
        assert_eq!(key("say \"hi\"\\\n\u{1}"), r#""say \"hi\"\\\n\u0001""#);
    }

    /// The loader refuses such names, but the text is TOML that reads back as written.
    #[test]
    fn a_name_that_needs_quotes_reads_back_as_it_was() {
        let names = [
            "a.b",
            "two words",
            "q\"uote",
            "back\\slash",
            "line\nbreak",
            "é",
            "",
        ];
        let mut model = RawConfig::default();
        for name in names {
            model.upstreams.push(Named {
                name: Spanned::new(0..0, name.to_owned()),
                body: Some(Spanned::new(0..0, RawUpstream::default())),
            });
        }
        let text = write(&model).unwrap();
        let mut diag = Diagnostics::new(&text);
        let read = parse(&text, &mut diag);
        assert!(!diag.has_errors(), "{text}");
        let read: Vec<&str> = read
            .upstreams
            .iter()
            .map(|u| u.name.get_ref().as_str())
            .collect();
        assert_eq!(read, names, "{text}");
    }
}
