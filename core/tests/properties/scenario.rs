//! The random scenarios: operations over a few threads, principals and
//! connections, and the prelude that creates the initial threads.

use proptest::prelude::*;

use crate::common::ADMIN;

pub(crate) const THREADS: usize = 3;
/// Principals p0..p3; index 4 is the admin.
pub(crate) const PRINCIPALS: usize = 5;
pub(crate) const ADMIN_INDEX: usize = 4;
/// The principal of each connection (p0 holds two).
pub(crate) const CONNS: [usize; 4] = [0, 1, 2, 0];
pub(crate) const ROLES: [&str; 4] = ["owner", "thread_manager", "member", "reader"];

pub(crate) fn thread_name(t: usize) -> String {
    format!("t{t}")
}

pub(crate) fn principal_name(p: usize) -> String {
    if p == ADMIN_INDEX {
        ADMIN.to_owned()
    } else {
        format!("p{p}")
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Op {
    Create {
        thread: usize,
        parent: Option<usize>,
    },
    HttpAppend {
        thread: usize,
        by: usize,
        key: Option<u8>,
    },
    WsAppend {
        conn: usize,
        thread: usize,
        key: Option<u8>,
    },
    Reconnect {
        conn: usize,
    },
    Subscribe {
        conn: usize,
        thread: usize,
        from_seq: u64,
    },
    Unsubscribe {
        conn: usize,
        thread: usize,
    },
    Grant {
        thread: usize,
        principal: usize,
        role: Option<usize>,
    },
    Persist {
        batches: usize,
    },
    Drain {
        conn: usize,
    },
    /// `GET /v1/threads/:id/events?fromSeq=&limit=` by principal `by`.
    History {
        thread: usize,
        by: usize,
        from_seq: u64,
        limit: u64,
    },
    /// The engine crashes (after every batch it issued landed, before it
    /// heard so) and a new one starts over the reopened store.
    Restart,
}

pub(crate) fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0..THREADS, proptest::option::of(0..THREADS))
            .prop_map(|(thread, parent)| Op::Create { thread, parent: parent.filter(|p| *p != thread) }),
        8 => (0..THREADS, 0..PRINCIPALS, proptest::option::weighted(0.4, 0..3u8))
            .prop_map(|(thread, by, key)| Op::HttpAppend { thread, by, key }),
        4 => (0..CONNS.len(), 0..THREADS, proptest::option::weighted(0.4, 0..3u8))
            .prop_map(|(conn, thread, key)| Op::WsAppend { conn, thread, key }),
        1 => (0..CONNS.len()).prop_map(|conn| Op::Reconnect { conn }),
        4 => (0..CONNS.len(), 0..THREADS, 1..10u64)
            .prop_map(|(conn, thread, from_seq)| Op::Subscribe { conn, thread, from_seq }),
        2 => (0..CONNS.len(), 0..THREADS).prop_map(|(conn, thread)| Op::Unsubscribe { conn, thread }),
        2 => (0..THREADS, 0..ADMIN_INDEX, proptest::option::weighted(0.6, 0..ROLES.len()))
            .prop_map(|(thread, principal, role)| Op::Grant { thread, principal, role }),
        2 => (0..4usize).prop_map(|batches| Op::Persist { batches }),
        2 => (0..CONNS.len()).prop_map(|conn| Op::Drain { conn }),
        2 => (0..THREADS, 0..PRINCIPALS, 1..10u64, 1..4u64)
            .prop_map(|(thread, by, from_seq, limit)| Op::History { thread, by, from_seq, limit }),
        1 => Just(Op::Restart),
    ]
}

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub(crate) hold_persistence: bool,
    pub(crate) hold_drains: bool,
    /// `Some(seed)`: store reads complete in a shuffled order.
    pub(crate) shuffle_reads: Option<u64>,
    pub(crate) backlog_page: usize,
    pub(crate) ops: Vec<Op>,
}

