// Types of the worker module (index.mjs, host.mjs, storage.mjs, node.mjs).
// The engine's own types (Output, ReadQuery, Batch, ThreadRecord, Write,
// HttpAnswer, Limits) are in ../pkg/bubble_wasm.d.ts.

import type { Batch, Engine, HttpAnswer, Limits, ReadQuery } from '../pkg/bubble_wasm.js';

type MaybePromise<T> = T | PromiseLike<T>;

/**
 * The host's storage, in the shape of Durable Object storage (a DO's
 * `ctx.storage` fits as it is). Each method may return its result or a
 * promise of it. Keys and values (storage.mjs):
 *   t/<threadId>                   the thread record (JSON text)
 *   e/<threadId>/<seq, 16 digits>  an event (JSON text)
 *   k/<threadId>/<key>             the seq appended with idempotency key <key>
 *   c/<parentId>/<childId>         '' (children of a thread)
 */
export interface Storage {
  get(key: string): MaybePromise<unknown>;
  put(key: string, value: unknown): MaybePromise<unknown>;
  put(entries: Record<string, unknown>): MaybePromise<unknown>;
  /** Keys in order from `start` (inclusive) to `end` (exclusive) that begin with `prefix`, at most `limit`. */
  list(options: { prefix?: string; start?: string; end?: string; limit?: number }): MaybePromise<Map<string, unknown>>;
}

/** A Map-backed Storage that answers synchronously (the default). */
export class MemoryStorage implements Storage {
  get(key: string): unknown;
  put(key: string, value: unknown): void;
  put(entries: Record<string, unknown>): void;
  list(options?: { prefix?: string; start?: string; end?: string; limit?: number }): Map<string, unknown>;
}

/** Answers a `read` output's query from `storage`: `done(null, json)` with the JSON for `readDone`, or `done(error)`. */
export function answerRead(storage: Storage, query: ReadQuery, done: (err: unknown, json?: string) => void): void;

/**
 * Applies `persist` outputs' writes in order, each thread's group only if it
 * is still at its `expect` and none of its idempotency keys is taken:
 * `done(null, conflicts)` with the refused thread ids per batch, or `done(error)`.
 */
export function commitBatches(storage: Storage, batches: Batch[], done: (err: unknown, conflicts?: string[][]) => void): void;

/** The host's view of one socket, supplied by a runtime adapter. */
export interface HostSocket {
  send(text: string): void;
  ping(): void;
  /** Closes with `code`; without one, drops the connection with no close frame. */
  close(code?: number): void;
  /** Frames handed to `send` but not yet written. */
  queued(): number;
  /** Calls back once everything sent so far has been written. */
  flushed(callback: () => void): void;
}

/** What the adapter reports about the peer. */
export interface HostConnection {
  id: number;
  text(data: string): void;
  binary(bytes: Uint8Array): void;
  pong(): void;
  closed(): void;
}

export interface HostOptions {
  /** JSON config with the keys of bubble.toml. */
  config?: Record<string, unknown>;
  seed?: number;
  storage?: Storage;
  now?: () => number;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
  defer?: (fn: () => void) => void;
  onError?: (err: unknown) => void;
}

export class BubbleHost {
  static create(engine: typeof Engine, options?: HostOptions): BubbleHost;
  constructor(engine: Engine, options?: HostOptions);
  readonly wsPath: string;
  readonly limits: Limits;
  handleHttp(request: Request): Promise<Response>;
  request(
    req: { method: string; path: string; query?: string; authorization?: string; idempotencyKey?: string; body?: Uint8Array },
    onAnswer: (answer: HttpAnswer) => void,
  ): void;
  channelHandshake(appKey: string | null): Response | null;
  /** Another engine over the same storage committed to `threadId` (for a broker between engines). */
  changed(threadId: string, headSeq: number, version: string): void;
  openThreads(socket: HostSocket, token: string | null): HostConnection;
  openChannels(socket: HostSocket, appKey: string, protocol2: boolean): HostConnection;
  shutdown(): void;
}

export interface Bubble {
  host: BubbleHost;
  fetch(request: Request): Promise<Response>;
}

export function loadEngine(module?: WebAssembly.Module | BufferSource): Promise<typeof Engine>;
export function createBubble(options?: HostOptions & { wasm?: WebAssembly.Module | BufferSource }): Promise<Bubble>;
export function isEngineRoute(path: string): boolean;
export function bearerToken(header: string | null | undefined): string | null;

declare const worker: {
  fetch(request: Request, env?: { BUBBLE_CONFIG?: string | Record<string, unknown>; BUBBLE_WASM?: WebAssembly.Module }): Promise<Response>;
};
export default worker;
