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
}

/** Something the host must do, from `pollOutput()`. */
export type Output =
  | { kind: "send"; conn: number; frame: string }
  | { kind: "ping"; conn: number }
  /** Close with `code`; 1006 means drop without a close frame. Report `closed()` afterwards. */
  | { kind: "close"; conn: number; code: number }
  | ({ kind: "respond"; req: number } & HttpAnswer)
  /** Make `writes` durable (in order, atomically), then call `persisted(now, batch)`. */
  | { kind: "persist"; batch: number; writes: Write[] }
  /** Call `drained(now, conn)` once what was sent to `conn` so far is written. */
  | { kind: "wantDrained"; conn: number };

/** One durable mutation; a stored log of these rebuilds an engine. */
export type Write =
  | { createThread: { threadId: string; parentThreadId: string | null; createdAt: string } }
  | { setTitle: { threadId: string; title: string | null } }
  | { appendEvent: { threadId: string; seq: number; idempotencyKey: string | null; event: Record<string, unknown> } }
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
}
"#;
