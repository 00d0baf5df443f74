//! `Accept-Encoding` (RFC 9110 §12.5.3): which of the codings tollgate offers the client
//! takes, for `compress` and for `precompressed` sidecars alike.

use http::HeaderValue;

use crate::config::Encoding;

/// The coding of `offered` the client prefers: the highest q-value above zero, a tie
/// going to the one listed first in `offered`. `*` stands for every coding the client
/// does not name; a coding named with `q=0` (or under `*;q=0`) is refused. `None`: the
/// identity, when the client accepts none of them or sent no `Accept-Encoding`.
pub(crate) fn choose<'a>(
    accept: impl Iterator<Item = &'a HeaderValue> + Clone,
    offered: &[Encoding],
) -> Option<Encoding> {
    let mut best: Option<(Encoding, u16)> = None;
    for &coding in offered {
        let weight = weight(accept.clone(), coding.token());
        if weight > 0 && best.is_none_or(|(_, top)| weight > top) {
            best = Some((coding, weight));
        }
    }
    best.map(|(coding, _)| coding)
}

/// The q-value, in thousandths, the header lines give `token`: its own item's, else
/// `*`'s, else 0. An item whose q-value is malformed counts as refused.
fn weight<'a>(accept: impl Iterator<Item = &'a HeaderValue>, token: &str) -> u16 {
    let mut star = None;
    let items = accept
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(','));
    for item in items {
        let mut params = item.split(';');
        let name = params.next().unwrap_or("").trim();
        let q = params
            .map(str::trim)
            .find_map(|p| p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")))
            .map_or(Some(1000), qvalue)
            .unwrap_or(0);
        if name.eq_ignore_ascii_case(token) {
            return q;
        }
        if name == "*" {
            star = Some(q);
        }
    }
    star.unwrap_or(0)
}

/// A q-value (`0`, `0.5`, `1.000`) in thousandths; `None` when malformed.
fn qvalue(text: &str) -> Option<u16> {
    let (whole, fraction) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = format!("{fraction:0<3}").parse::<u16>().ok()?;
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Encoding::{Br, Gzip, Zstd};

    fn choose_from(header: &str, offered: &[Encoding]) -> Option<Encoding> {
        let value = HeaderValue::from_str(header).unwrap();
        choose(std::iter::once(&value), offered)
    }

    #[test]
    fn the_highest_q_wins_and_ties_go_to_the_offered_order() {
        assert_eq!(choose_from("gzip, br", &[Zstd, Br, Gzip]), Some(Br));
        assert_eq!(choose_from("gzip, br;q=0.5", &[Br, Gzip]), Some(Gzip));
        assert_eq!(choose_from("GZIP;Q=0.9, zstd;q=1.0", &[Gzip, Zstd]), Some(Zstd));
        assert_eq!(choose_from("deflate", &[Gzip]), None);
    }

    #[test]
    fn zero_and_malformed_q_refuse_and_star_covers_the_unnamed() {
        assert_eq!(choose_from("gzip;q=0", &[Gzip]), None);
        assert_eq!(choose_from("gzip;q=0.000, br", &[Gzip, Br]), Some(Br));
        assert_eq!(choose_from("gzip;q=2", &[Gzip]), None);
        assert_eq!(choose_from("gzip;q=0.1234", &[Gzip]), None);
        assert_eq!(choose_from("*", &[Zstd]), Some(Zstd));
        assert_eq!(choose_from("*;q=0, gzip", &[Br, Gzip]), Some(Gzip));
        assert_eq!(choose_from("br;q=0, *", &[Br, Gzip]), Some(Gzip));
        assert_eq!(choose_from("", &[Gzip]), None);
    }

    #[test]
    fn several_header_lines_are_one_list() {
        let lines = [HeaderValue::from_static("br;q=0.2"), HeaderValue::from_static("gzip")];
        assert_eq!(choose(lines.iter(), &[Br, Gzip]), Some(Gzip));
        assert_eq!(choose([].iter(), &[Br, Gzip]), None);
    }
}
