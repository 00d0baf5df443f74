//! Tokens (RFC 9110 §5.6.2) and the comma-separated lists of them that header fields
//! such as `Connection` and `Transfer-Encoding` hold.

/// `token = 1*tchar`.
pub(crate) fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|&b| is_tchar(b))
}

/// `tchar`: a visible character that delimits nothing.
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The non-empty comma-separated tokens of a list-valued field.
pub(crate) fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

/// `value` (a list) holds `token`, case-insensitively.
pub(crate) fn has_token(value: &[u8], token: &[u8]) -> bool {
    tokens(value).any(|t| t.eq_ignore_ascii_case(token))
}
