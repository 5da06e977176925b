// Types of the worker module (index.mjs, host.mjs, node.mjs). The engine's
// own types (Output, Write, HttpAnswer, Limits) are in ../pkg/bubble_wasm.d.ts.

import type { Engine, HttpAnswer, Limits, Write } from '../pkg/bubble_wasm.js';

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
  static create(engine: typeof Engine, options?: HostOptions): Promise<BubbleHost>;
  constructor(engine: Engine, options?: HostOptions);
  readonly wsPath: string;
  readonly limits: Limits;
  handleHttp(request: Request): Promise<Response>;
  request(
    req: { method: string; path: string; query?: string; authorization?: string; idempotencyKey?: string; body?: Uint8Array },
    onAnswer: (answer: HttpAnswer) => void,
  ): void;
  channelHandshake(appKey: string | null): Response | null;
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
