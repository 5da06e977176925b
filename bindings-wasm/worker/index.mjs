// Bubble as an edge-worker module: `export default { fetch(request, env) }`
// over the standard Request/Response APIs, plus WebSocket upgrades for
// runtimes with a `WebSocketPair` (Cloudflare Workers and compatibles).
//
// The engine is the wasm build in ../pkg (wasm-bindgen `--target web`),
// instantiated from `env.BUBBLE_WASM` (a WebAssembly.Module binding) when the
// runtime provides one, from the file next to this module otherwise.
// Configuration comes from `env.BUBBLE_CONFIG` (JSON with the keys of
// bubble.toml, as a string or an object).

import init, * as wasm from '../pkg/bubble_wasm.js';
import { BubbleHost, answerParts, feedSocket, header, toResponse } from './host.mjs';
import { MemoryStorage, answerRead, commitBatches } from './storage.mjs';

export { BubbleHost, MemoryStorage, answerParts, answerRead, commitBatches, header, toResponse };

let ready = null;

/** Instantiates the wasm module once per isolate; resolves to its classes (`Engine`, `Edge`, …). */
export function loadEngine(module) {
  ready ??= (async () => {
    await init({ module_or_path: await (module ?? wasmBytes()) });
    return wasm;
  })();
  return ready;
}

async function wasmBytes() {
  const url = new URL('../pkg/bubble_wasm_bg.wasm', import.meta.url);
  if (url.protocol === 'file:') {
    const { readFile } = await import('node:fs/promises');
    return readFile(url);
  }
  return fetch(url);
}

/**
 * A Bubble over `options` ({config, seed, storage, now, …}, see BubbleHost;
 * `storage` is a Durable Object-shaped storage, in memory when absent)
 * with `fetch(request)`: engine routes, and WebSocket upgrades where the
 * runtime has a `WebSocketPair`.
 */
export async function createBubble(options = {}) {
  const host = BubbleHost.create(await loadEngine(options.wasm), options);
  return {
    host,
    fetch: (request) => route(host, request),
  };
}

// The core's edge says what the request is; this only carries it out.
async function route(host, request) {
  const url = new URL(request.url);
  const parts = { method: request.method, path: url.pathname, query: url.search.slice(1), headers: request.headers };
  const route = host.route(parts);
  const upgrade = host.upgrade(route);
  if (upgrade?.refused) return toResponse(upgrade.refused);
  if (upgrade) return acceptPair(upgrade.open);
  const body = route.kind === 'engine' ? new Uint8Array(await request.arrayBuffer()) : undefined;
  return toResponse(await host.answer(route, { ...parts, body }));
}

// Accepts a WebSocket with the runtime's WebSocketPair. Such runtimes answer
// pings themselves and expose no Pong, so the host's pings are answered here
// to keep the engine's heartbeat satisfied while the runtime holds the socket.
function acceptPair(open) {
  if (typeof globalThis.WebSocketPair !== 'function') {
    return new Response('WebSocket upgrades need a runtime with WebSocketPair.', { status: 426 });
  }
  const [client, server] = Object.values(new globalThis.WebSocketPair());
  server.accept();
  let conn = null;
  const socket = {
    send: (text) => server.send(text),
    ping: () => queueMicrotask(() => conn?.pong()),
    // No way to drop the connection without a close frame here: 1011 instead.
    close: (code) => server.close(code ?? 1011),
    queued: () => 0,
    flushed: (callback) => setTimeout(callback, 0),
  };
  conn = open(socket);
  feedSocket(server, conn);
  return new Response(null, { status: 101, webSocket: client });
}

let bubble = null;

export default {
  /** The worker entry point. */
  async fetch(request, env = {}) {
    bubble ??= createBubble({
      wasm: env.BUBBLE_WASM,
      config: typeof env.BUBBLE_CONFIG === 'string' ? JSON.parse(env.BUBBLE_CONFIG) : env.BUBBLE_CONFIG,
    });
    return (await bubble).fetch(request);
  },
};
