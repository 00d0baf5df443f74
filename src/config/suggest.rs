//! "Did you mean": the known word closest to a misspelt one, when one is close enough that
//! the misspelling is likely (a letter left out, added, changed, or two swapped).

/// The candidate closest to `word` by edits (each a letter inserted, deleted, replaced, or
/// two neighbours swapped), if it needs at most a third of `word`'s letters changed (at
/// least one); the first of equals.
pub(crate) fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let most = (word.chars().count() / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        let edits = edits(word, candidate);
        if edits <= most && best.is_none_or(|(fewest, _)| edits < fewest) {
            best = Some((edits, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// What to say of `name`, a `what` ("zone", "upstream") that names none of `known`: the
/// one it likely meant, else those there are, else `none` (how to define one). Names of
/// one or two letters get no guess: any other short name is an edit away.
pub(crate) fn unknown_name(what: &str, name: &str, known: &[&str], none: &str) -> String {
    let guess = (name.chars().count() >= 3)
        .then(|| closest(name, known.iter().copied()))
        .flatten();
    if let Some(meant) = guess {
        return format!(r#"unknown {what} "{name}": did you mean "{meant}"?"#);
    }
    if known.is_empty() {
        return format!(r#"unknown {what} "{name}": {none}"#);
    }
    let listed: Vec<String> = known.iter().map(|k| format!(r#""{k}""#)).collect();
    format!(r#"unknown {what} "{name}", expected one of {}"#, listed.join(", "))
}

/// Edits from `a` to `b`, a swap of neighbours counting one (optimal string alignment).
fn edits(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the table: two rows back (for swaps), the last, the one being filled.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let replace = usize::from(a[i - 1] != b[j - 1]);
            let mut cost = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + replace);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cost = cost.min(before[j - 2] + 1);
            }
            row[j] = cost;
        }
        std::mem::swap(&mut before, &mut last);
        std::mem::swap(&mut last, &mut row);
    }
    last[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_likely_misspelling_finds_its_word() {
        let keys = ["match", "upstream", "return", "limit", "weight"];
        assert_eq!(closest("upstrem", keys), Some("upstream"));
        assert_eq!(closest("wieght", keys), Some("weight"), "two letters swapped");
        assert_eq!(closest("limits", keys), Some("limit"));
        assert_eq!(closest("retrun", keys), Some("return"));
    }

    #[test]
    fn a_word_far_from_every_candidate_finds_none() {
        let keys = ["match", "upstream", "return"];
        assert_eq!(closest("proxy_pass", keys), None);
        assert_eq!(closest("ab", keys), None);
        assert_eq!(closest("x", ["y"]), Some("y"), "one edit is always close enough");
    }

    #[test]
    fn an_unknown_name_gets_the_likely_one_else_the_list_else_how_to_define_one() {
        let zones = ["per_ip", "per_key"];
        assert_eq!(
            unknown_name("zone", "per_iq", &zones, "none"),
            r#"unknown zone "per_iq": did you mean "per_ip"?"#
        );
        assert_eq!(
            unknown_name("zone", "login", &zones, "none"),
            r#"unknown zone "login", expected one of "per_ip", "per_key""#
        );
        assert_eq!(
            unknown_name("zone", "login", &[], "no `[zones.NAME]` is defined"),
            r#"unknown zone "login": no `[zones.NAME]` is defined"#
        );
        assert_eq!(
            unknown_name("upstream", "c", &["b", "a"], "none"),
            r#"unknown upstream "c", expected one of "b", "a""#,
            "a short name gets no guess"
        );
    }

    #[test]
    fn edits_count_each_kind_once() {
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(edits("abc", "abc"), 0);
        assert_eq!(edits("abc", "acb"), 1);
        assert_eq!(edits("kitten", "sitting"), 3);
    }
}
