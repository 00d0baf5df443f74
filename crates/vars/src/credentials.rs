//! The user and password of an `Authorization: Basic` header (RFC 7617), read as nginx
//! reads them: what `$remote_user` shows, and what basic auth checks (the gateway's
//! `access::basic`). The one reading of that header.

use std::fmt;

use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;

/// The longest credentials decoded, in bytes. nginx has no bound of its own but the header's;
/// real ones are a few dozen bytes, and a client is made to pay for nothing larger.
pub const MAX_DECODED: usize = 4096;

/// Base64 as nginx's `ngx_decode_base64` reads it: the standard alphabet, padding optional
/// (the caller stops at the first `=`), and the unused bits of the last character ignored.
const LENIENT_BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// A user name and password from an `Authorization: Basic` header, decoded once into one
/// buffer.
pub struct Credentials {
    decoded: Vec<u8>,
    /// Where the first `:` is: the user name is before it, the password after.
    colon: usize,
}

impl Credentials {
    /// The user name: never empty, never holding a `:`, and not checked against anything
    /// yet (it is nginx's `$remote_user` whether or not the password matches).
    pub fn user(&self) -> &[u8] {
        self.decoded.get(..self.colon).unwrap_or_default()
    }

    /// The password: possibly empty, possibly holding `:`.
    pub fn password(&self) -> &[u8] {
        self.decoded.get(self.colon + 1..).unwrap_or_default()
    }
}

/// The user only: the password stays out of any log.
impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &String::from_utf8_lossy(self.user()))
            .finish_non_exhaustive()
    }
}

/// The credentials of an `Authorization` header's `value`, read as nginx reads them
/// (`ngx_http_auth_basic_user`), or `None` where nginx declines them and answers 401:
/// - the value starts with `Basic ` in any case; more spaces (only spaces) may follow;
/// - base64, read up to the first `=` (what follows it is ignored), padding optional; a
///   character outside the alphabet, or a length of 4n+1, is refused;
/// - the text is split at its first `:`: no `:`, or nothing before it, is refused; the
///   password may be empty and may hold more `:`.
///
/// Credentials decoding to more than 4 KiB are refused before they are decoded.
pub fn credentials(value: &[u8]) -> Option<Credentials> {
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"Basic ") {
        return None;
    }
    let start = rest.iter().position(|&b| b != b' ')?;
    let rest = rest.get(start..)?;
    let encoded = rest.get(..memchr::memchr(b'=', rest).unwrap_or(rest.len()))?;
    // Unpadded base64 of n characters decodes to 3n/4 bytes, rounded down.
    if encoded.len().saturating_mul(3) / 4 > MAX_DECODED {
        return None;
    }
    let decoded = LENIENT_BASE64.decode(encoded).ok()?;
    let colon = memchr::memchr(b':', &decoded)?;
    (colon > 0).then_some(Credentials { decoded, colon })
}
