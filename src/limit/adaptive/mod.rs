//! Controllers that follow an upstream's load: pure functions of `(state, signals, now)`,
//! stepped by a tick in the shell, which reads the signals and writes what they decide
//! where the request path reads it. Nothing here reads a clock.
//!
//! [`gradient`] finds an upstream group's concurrency limit (`max_in_flight = "auto"`).

pub mod gradient;
