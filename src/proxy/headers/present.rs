//! Which of the headers forwarding rewrites a message carries, found in one pass over its
//! names. Most messages carry none of them, and asking the map for each one by name (a hash
//! and a probe per name, whether it is there or not) was a fifth of a proxied request's own
//! work; a name's length alone turns most names away here.

use http::{HeaderMap, HeaderName};

/// A header forwarding looks for; its place in [`NAMES`] is its bit in [`Present`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Watched {
    Connection,
    KeepAlive,
    ProxyConnection,
    Http2Settings,
    Te,
    Trailer,
    TransferEncoding,
    Upgrade,
    XForwardedFor,
    XRealIp,
    XForwardedProto,
    XForwardedHost,
    ContentLength,
    Expect,
    SecWebSocketKey,
    SecWebSocketVersion,
}

/// The names, lowercase as `HeaderName` keeps them, in [`Watched`]'s order.
const NAMES: [&str; 16] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "http2-settings",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "x-forwarded-for",
    "x-real-ip",
    "x-forwarded-proto",
    "x-forwarded-host",
    "content-length",
    "expect",
    "sec-websocket-key",
    "sec-websocket-version",
];

/// Bit `n` set: some watched name is `n` bytes long (all are shorter than 32).
const LENGTHS: u32 = {
    let mut mask = 0;
    let mut i = 0;
    while i < NAMES.len() {
        mask |= 1 << NAMES[i].len();
        i += 1;
    }
    mask
};

/// The watched headers a message carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Present(u32);

impl Watched {
    /// The header's name: the one spelling of it ([`NAMES`]).
    pub(super) const fn name(self) -> HeaderName {
        HeaderName::from_static(NAMES[self as usize])
    }
}

impl Present {
    /// Looks at every name of `headers` once.
    pub(crate) fn of(headers: &HeaderMap) -> Present {
        let mut present = 0;
        for name in headers.keys() {
            let name = name.as_str();
            if name.len() >= 32 || LENGTHS & (1 << name.len()) == 0 {
                continue;
            }
            if let Some(at) = NAMES.iter().position(|watched| *watched == name) {
                present |= 1 << at;
            }
        }
        Present(present)
    }

    pub(super) fn has(self, name: Watched) -> bool {
        self.0 & (1 << name as u32) != 0
    }

    /// Whether the client framed its body itself (the upstream client writes its own).
    pub(crate) fn has_content_length(self) -> bool {
        self.has(Watched::ContentLength)
    }

    /// Whether the client asked for a `100 Continue`.
    pub(crate) fn has_expect(self) -> bool {
        self.has(Watched::Expect)
    }

    /// Whether any of `names` is there.
    pub(super) fn any(self, names: &[Watched]) -> bool {
        names.iter().any(|&name| self.has(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Watched; 16] = [
        Watched::Connection,
        Watched::KeepAlive,
        Watched::ProxyConnection,
        Watched::Http2Settings,
        Watched::Te,
        Watched::Trailer,
        Watched::TransferEncoding,
        Watched::Upgrade,
        Watched::XForwardedFor,
        Watched::XRealIp,
        Watched::XForwardedProto,
        Watched::XForwardedHost,
        Watched::ContentLength,
        Watched::Expect,
        Watched::SecWebSocketKey,
        Watched::SecWebSocketVersion,
    ];

    #[test]
    fn each_name_is_found_as_its_own_header_and_no_other() {
        for (i, name) in NAMES.iter().enumerate() {
            let mut headers = HeaderMap::new();
            headers.insert(HeaderName::from_static(name), "1".parse().expect("a value"));
            let present = Present::of(&headers);
            for (j, watched) in ALL.iter().enumerate() {
                assert_eq!(present.has(*watched), i == j, "{name} as {watched:?}");
            }
        }
    }

    #[test]
    fn other_names_are_not_watched_whatever_their_case_or_length() {
        let mut headers = HeaderMap::new();
        for name in [
            "user-agent",
            "referer",
            "x-te",
            "accept",
            "cookie",
            "host",
            "date",
        ] {
            headers.insert(HeaderName::from_static(name), "1".parse().expect("a value"));
        }
        let long = "x-a-header-name-longer-than-thirty-two-bytes";
        headers.insert(HeaderName::from_static(long), "1".parse().expect("a value"));
        // Parsed names are lowercased, so a client's `CONNECTION` is still found.
        headers.insert(
            HeaderName::from_bytes(b"TE").expect("a name"),
            "trailers".parse().expect("a value"),
        );
        assert_eq!(Present::of(&headers), Present(1 << Watched::Te as u32));
    }
}
