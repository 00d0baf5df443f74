//! What the pipeline calls to decide whether a request may pass its location's `limit`
//! list, and to settle what it was charged once its answer is known. The arithmetic and
//! the stores are the limiter's (`crate::limit`, pure: it never waits, spawns or speaks
//! to Redis); this layer adds what takes I/O or time:
//!
//! - [`policy`]: a list across zones, local and Redis ones ([`Policy::decide`]);
//! - [`on_error`]: what a Redis zone decides when Redis cannot answer;
//! - [`penalty`]: the penalty box (`ban`), answering a banned key before any zone;
//! - [`settle`]: charges settled by the answer, and the Redis calls made in the
//!   background (refunds of a request a later zone rejected, settlements).
//!
//! Redis itself is spoken to through `crate::shared`.

pub(crate) mod on_error;
pub mod penalty;
pub mod policy;
pub(crate) mod settle;

pub use policy::Policy;
