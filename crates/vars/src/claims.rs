//! The claims of a verified token, as `$jwt_claim_NAME` reads them. The gateway puts them
//! here only once the token's signature, times, issuer and audience have passed: a claim
//! of a token not verified is never a variable (anyone can write `{"sub": "admin"}`).

/// The top-level claims of a verified JWT, each already text: a string as it is, a number
/// or a boolean as JSON writes it, an array's items joined with `,`, an object as compact
/// JSON. Sorted by name, found by a binary search.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claims(Box<[Claim]>);

/// One claim: its name and its text.
pub type Claim = (Box<str>, Box<[u8]>);

impl Claims {
    /// `claims` by name; of a name given twice, the first is kept.
    pub fn new(mut claims: Vec<Claim>) -> Claims {
        claims.sort_by(|a, b| a.0.cmp(&b.0));
        claims.dedup_by(|later, first| later.0 == first.0);
        Claims(claims.into_boxed_slice())
    }

    /// The claim `name`'s text.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        let at = self
            .0
            .binary_search_by(|(known, _)| (**known).cmp(name))
            .ok()?;
        Some(&self.0[at].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_found_by_its_name_and_the_first_of_two_is_kept() {
        let pair = |name: &str, value: &str| (Box::from(name), Box::from(value.as_bytes()));
        let claims = Claims::new(vec![
            pair("sub", "alice"),
            pair("plan", "pro"),
            pair("sub", "mallory"),
        ]);
        assert_eq!(claims.get("sub"), Some(&b"alice"[..]));
        assert_eq!(claims.get("plan"), Some(&b"pro"[..]));
        assert_eq!(claims.get("scope"), None);
    }
}
