//! Roles, capabilities and the one function that decides access (SPEC §3).

mod authorize;
mod capability;

pub use authorize::{authorize, effective_capabilities, Access, Need};
pub use capability::{Capability, CapabilitySet, Role};
