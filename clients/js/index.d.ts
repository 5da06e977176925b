// Types of @bubble/client (src/index.js, src/core.js).

/** A stored thread event: at least its `seq`, `threadId`, `type` and `createdAt`. */
export interface BubbleEvent {
  seq: number;
  threadId: string;
  type: string;
  createdAt: string;
  [field: string]: unknown;
}

/** A page of `GET /v1/threads/:id/events`. */
export interface EventPage {
  events: BubbleEvent[];
  /** The next page's `fromSeq`; `null` on the last page. */
  nextSeq: number | null;
}

/** A run with chunks and no `run_finished` yet, in `GET /v1/threads/:id/messages`. */
export interface ActiveRun {
  runId: string;
  /** The message it streams into. */
  messageId: string;
  /** The seq of its first chunk. */
  fromSeq: number;
}

/** `GET /v1/threads/:id/messages`: AI SDK v6 `UIMessage`s folded through `throughSeq`. */
export interface FoldedMessages {
  messages: Array<{ id: string; role: 'system' | 'user' | 'assistant'; metadata?: unknown; parts: Array<{ type: string; [field: string]: unknown }> }>;
  throughSeq: number;
  activeRuns: ActiveRun[];
}

/**
 * An error the server reported (`not_found`, `forbidden`, …; `unavailable`
 * for an answer that is not the server's JSON), `client_closed` or
 * `unsubscribed`; thrown by `subscribe` and `append` as `client_closed`
 * once the client is closed, and by `subscribe` as `already_subscribed`
 * (one subscription per thread, as on the wire) or `invalid_request`
 * (`fromSeq` below 1).
 */
export class BubbleError extends Error {
  readonly code: string;
  constructor(code: string, message?: string);
}

export type ConnectionState = 'connecting' | 'open' | 'reconnecting' | 'closed';

/** A `state` event: the new state; for `reconnecting`, which attempt and when (epoch ms). */
export interface StateChange {
  type: 'state';
  state: ConnectionState;
  attempt?: number;
  at?: number;
}

export interface ConnectOptions {
  /** The bearer token (sent as `?access_token=` on the socket and `Authorization` on HTTP). */
  token?: string;
  /** Called for a fresh token before every reconnection and after a 401 on an append. */
  getToken?: () => string | null | Promise<string | null>;
  /** A WebSocket constructor; default `globalThis.WebSocket`, else the `ws` package. */
  WebSocket?: unknown;
  /** A fetch implementation; default `globalThis.fetch`. */
  fetch?: typeof fetch;
  /** The seed for jitter and idempotency keys (default: random). */
  seed?: bigint;
  /** Reconnection backoff: ceilings `min(capMs, baseMs * 2^attempt)`, half of it jitter. */
  backoff?: { baseMs?: number; capMs?: number };
}

/**
 * A live subscription: a callback, an async iterator, or both (with a
 * callback, an iterator yields the events from when it was started).
 */
export interface Subscription extends AsyncIterable<BubbleEvent> {
  /**
   * Resolves with `throughSeq` once every event up to it was delivered;
   * rejects with a `BubbleError` if the subscription ends first: the
   * server's reason (`not_found`…), `unsubscribed` or `client_closed`.
   */
  readonly caughtUp: Promise<number>;
  /** Stops the subscription; iterators end. */
  unsubscribe(): void;
}

export interface Thread {
  readonly id: string;
  /** Follows the thread from `fromSeq` (default 1; past the head: live events only): each event once, in seq order, across reconnects. */
  subscribe(options?: { fromSeq?: number }, onEvent?: (event: BubbleEvent) => void): Subscription;
  /** Appends an event (queued while offline, retried with one idempotency key: the event's `idempotencyKey` when set); resolves with the stored event. */
  append(event: Record<string, unknown>): Promise<BubbleEvent>;
  /** The thread's AI SDK messages folded by the server (`GET /v1/threads/:id/messages`). */
  messages(): Promise<FoldedMessages>;
  /** The thread's history, page by page. */
  history(options?: { fromSeq?: number; limit?: number }): AsyncIterable<EventPage>;
  /** A scoped error about this thread. */
  on(name: 'error', listener: (error: BubbleError) => void): () => void;
  /** The server ended the subscription (`resubscribing`: the client subscribes again). */
  on(name: 'closed', listener: (closed: { thread: string; reason: string; resubscribing: boolean }) => void): () => void;
}

export interface Connection {
  readonly state: ConnectionState;
  thread(id: string): Thread;
  on(name: 'state', listener: (change: StateChange) => void): () => void;
  /** A connection-level (unscoped) error frame. */
  on(name: 'error', listener: (error: BubbleError) => void): () => void;
  /** Closes for good: pending appends reject with `client_closed`, iterators end. */
  close(): void;
}

/** Connects to the server at its HTTP base URL (e.g. `https://bubble.example.com`). */
export function connect(url: string | URL, options?: ConnectOptions): Promise<Connection>;

/** One input of the client state machine (the same as the Rust core's `ClientInput`). */
export type ClientInput =
  | { type: 'subscribe'; thread: string; fromSeq: number }
  | { type: 'unsubscribe'; thread: string }
  | { type: 'append'; append: number; thread: string; event: Record<string, unknown> }
  | { type: 'opened' }
  | { type: 'frame'; text: string }
  | { type: 'closed' }
  | { type: 'token'; token: string | null }
  | { type: 'append_done'; append: number; status: number; body: string }
  | { type: 'append_failed'; append: number }
  | { type: 'close' }
  | { type: 'tick' };

/** One output of the client state machine (the same as the Rust core's `ClientOutput`). */
export type ClientOutput =
  | { type: 'state'; state: ConnectionState; attempt?: number; at?: number }
  | { type: 'need_token' }
  | { type: 'connect'; token: string | null }
  | { type: 'disconnect' }
  | { type: 'send'; frame: string }
  | { type: 'post'; append: number; thread: string; idempotencyKey: string; body: string; token: string | null }
  | { type: 'event'; thread: string; seq: number; event: BubbleEvent }
  | { type: 'caught_up'; thread: string; throughSeq: number }
  | { type: 'appended'; append: number; thread: string; event: BubbleEvent }
  | { type: 'append_rejected'; append: number; thread: string; code: string; message: string }
  | { type: 'thread_error'; thread: string; code: string; message: string }
  | { type: 'subscription_closed'; thread: string; reason: string; resubscribing: boolean }
  | { type: 'connection_error'; code: string; message: string };

/** The sans-IO client state machine, as in the Rust core. */
export class ClientCore {
  constructor(
    config: { token?: string | null; refreshToken?: boolean; backoffBaseMs?: number; backoffCapMs?: number },
    seed: bigint,
  );
  readonly token: string | null;
  position(thread: string): number | undefined;
  handle(now: number, input: ClientInput): void;
  pollOutput(): ClientOutput | undefined;
  pollTimeout(): number | undefined;
}
