//! A certificate's subject as `$ssl_client_s_dn` gives it: RFC 2253 text, as nginx
//! (since 1.11.6) prints it with OpenSSL's `XN_FLAG_RFC2253`, byte for byte. The last
//! RDN comes first, `,` between RDNs and `+` within one; attributes by OpenSSL's short
//! names (`CN`, `O`, `emailAddress`, …), others by their dotted OID with the value as `#`
//! and its DER in hex. Values as UTF-8, each byte above 0x7f and each control byte
//! written `\XX`, and `, + " \ < > ;` (and `#` or a space first, a space last) behind a
//! backslash.

use rustls::pki_types::CertificateDer;
use x509_parser::asn1_rs::{Any, Class, Tag};

/// The subject of `cert` (DER), or `None` when it cannot be read.
pub(crate) fn rfc2253(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert).ok()?;
    let mut out = String::new();
    let rdns: Vec<_> = cert.subject().iter_rdn().collect();
    for (i, rdn) in rdns.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, attribute) in rdn.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            let oid = attribute.attr_type().to_id_string();
            match short_name(&oid) {
                Some(name) => {
                    out.push_str(name);
                    out.push('=');
                    value(attribute.attr_value(), &mut out);
                }
                None => {
                    out.push_str(&oid);
                    out.push('=');
                    dump(attribute.attr_value(), &mut out);
                }
            }
        }
    }
    Some(out)
}

/// OpenSSL's short name of the attribute type `oid`, for those a subject holds.
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.4" => "SN",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "street",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.12" => "title",
        "2.5.4.13" => "description",
        "2.5.4.15" => "businessCategory",
        "2.5.4.17" => "postalCode",
        "2.5.4.41" => "name",
        "2.5.4.42" => "GN",
        "2.5.4.43" => "initials",
        "2.5.4.44" => "generationQualifier",
        "2.5.4.46" => "dnQualifier",
        "2.5.4.65" => "pseudonym",
        "2.5.4.97" => "organizationIdentifier",
        "1.2.840.113549.1.9.1" => "emailAddress",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.3.6.1.4.1.311.60.2.1.1" => "jurisdictionL",
        "1.3.6.1.4.1.311.60.2.1.2" => "jurisdictionST",
        "1.3.6.1.4.1.311.60.2.1.3" => "jurisdictionC",
        _ => return None,
    })
}

/// A value of a known attribute: its string as UTF-8, escaped; a value of a type that
/// is no string, dumped.
fn value(any: &Any<'_>, out: &mut String) {
    let data = any.data;
    let text: Option<String> = match (any.class(), any.tag()) {
        (Class::Universal, Tag::Utf8String) => std::str::from_utf8(data).ok().map(str::to_owned),
        // One byte a character; T61 read as Latin-1, as OpenSSL reads it.
        (
            Class::Universal,
            Tag::NumericString | Tag::PrintableString | Tag::T61String | Tag::Ia5String | Tag::VisibleString,
        ) => Some(data.iter().map(|&b| char::from(b)).collect()),
        (Class::Universal, Tag::BmpString) => utf16(data),
        (Class::Universal, Tag::UniversalString) => utf32(data),
        _ => None,
    };
    match text {
        Some(text) => escape(&text, out),
        None => dump(any, out),
    }
}

/// A BMPString's text (UTF-16, big-endian); `None` when it is not text.
fn utf16(data: &[u8]) -> Option<String> {
    if !data.len().is_multiple_of(2) {
        return None;
    }
    let units = data.chunks_exact(2).map(|pair| u16::from_be_bytes([pair[0], pair[1]]));
    char::decode_utf16(units).collect::<Result<String, _>>().ok()
}

/// A UniversalString's text (UTF-32, big-endian); `None` when it is not text.
fn utf32(data: &[u8]) -> Option<String> {
    if !data.len().is_multiple_of(4) {
        return None;
    }
    let chars = data.chunks_exact(4).map(|quad| u32::from_be_bytes([quad[0], quad[1], quad[2], quad[3]]));
    chars.map(char::from_u32).collect()
}

/// `text`'s UTF-8 bytes, escaped as RFC 2253 and OpenSSL's flags say.
fn escape(text: &str, out: &mut String) {
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let first = i == 0;
        let last = i + 1 == bytes.len();
        match b {
            b',' | b'+' | b'"' | b'\\' | b'<' | b'>' | b';' => {
                out.push('\\');
                out.push(char::from(b));
            }
            b'#' if first => out.push_str("\\#"),
            b' ' if first || last => out.push_str("\\ "),
            0..=0x1f | 0x7f..=0xff => hex_byte(b, '\\', out),
            _ => out.push(char::from(b)),
        }
    }
}

/// `#` and the value's DER (its tag, length and content) in upper-case hex.
fn dump(any: &Any<'_>, out: &mut String) {
    out.push('#');
    let class = (any.class() as u8) << 6;
    let constructed = if any.header.constructed() { 0x20 } else { 0 };
    let tag = any.tag().0;
    if tag < 31 {
        hex_byte(class | constructed | tag as u8, '\0', out);
    } else {
        hex_byte(class | constructed | 0x1f, '\0', out);
        let mut groups: Vec<u8> = Vec::new();
        let mut rest = tag;
        loop {
            groups.push((rest & 0x7f) as u8);
            rest >>= 7;
            if rest == 0 {
                break;
            }
        }
        for (i, group) in groups.iter().rev().enumerate() {
            let more = if i + 1 < groups.len() { 0x80 } else { 0 };
            hex_byte(group | more, '\0', out);
        }
    }
    let len = any.data.len();
    if len < 0x80 {
        hex_byte(len as u8, '\0', out);
    } else {
        let octets: Vec<u8> = len.to_be_bytes().into_iter().skip_while(|&b| b == 0).collect();
        hex_byte(0x80 | octets.len() as u8, '\0', out);
        for octet in octets {
            hex_byte(octet, '\0', out);
        }
    }
    for &b in any.data {
        hex_byte(b, '\0', out);
    }
}

/// `b` as two upper-case hex digits, after `prefix` unless it is `'\0'`.
fn hex_byte(b: u8, prefix: char, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    if prefix != '\0' {
        out.push(prefix);
    }
    out.push(char::from(HEX[usize::from(b >> 4)]));
    out.push(char::from(HEX[usize::from(b & 0xf)]));
}
