// Types of the worker module (index.mjs, host.mjs, node.mjs). The engine's
// own types (Output, Write, HttpAnswer, Limits, Route) are in ../pkg/bubble_wasm.d.ts.

import type { ChannelHandshake, Edge, Engine, HttpAnswer, Limits, MonotonicClock, Route, Write } from '../pkg/bubble_wasm.js';

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

/** Where `persist` batches go; `append` may return a promise (durable once it resolves). */
export interface Storage {
  load(): Write[] | Promise<Write[]>;
  append(batches: { batch: number; writes: Write[] }[]): void | PromiseLike<void>;
}

/** The host's view of one socket, supplied by a runtime adapter. */
export interface HostSocket {
  send(text: string): void;
  ping(): void;
  close(code: number): void;
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

export class MemoryLog implements Storage {
  load(): Write[];
  append(batches: { batch: number; writes: Write[] }[]): void;
}

export class BubbleHost {
  static create(wasm: BubbleWasm, options?: HostOptions): Promise<BubbleHost>;
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