/// Threads `t0`, `t1` (a child of `t0`) and `t2` exist from the start, and
/// each principal starts with a random role (or none) on each, so most
/// random ops act on readable threads.
pub(crate) fn prelude(initial: &[Option<usize>]) -> Vec<Op> {
    let mut ops = vec![
        Op::Create {
            thread: 0,
            parent: None,
        },
        Op::Create {
            thread: 1,
            parent: Some(0),
        },
        Op::Create {
            thread: 2,
            parent: None,
        },
    ];
    for (i, role) in initial.iter().enumerate() {
        if role.is_some() {
            ops.push(Op::Grant {
                thread: i % THREADS,
                principal: i / THREADS,
                role: *role,
            });
        }
    }
    ops
}

pub(crate) fn scenario() -> impl Strategy<Value = Scenario> {
    let initial = proptest::collection::vec(
        proptest::option::weighted(0.6, 0..ROLES.len()),
        THREADS * ADMIN_INDEX,
    );
    (
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(any::<u64>()),
        1..4usize,
        initial,
        proptest::collection::vec(op(), 1..80),
    )
        .prop_map(
            |(hold_persistence, hold_drains, shuffle_reads, backlog_page, initial, ops)| Scenario {
                hold_persistence,
                hold_drains,
                shuffle_reads,
                backlog_page,
                ops: prelude(&initial).into_iter().chain(ops).collect(),
            },
        )
}

/// A fixed interleaving that exercises every op kind, so a plain failure
/// is easier to read than a shrunk random case.
pub(crate) fn fixed_interleaving() -> Vec<Op> {
    use Op::*;
    vec![
        Create {
            thread: 0,
            parent: None,
        },
        Grant {
            thread: 0,
            principal: 0,
            role: Some(2),
        },
        HttpAppend {
            thread: 0,
            by: 0,
            key: Some(1),
        },
        Subscribe {
            conn: 0,
            thread: 0,
            from_seq: 1,
        },
        HttpAppend {
            thread: 0,
            by: 0,
            key: Some(1),
        },
        WsAppend {
            conn: 0,
            thread: 0,
            key: Some(1),
        },
        Reconnect { conn: 1 },
        Create {
            thread: 1,
            parent: Some(0),
        },
        Subscribe {
            conn: 3,
            thread: 1,
            from_seq: 5,
        },
        Persist { batches: 2 },
        Grant {
            thread: 0,
            principal: 1,
            role: Some(3),
        },
        Subscribe {
            conn: 1,
            thread: 1,
            from_seq: 1,
        },
        HttpAppend {
            thread: 1,
            by: 0,
            key: None,
        },
        Subscribe {
            conn: 0,
            thread: 0,
            from_seq: 2,
        },
        Drain { conn: 0 },
        Unsubscribe { conn: 0, thread: 0 },
        Grant {
            thread: 0,
            principal: 1,
            role: None,
        },
        HttpAppend {
            thread: 1,
            by: 4,
            key: None,
        },
        Subscribe {
            conn: 0,
            thread: 0,
            from_seq: 3,
        },
        WsAppend {
            conn: 1,
            thread: 1,
            key: None,
        },
        History {
            thread: 0,
            by: 0,
            from_seq: 1,
            limit: 2,
        },
        History {
            thread: 1,
            by: 2,
            from_seq: 1,
            limit: 3,
        },
        Restart,
        HttpAppend {
            thread: 0,
            by: 0,
            key: Some(1),
        },
        Subscribe {
            conn: 1,
            thread: 1,
            from_seq: 1,
        },
        HttpAppend {
            thread: 1,
            by: 0,
            key: None,
        },
        History {
            thread: 1,
            by: 1,
            from_seq: 2,
            limit: 3,
        },
    ]
}

/// The fixed interleaving with every delay setting: (persistence and
/// drains held, reads shuffled).
pub(crate) fn fixed_scenarios() -> Vec<Scenario> {
    [(false, None), (true, None), (true, Some(3))]
        .into_iter()
        .map(|(hold, shuffle_reads)| Scenario {
            hold_persistence: hold,
            hold_drains: hold,
            shuffle_reads,
            backlog_page: 1,
            ops: fixed_interleaving(),
        })
        .collect()
}
