//! Which of the headers forwarding rewrites a message carries, found in one pass over its
//! names. Most messages carry none of them, and asking the map for each one by name (a hash
//! and a probe per name, whether it is there or not) was a fifth of a proxied request's own
//! work; a name's length alone turns most names away here. An upstream's answer is looked
//! at for more names: the ones dropped from it by default (`Date`, `Server`, …).

use http::{HeaderMap, HeaderName};

/// A header forwarding looks for; its place in [`NAMES`] is its bit in [`Present`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "an answer's dropped headers are found by their place (`DROPPED_AT`)"
    )
)]
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
    // An answer's only, in the order of `config::Passed::DROPPED`.
    Date,
    Server,
    XPad,
    XAccelExpires,
    XAccelRedirect,
    XAccelLimitRate,
    XAccelBuffering,
    XAccelCharset,
}

/// How many of [`NAMES`] a request is looked at for (the rest are an answer's).
const IN_REQUESTS: usize = 16;

/// Where the headers dropped from an answer by default start in [`NAMES`].
pub(super) const DROPPED_AT: usize = Watched::Date as usize;

/// The names, lowercase as `HeaderName` keeps them, in [`Watched`]'s order.
const NAMES: [&str; 24] = [
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
    "date",
    "server",
    "x-pad",
    "x-accel-expires",
    "x-accel-redirect",
    "x-accel-limit-rate",
    "x-accel-buffering",
    "x-accel-charset",
];

/// Bit `n` set: one of the first `count` names is `n` bytes long (all are shorter than 32).
const fn lengths(count: usize) -> u32 {
    let mut mask = 0;
    let mut i = 0;
    while i < count {
        mask |= 1 << NAMES[i].len();
        i += 1;
    }
    mask
}

const LENGTHS: u32 = lengths(IN_REQUESTS);
const ANSWER_LENGTHS: u32 = lengths(NAMES.len());

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
    /// Looks at every name of a request's `headers` once.
    pub(crate) fn of(headers: &HeaderMap) -> Present {
        Present::among(headers, &NAMES[..IN_REQUESTS], LENGTHS)
    }

    /// Looks at every name of an answer's `headers` once, for the headers dropped by
    /// default too.
    pub(super) fn of_answer(headers: &HeaderMap) -> Present {
        Present::among(headers, &NAMES, ANSWER_LENGTHS)
    }

    fn among(headers: &HeaderMap, names: &[&str], lengths: u32) -> Present {
        let mut present = 0;
        for name in headers.keys() {
            let name = name.as_str();
            if name.len() >= 32 || lengths & (1 << name.len()) == 0 {
                continue;
            }
            if let Some(at) = names.iter().position(|watched| *watched == name) {
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

    /// The headers dropped by default that are there, bit `i` for
    /// `config::Passed::DROPPED[i]`.
    pub(super) fn dropped(self) -> u32 {
        self.0 >> DROPPED_AT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Watched; 24] = [
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
        Watched::Date,
        Watched::Server,
        Watched::XPad,
        Watched::XAccelExpires,
        Watched::XAccelRedirect,
        Watched::XAccelLimitRate,
        Watched::XAccelBuffering,
        Watched::XAccelCharset,
    ];

    #[test]
    fn each_name_is_found_as_its_own_header_and_no_other() {
        for (i, name) in NAMES.iter().enumerate() {
            let mut headers = HeaderMap::new();
            headers.insert(HeaderName::from_static(name), "1".parse().expect("a value"));
            let present = Present::of_answer(&headers);
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

    #[test]
    fn a_request_is_not_looked_at_for_an_answers_names() {
        let mut headers = HeaderMap::new();
        for name in ["date", "server", "x-accel-redirect"] {
            headers.insert(HeaderName::from_static(name), "1".parse().expect("a value"));
        }
        assert_eq!(Present::of(&headers), Present::default());
        assert_eq!(Present::of_answer(&headers).dropped(), 0b1_0011);
    }

    #[test]
    fn the_dropped_names_are_configs_in_its_order() {
        let ours = &NAMES[DROPPED_AT..];
        assert_eq!(ours, crate::config::Passed::DROPPED);
    }
}
