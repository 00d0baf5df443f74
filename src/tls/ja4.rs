//! `$ja4`: the JA4 fingerprint of a TLS ClientHello (FoxIO's JA4 specification), read
//! from the connection's first bytes before the handshake takes them. Pure: bytes in,
//! text out.
//!
//! `t13d1516h2_8daaf6152771_e5627efa2ab1` is: `t` (TCP; `q` for QUIC), the highest
//! version offered (`13`), `d` when SNI is sent (`i` without), the number of cipher
//! suites and of extensions (two digits each, at most 99), the first and last character
//! of the first ALPN value (`00` without); then the first 12 hex digits of the SHA-256 of
//! the cipher suites sorted (4 hex digits each, joined by `,`); then that of the
//! extensions sorted without SNI and ALPN, `_`, and the signature algorithms in the
//! order sent. GREASE values (RFC 8701) count nowhere.

use sha2::{Digest, Sha256};

/// The most a ClientHello may take (several records of it included) before it is no
/// longer read: larger ones get no fingerprint.
pub const MAX_HELLO: usize = 16 * 1024;

/// What the bytes read so far say.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// The ClientHello's fingerprint.
    Complete(String),
    /// More bytes are needed.
    Incomplete,
    /// Not a TLS ClientHello (or one past [`MAX_HELLO`]): no fingerprint.
    Malformed,
}

/// The fingerprint of the ClientHello `bytes` start with (TLS records, as the client
/// sent them over TCP).
pub fn ja4(bytes: &[u8]) -> Read {
    match handshake(bytes) {
        Ok(Some(hello)) => parse(&hello).map_or(Read::Malformed, |hello| Read::Complete(hello.fingerprint('t'))),
        Ok(None) => Read::Incomplete,
        Err(()) => Read::Malformed,
    }
}

/// The ClientHello's body, gathered from as many handshake records as it spans;
/// `Ok(None)` while incomplete.
fn handshake(mut bytes: &[u8]) -> Result<Option<Vec<u8>>, ()> {
    let mut message = Vec::new();
    loop {
        let Some(header) = bytes.get(..5) else {
            return Ok(None);
        };
        if header[0] != 22 || header[1] != 3 {
            return Err(());
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len == 0 || message.len() + len > MAX_HELLO {
            return Err(());
        }
        let Some(fragment) = bytes.get(5..5 + len) else {
            return Ok(None);
        };
        message.extend_from_slice(fragment);
        bytes = &bytes[5 + len..];
        if message.len() >= 4 {
            if message[0] != 1 {
                return Err(());
            }
            let body = u32::from_be_bytes([0, message[1], message[2], message[3]]) as usize;
            if 4 + body > MAX_HELLO {
                return Err(());
            }
            if message.len() >= 4 + body {
                message.truncate(4 + body);
                return Ok(Some(message.split_off(4)));
            }
        }
    }
}

/// What JA4 takes from a ClientHello.
#[derive(Debug, Default)]
struct Hello {
    legacy_version: u16,
    ciphers: Vec<u16>,
    extensions: Vec<u16>,
    versions: Vec<u16>,
    sni: bool,
    alpn: Option<Vec<u8>>,
    signature_algorithms: Vec<u16>,
}

/// Reads `body`, a ClientHello without its handshake header.
fn parse(body: &[u8]) -> Option<Hello> {
    let mut r = Reader(body);
    let mut hello = Hello {
        legacy_version: r.u16()?,
        ..Hello::default()
    };
    r.take(32)?;
    let session = usize::from(r.u8()?);
    r.take(session)?;
    let mut ciphers = Reader(r.vec16()?);
    while !ciphers.0.is_empty() {
        hello.ciphers.push(ciphers.u16()?);
    }
    let compression = usize::from(r.u8()?);
    r.take(compression)?;
    if r.0.is_empty() {
        return Some(hello);
    }
    let mut extensions = Reader(r.vec16()?);
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let data = extensions.vec16()?;
        hello.extensions.push(kind);
        extension(&mut hello, kind, data)?;
    }
    Some(hello)
}

