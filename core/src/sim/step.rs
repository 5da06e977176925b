//! The steps of a simulated run and how a seed draws them.

use std::fmt;

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Where a run's choices come from: a seed's generator ([`Rng`]), or the
/// bytes of a fuzzer's input ([`Bytes`]).
pub(crate) trait Choices {
    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64;

    /// A small number in `0..n`.
    fn pick(&mut self, n: u8) -> u8 {
        u8::try_from(self.below(u64::from(n))).unwrap_or(0)
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The simulator's seeded generator: every choice of a run comes from it.
pub(crate) struct Rng(ChaCha8Rng);

impl Rng {
    /// A generator drawing from `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(ChaCha8Rng::seed_from_u64(seed))
    }
}

impl Choices for Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n.max(1)
    }
}

/// Choices read from bytes: one byte per choice of fewer than 257
/// options, two (big-endian) for larger ones; zeros once they run out.
pub(crate) struct Bytes<'a> {
    bytes: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// Choices read from `bytes`, in order.
    pub(crate) fn new(bytes: &'a [u8]) -> Bytes<'a> {
        Bytes { bytes }
    }

    /// Whether every byte has been read.
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn byte(&mut self) -> u64 {
        match self.bytes.split_first() {
            Some((first, rest)) => {
                self.bytes = rest;
                u64::from(*first)
            }
            None => 0,
        }
    }
}

impl Choices for Bytes<'_> {
    fn below(&mut self, n: u64) -> u64 {
        let raw = if n <= 256 {
            self.byte()
        } else {
            (self.byte() << 8) | self.byte()
        };
        raw % n.max(1)
    }
}

/// `/v1/ws` client slots.
pub(crate) const WS_SLOTS: u8 = 8;
/// `/socket` client slots.
pub(crate) const CHANNEL_SLOTS: u8 = 6;
/// Threads the run works on.
pub(crate) const THREADS: u8 = 3;
/// Idempotency keys per thread (and per app for publications).
pub(crate) const KEYS: u8 = 3;

