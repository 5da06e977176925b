// Types of the worker module (index.mjs, host.mjs, storage.mjs, node.mjs;
// durable.mjs and workerd.mjs, the Cloudflare entry, at the end).
// The engine's own types (Output, ReadQuery, Batch, ThreadRecord, Write,
// HttpAnswer, Limits, Route, Handshake) are in ../pkg/bubble_wasm.d.ts.

import type {
  Batch,
  ChannelHandshake,
  Edge,
  Engine,
  HttpAnswer,
  Limits,
  MonotonicClock,
  ReadQuery,
  Route,
} from '../pkg/bubble_wasm.js';

type MaybePromise<T> = T | PromiseLike<T>;

/** The wasm module's classes a host is built from. */
export interface BubbleWasm {
  Engine: typeof Engine;
  Edge: typeof Edge;
  MonotonicClock: typeof MonotonicClock;
  ChannelHandshake: typeof ChannelHandshake;
}

/** A request's raw parts: path and query (without `?`) as they arrived. */
export interface RequestParts {
  method: string;
  path: string;
  query?: string;
  /** A `Headers`, or a plain object of lower-case names (Node's `req.headers`). */
  headers?: Headers | Record<string, string | string[] | undefined>;
  body?: Uint8Array;
}

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
  /** A Durable Object-shaped storage; a MemoryStorage when absent. */
  storage?: Storage;
  now?: () => number;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
  defer?: (fn: () => void) => void;
  onError?: (err: unknown) => void;
  /** How `auth.jwks.url` is fetched; the runtime's `fetch` when absent. */
  fetch?: typeof fetch;
  /** After each round of outputs: the connections sent to, or that sent a frame (their subscriptions may have moved). */
  onTouched?: (conns: Set<number>) => void;
}

export class BubbleHost {
  static create(wasm: BubbleWasm, options?: HostOptions): BubbleHost;
  constructor(wasm: BubbleWasm, engine: Engine, options?: HostOptions);
  readonly wsPath: string;
  readonly limits: Limits;
  /** What a request is, decided by the core's edge. */
  route(request: RequestParts): Route;
  /** The answer to a request that is not upgraded. */
  answer(route: Route, request?: RequestParts): HttpAnswer | Promise<HttpAnswer>;
  /** A socket route: open it, or send the refusal; `null` for other routes. */
  upgrade(route: Route): { open(socket: HostSocket): HostConnection; refused?: undefined } | { open?: undefined; refused: HttpAnswer } | null;
  /** An engine request below the edge (path and query raw); `onAnswer` gets the answer. */
  request(
    req: { method: string; path: string; query?: string; authorization?: string; idempotencyKey?: string; body?: Uint8Array },
    onAnswer: (answer: HttpAnswer) => void,
  ): void;
  /** Another engine over the same storage committed to `threadId` (for a broker between engines). */
  changed(threadId: string, headSeq: number, version: string): void;
  /** A `/v1/ws` socket that outlived the host that served it, opened again where its subscriptions stood. */
  resume(socket: HostSocket, token: string | null, subscriptions: [string, number][]): HostConnection;
  /** Where a `/v1/ws` connection's subscriptions stand: `[threadId, nextSeq]`; undefined for no such connection. */
  subscriptions(conn: number): [string, number][] | undefined;
  /** The engine's deadline passed (for runtimes whose timer is an alarm). */
  tick(): void;
  /** Resolves once no read, commit or drain is in flight. */
  idle(): Promise<void>;
  shutdown(): void;
}

/** Header `name` of a `Headers` or of a plain object of lower-case names. */
export function header(headers: RequestParts['headers'], name: string): string | undefined;
/** The status, headers and body (null when empty) to write for an answer. */
export function answerParts(answer: HttpAnswer): { status: number; headers: Record<string, string>; body: string | null };
/** An answer as a standard Response. */
export function toResponse(answer: HttpAnswer): Response;

export interface Bubble {
  host: BubbleHost;
  fetch(request: Request): Promise<Response>;
}

export function loadEngine(module?: WebAssembly.Module | BufferSource): Promise<BubbleWasm>;
export function createBubble(options?: HostOptions & { wasm?: WebAssembly.Module | BufferSource }): Promise<Bubble>;

declare const worker: {
  fetch(request: Request, env?: { BUBBLE_CONFIG?: string | Record<string, unknown>; BUBBLE_WASM?: WebAssembly.Module }): Promise<Response>;
};
export default worker;

// durable.mjs and workerd.mjs: Cloudflare Workers with a Durable Object.

/** `env` of the Worker and of the object. */
export interface BubbleEnv {
  /** The JSON config (a string or an object). */
  BUBBLE_CONFIG?: string | Record<string, unknown>;
  /** The object's name when no `namespace` option is given (`default`). */
  BUBBLE_NAMESPACE?: string;
  [binding: string]: unknown;
}

/** The Worker: answers what needs no engine, forwards the rest to the namespace's object. */
export function bubbleWorker(
  wasm: Pick<BubbleWasm, 'Edge'>,
  options?: { binding?: string; namespace?: (request: Request, env: BubbleEnv) => string },
): { fetch(request: Request, env: BubbleEnv): Promise<Response> };
/** The Durable Object class over the wasm classes. */
export function bubbleObject(wasm: Pick<BubbleWasm, 'Engine' | 'Edge' | 'MonotonicClock'>): new (ctx: unknown, env: BubbleEnv) => unknown;
/** Durable Object storage whose puts resolve once durable. */
export function durableStorage(storage: Storage & { sync?(): Promise<void> }): Storage;
/** The config in `env.BUBBLE_CONFIG`. */
export function configOf(env: BubbleEnv): Record<string, unknown>;
