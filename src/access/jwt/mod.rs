//! JSON Web Tokens (`auth.jwt`, DESIGN §18): the pure part. [`keys`] reads a JWK set and
//! pins each key to its algorithms, [`token`] checks one token against a set and a
//! location's rules, [`Remembered`] keeps the verdicts, [`provider`] is ring, the
//! signature check under jsonwebtoken.
//!
//! What a token cannot do here: name `alg: none` (jsonwebtoken has no such algorithm),
//! have an HMAC checked with a public key (a key checks the algorithms of its own type
//! only, and shared secrets come from files, never from the network), choose among
//! several keys (one key is chosen by `kid`, or the only one for its `alg`), or put a
//! claim in a variable before it is verified.

pub mod keys;
mod provider;
mod remembered;
pub mod token;

#[cfg(test)]
mod tests;

pub use keys::KeySet;
pub use remembered::Remembered;
pub use token::{Refused, Rules, NO_KEY};

/// Makes ring the signature check of jsonwebtoken (once per process; a second call does
/// nothing). Called before any token is checked.
pub fn install() {
    provider::install();
}