/// Reads the extensions JA4 looks into.
fn extension(hello: &mut Hello, kind: u16, data: &[u8]) -> Option<()> {
    match kind {
        0x0000 => hello.sni = true,
        0x0010 => {
            let mut list = Reader(Reader(data).vec16()?);
            if !list.0.is_empty() {
                let len = usize::from(list.u8()?);
                hello.alpn = Some(list.take(len)?.to_vec());
            }
        }
        0x002b => {
            let mut list = Reader(Reader(data).vec8()?);
            while !list.0.is_empty() {
                hello.versions.push(list.u16()?);
            }
        }
        0x000d => {
            let mut list = Reader(Reader(data).vec16()?);
            while !list.0.is_empty() {
                hello.signature_algorithms.push(list.u16()?);
            }
        }
        _ => {}
    }
    Some(())
}

impl Hello {
    /// JA4 over `transport` (`t` or `q`).
    fn fingerprint(&self, transport: char) -> String {
        let real = |values: &[u16]| values.iter().copied().filter(|&v| !grease(v)).collect::<Vec<u16>>();
        let ciphers = real(&self.ciphers);
        let extensions = real(&self.extensions);
        let versions = real(&self.versions);
        let version = versions.iter().copied().max().unwrap_or(self.legacy_version);
        let sni = if self.sni { 'd' } else { 'i' };
        let a = format!(
            "{transport}{}{sni}{:02}{:02}{}",
            version_code(version),
            ciphers.len().min(99),
            extensions.len().min(99),
            alpn_code(self.alpn.as_deref())
        );
        let mut sorted_ciphers = ciphers;
        sorted_ciphers.sort_unstable();
        let b = truncated_hash(&hex_list(&sorted_ciphers), sorted_ciphers.is_empty());
        let mut sorted_extensions: Vec<u16> =
            extensions.into_iter().filter(|&e| e != 0x0000 && e != 0x0010).collect();
        sorted_extensions.sort_unstable();
        let mut c_text = hex_list(&sorted_extensions);
        let signatures = real(&self.signature_algorithms);
        if !signatures.is_empty() {
            c_text.push('_');
            c_text.push_str(&hex_list(&signatures));
        }
        let c = truncated_hash(&c_text, sorted_extensions.is_empty());
        format!("{a}_{b}_{c}")
    }
}

/// GREASE (RFC 8701): `0x?a?a` with both bytes equal.
fn grease(value: u16) -> bool {
    let [high, low] = value.to_be_bytes();
    high == low && low & 0x0f == 0x0a
}

fn version_code(version: u16) -> &'static str {
    match version {
        0x0304 => "13",
        0x0303 => "12",
        0x0302 => "11",
        0x0301 => "10",
        0x0300 => "s3",
        0x0002 => "s2",
        0xfeff => "d1",
        0xfefd => "d2",
        0xfefc => "d3",
        _ => "00",
    }
}

/// The first and last character of the first ALPN value; when either is not an ASCII
/// letter or digit, the first and last hex digit of the value; `00` without one.
fn alpn_code(alpn: Option<&[u8]>) -> String {
    let Some((&first, rest)) = alpn.and_then(<[u8]>::split_first) else {
        return "00".to_owned();
    };
    let last = rest.last().copied().unwrap_or(first);
    if first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() {
        return format!("{}{}", char::from(first), char::from(last));
    }
    let hex = format!("{first:02x}{last:02x}");
    format!("{}{}", &hex[..1], &hex[3..])
}

/// `values` as 4-digit lower-case hex, joined by `,`.
fn hex_list(values: &[u16]) -> String {
    let words: Vec<String> = values.iter().map(|v| format!("{v:04x}")).collect();
    words.join(",")
}

/// The first 12 hex digits of `text`'s SHA-256; twelve zeros when there was nothing.
fn truncated_hash(text: &str, empty: bool) -> String {
    if empty {
        return "000000000000".to_owned();
    }
    let digest = Sha256::digest(text.as_bytes());
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads big-endian fields off a slice, `None` past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let taken = self.0.get(..n)?;
        self.0 = &self.0[n..];
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        let bytes = self.take(2)?;
        Some(u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    fn vec8(&mut self) -> Option<&'a [u8]> {
        let len = usize::from(self.u8()?);
        self.take(len)
    }

    fn vec16(&mut self) -> Option<&'a [u8]> {
        let len = usize::from(self.u16()?);
        self.take(len)
    }
}

#[cfg(test)]
mod tests;