/// One thing that happens in a run: a client acts, or the simulated host
/// completes, delays, fails or reorders something. Every field is a choice
/// interpreted against the state when the step runs (a slot that holds no
/// connection, a node with nothing pending: the step does nothing), so any
/// subset of a run's steps is itself a valid run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A `/v1/ws` client connects to `node` as principal `who`.
    WsOpen {
        /// The client slot.
        slot: u8,
        /// The node it connects to.
        node: u8,
        /// The principal (index into the run's principals).
        who: u8,
    },
    /// The client in `slot` disconnects.
    WsClose {
        /// The client slot.
        slot: u8,
    },
    /// `thread.subscribe`; `from` 0 omits `fromSeq`.
    WsSubscribe {
        /// The client slot.
        slot: u8,
        /// The thread.
        thread: u8,
        /// The `fromSeq`, 0 for none.
        from: u8,
    },
    /// `thread.unsubscribe`.
    WsUnsubscribe {
        /// The client slot.
        slot: u8,
        /// The thread.
        thread: u8,
    },
    /// `thread.append` of a `run_started` event.
    WsAppend {
        /// The client slot.
        slot: u8,
        /// The thread.
        thread: u8,
    },
    /// `POST /v1/threads/:id/events`; `key` 0 sends no `Idempotency-Key`.
    Append {
        /// The node asked.
        node: u8,
        /// The caller.
        who: u8,
        /// The thread.
        thread: u8,
        /// The key, 0 for none.
        key: u8,
    },
    /// `GET /v1/threads/:id/events?fromSeq=&limit=`.
    History {
        /// The node asked.
        node: u8,
        /// The caller.
        who: u8,
        /// The thread.
        thread: u8,
        /// The `fromSeq`.
        from: u8,
        /// The `limit`.
        limit: u8,
    },
    /// `POST /v1/threads` of one of the run's thread ids.
    Create {
        /// The node asked.
        node: u8,
        /// The caller.
        who: u8,
        /// The thread.
        thread: u8,
    },
    /// The admin grants a role (`role` 4 revokes).
    Grant {
        /// The node asked.
        node: u8,
        /// The thread.
        thread: u8,
        /// The grantee.
        who: u8,
        /// The role, 4 to revoke.
        role: u8,
    },
    /// A `/socket` client connects.
    ChannelOpen {
        /// The client slot.
        slot: u8,
        /// The node it connects to.
        node: u8,
        /// Without `protocol=2`.
        legacy: bool,
    },
    /// The `/socket` client disconnects.
    ChannelClose {
        /// The client slot.
        slot: u8,
    },
    /// Subscribes to a public channel.
    ChannelSubscribe {
        /// The client slot.
        slot: u8,
        /// The channel.
        channel: u8,
    },
    /// Authorizes and joins the presence channel as the slot's user.
    PresenceJoin {
        /// The client slot.
        slot: u8,
    },
    /// Leaves the presence channel.
    PresenceLeave {
        /// The client slot.
        slot: u8,
    },
    /// `POST /api/apps/:app/events`; `key` 0 sends no `Idempotency-Key`.
    Publish {
        /// The node asked.
        node: u8,
        /// The channel.
        channel: u8,
        /// The key, 0 for none.
        key: u8,
    },
    /// The store answers one pending read of `node` (any of them), or fails it.
    Read {
        /// The node.
        node: u8,
        /// Which pending read.
        pick: u8,
        /// Fail it as unavailable.
        fail: bool,
    },
    /// The host commits the first `count` pending batches of `node` in one
    /// group commit and reports them; `unavailable`: the store could not be
    /// reached, nothing was applied, and every group is reported refused
    /// (what the native host does).
    Persist {
        /// The node.
        node: u8,
        /// How many batches.
        count: u8,
        /// The store is unreachable for this commit.
        unavailable: bool,
    },
    /// Another writer changes the thread's version behind every engine's back.
    SecondWriter {
        /// The thread.
        thread: u8,
        /// Whether the change is announced (late, through the broker).
        announce: bool,
    },
    /// The broker delivers the next message from `from` to `to` (a
    /// `threadChanged` may be dropped: delivered never).
    Relay {
        /// The sender (the node count: the second writer).
        from: u8,
        /// The receiver.
        to: u8,
        /// Drop it if it is a thread change.
        drop: bool,
    },
    /// The broker settles one pending idempotency-key claim.
    Claim {
        /// The node.
        node: u8,
        /// Which claim.
        pick: u8,
    },
    /// A socket reports it drained its queue.
    Drain {
        /// The node.
        node: u8,
        /// Which socket waiting for it.
        pick: u8,
    },
    /// The `/v1/ws` client in `slot` stops reading (no drains, no pongs), or resumes.
    Stall {
        /// The client slot.
        slot: u8,
    },
    /// Time jumps to the earliest engine deadline, which fires.
    Time,
    /// The broker reconnected: `node` rechecks its subscribed threads.
    Recheck {
        /// The node.
        node: u8,
    },
    /// `node` crashes and restarts over the same store; the first `keep` of
    /// its pending batches had been committed without being reported.
    Restart {
        /// The node.
        node: u8,
        /// How many pending batches had landed.
        keep: u8,
    },
    /// Everything pending completes; the eventual invariants are checked.
    Settle,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl Step {
    /// Draws the next step.
    pub(crate) fn draw(rng: &mut impl Choices) -> Step {
        let slot = rng.pick(WS_SLOTS);
        let ch = rng.pick(CHANNEL_SLOTS);
        let node = rng.pick(8);
        let thread = rng.pick(THREADS);
        let who = rng.pick(4);
        let roll = rng.below(1000);
        match roll {
            0..=39 => Step::WsOpen { slot, node, who },
            40..=54 => Step::WsClose { slot },
            55..=119 => Step::WsSubscribe {
                slot,
                thread,
                from: rng.pick(12),
            },
            120..=144 => Step::WsUnsubscribe { slot, thread },
            145..=199 => Step::WsAppend { slot, thread },
            200..=279 => Step::Append {
                node,
                who,
                thread,
                key: rng.pick(KEYS + 1),
            },
            280..=314 => Step::History {
                node,
                who,
                thread,
                from: rng.pick(12),
                limit: rng.pick(5),
            },
            315..=344 => Step::Create { node, who, thread },
            345..=374 => Step::Grant {
                node,
                thread,
                who,
                role: rng.pick(5),
            },
            375..=394 => Step::ChannelOpen {
                slot: ch,
                node,
                legacy: rng.chance(30),
            },
            395..=404 => Step::ChannelClose { slot: ch },
            405..=419 => Step::ChannelSubscribe {
                slot: ch,
                channel: rng.pick(2),
            },
            420..=439 => Step::PresenceJoin { slot: ch },
            440..=449 => Step::PresenceLeave { slot: ch },
            450..=479 => Step::Publish {
                node,
                channel: rng.pick(2),
                key: rng.pick(KEYS + 1),
            },
            480..=639 => Step::Read {
                node,
                pick: rng.pick(8),
                fail: rng.chance(5),
            },
            640..=759 => Step::Persist {
                node,
                count: 1 + rng.pick(3),
                unavailable: rng.chance(4),
            },
            760..=774 => Step::SecondWriter {
                thread,
                announce: rng.chance(50),
            },
            775..=874 => Step::Relay {
                from: rng.pick(8),
                to: node,
                drop: rng.chance(5),
            },
            875..=899 => Step::Claim {
                node,
                pick: rng.pick(4),
            },
            900..=939 => Step::Drain {
                node,
                pick: rng.pick(4),
            },
            940..=949 => Step::Stall { slot },
            950..=969 => Step::Time,
            970..=979 => Step::Recheck { node },
            980..=984 => Step::Restart {
                node,
                keep: rng.pick(3),
            },
            _ => Step::Settle,
        }
    }
}
