//! Hand-written TypeScript types for the plain objects the engine returns,
//! emitted into the generated `bubble_wasm.d.ts`.

use wasm_bindgen::prelude::wasm_bindgen;

#[wasm_bindgen(typescript_custom_section)]
const OUTPUT_TYPES: &str = r#"
/** An answer to an HTTP request, or a refused `/socket` handshake. */
export interface HttpAnswer {
  status: number;
  contentType: "application/json" | "text/plain; charset=utf-8" | "text/plain; version=0.0.4; charset=utf-8";
  body: string;
  /** Seconds, for the `Retry-After` header. */
  retryAfter?: number;
  /** Further headers (CORS), `[name, value]` with lower-case names. */
  headers?: [string, string][];
}

/** Something the host must do, from `pollOutput()`. */
export type Output =
  | { kind: "send"; conn: number; frame: string }
  /** Send `frame` to each of `conns`, in that order, as one `send` each would. */
  | { kind: "sendAll"; conns: number[]; frame: string }
  | { kind: "ping"; conn: number }
  /** Close with `code`; `null`: drop the connection without a close frame. Report `closed()` afterwards. */
  | { kind: "close"; conn: number; code: number | null }
  | ({ kind: "respond"; req: number } & HttpAnswer)
  /** Answer `query` from storage, then `readDone(now, read, json)` or `readFailed(now, read, message)`; in any order. */
  | { kind: "read"; read: number; query: ReadQuery }
  /**
   * Make `writes` durable, each thread's group only if the thread is still
   * at `expect`, then `persisted(now, batch)` or `persistFailed(now, batch,
   * refusedThreadIds)`; batches are reported in order.
   */
  | { kind: "persist"; batch: number; writes: Batch }
  /** Call `drained(now, conn)` once what was sent to `conn` so far is written. */
  | { kind: "wantDrained"; conn: number }
  /**
   * GET the JWKS at `keyUrl`, then `keysLoaded(now, document)` or
   * `keysFailed(now)` (only for `auth.jwks.url`; an inline set never asks).
   */
  | { kind: "fetchKeys" };

/**
 * What the engine asks storage for. Each query's answer (the JSON passed to
 * `readDone`) names its kind: `{"events":[<event>…]}` (seqs from `fromSeq`
 * through `throughSeq`, ascending, at most `limit`), `{"event":<event>|null}`
 * (the event appended with `key`), `{"thread":<record>|null}`,
 * `{"threads":[<record>…]}` (in id order after `after`: the children of
 * `parent`, or every thread when it is null). `<event>` is an event's JSON
 * text as `appendEvent.event` carried it; `<record>` a `ThreadRecord`.
 */
export type ReadQuery =
  | { kind: "events"; threadId: string; fromSeq: number; throughSeq: number; limit: number }
  | { kind: "idempotent"; threadId: string; key: string }
  | { kind: "thread"; threadId: string }
  | { kind: "threads"; parent: string | null; after: string | null; limit: number };

/** A `persist` output's writes, grouped by thread; each group commits or is refused whole. */
export interface Batch {
  threads: ThreadWrites[];
}

export interface ThreadWrites {
  threadId: string;
  /** The thread's `{headSeq, version}` the writes were decided on; `null`: it must not exist yet. */
  expect: { headSeq: number; version: string } | null;
  /** The thread's whole record once the writes are applied. */
  record: ThreadRecord;
  writes: Write[];
}

/** One thread's durable metadata. `version` is an opaque token (a 63-bit integer, as a string). */
export interface ThreadRecord {
  threadId: string;
  parentThreadId: string | null;
  title: string | null;
  createdAt: string;
  headSeq: number;
  version: string;
  grants: [principalId: string, role: Role][];
  participants: { principalId: string; role: Role; joinedAt: string }[];
}

/** One durable mutation. An appended event is its JSON text, to be stored as it is. */
export type Write =
  | { createThread: { threadId: string; parentThreadId: string | null; createdAt: string } }
  | { setTitle: { threadId: string; title: string | null } }
  | { appendEvent: { threadId: string; seq: number; idempotencyKey: string | null; event: string } }
  | { putGrant: { threadId: string; principalId: string; role: Role } }
  | { deleteGrant: { threadId: string; principalId: string } }
  | { putParticipant: { threadId: string; participant: { principalId: string; role: Role; joinedAt: string } } }
  | { deleteParticipant: { threadId: string; principalId: string } };

export type Role = "owner" | "thread_manager" | "member" | "reader";

/** The engine's limits, with the keys of bubble.toml's `[limits]`. */
export interface Limits {
  max_event_bytes: number;
  max_ws_frame_bytes: number;
  max_subscriptions: number;
  frame_rate: number;
  frame_rate_window_ms: number;
  outbound_queue_frames: number;
  backlog_page: number;
  max_channels: number;
  max_channel_message_bytes: number;
  max_publish_data_bytes: number;
  command_rate: number;
  command_rate_window_ms: number;
  idempotency_retention_ms: number;
  http_rate: number;
  http_rate_window_ms: number;
  max_connections: number;
  max_connections_per_principal: number;
  webhook_batch_ms: number;
  webhook_batch_events: number;
}
"#;
