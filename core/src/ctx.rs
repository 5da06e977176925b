//! The shared kernel handed to the state machines for one input.

use crate::config::Limits;
use crate::idgen::IdGen;
use crate::ids::Millis;
use crate::metrics::Metrics;
use crate::outbox::Outbox;

/// Shared services for one input: the time, the output queue, ids, metrics
/// and limits.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Millis,
    pub(crate) out: &'a mut Outbox,
    pub(crate) ids: &'a mut IdGen,
    pub(crate) metrics: &'a mut Metrics,
    pub(crate) limits: &'a Limits,
    /// This engine is one node of a cluster ([`crate::Config::cluster`]).
    pub(crate) cluster: bool,
}
