-- Threads, their events, grants and participants. Every table lives in the
-- store's schema (the connection's search_path), so schemas of one database
-- are independent stores.
--
-- Identifiers compare as bytes (COLLATE "C"): threads are listed in the
-- same order as the engine's ids sort, whatever the database's collation.
-- head_seq and seq are u64 counters far below 2^63; version is an opaque
-- u64 token stored as bigint through `as i64` and read back through
-- `as u64`, which round-trips every value.

CREATE TABLE threads (
    thread_id        text COLLATE "C" PRIMARY KEY,
    parent_thread_id text COLLATE "C",
    title            text,
    created_at       text NOT NULL,
    head_seq         bigint NOT NULL,
    version          bigint NOT NULL
);

-- Children of a thread, in id order.
CREATE INDEX threads_parent ON threads (parent_thread_id, thread_id);

-- Event JSON is kept as text: byte for byte what the engine wrote.
CREATE TABLE events (
    thread_id       text COLLATE "C" NOT NULL REFERENCES threads (thread_id),
    seq             bigint NOT NULL,
    idempotency_key text COLLATE "C",
    json            text NOT NULL,
    PRIMARY KEY (thread_id, seq)
);

CREATE UNIQUE INDEX events_idempotency_key
    ON events (thread_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- grant_order: a grant created or replaced goes last.
CREATE TABLE grants (
    thread_id    text COLLATE "C" NOT NULL REFERENCES threads (thread_id),
    principal_id text COLLATE "C" NOT NULL,
    role         text NOT NULL,
    grant_order  bigint NOT NULL,
    PRIMARY KEY (thread_id, principal_id)
);

-- join_order: a participant keeps its place when its row is replaced.
CREATE TABLE participants (
    thread_id    text COLLATE "C" NOT NULL REFERENCES threads (thread_id),
    principal_id text COLLATE "C" NOT NULL,
    role         text NOT NULL,
    joined_at    text NOT NULL,
    join_order   bigint NOT NULL,
    PRIMARY KEY (thread_id, principal_id)
);
