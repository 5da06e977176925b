//! Roles, capabilities and the one function that decides access (SPEC §3).

mod capability;

pub use capability::{Capability, Role};
