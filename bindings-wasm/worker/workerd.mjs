// The entry for Cloudflare Workers and workerd (wrangler, miniflare): the
// Worker routes every request to a Durable Object, `BubbleObject`, that owns
// the engine (see durable.mjs). workerd refuses Wasm bindings in module
// workers, so the wasm is imported as a module (a `WebAssembly.Module`)
// and the bindings are instantiated from it once per isolate.
//
// Needs the built package next to this folder (`bindings-wasm/build.sh`
// writes ../pkg) and, in the Worker's configuration (wrangler.toml here):
//   a Durable Object binding BUBBLE to the class BubbleObject (SQLite-backed),
//   BUBBLE_CONFIG: the JSON config (keys of bubble.toml; a secret, it holds tokens),
//   BUBBLE_NAMESPACE (optional): the object's name, `default` when unset.

import wasmModule from '../pkg/bubble_wasm_bg.wasm';
import { Edge, Engine, MonotonicClock, initSync } from '../pkg/bubble_wasm.js';
import { bubbleObject, bubbleWorker } from './durable.mjs';

initSync({ module: wasmModule });

const wasm = { Edge, Engine, MonotonicClock };

/** The Durable Object class: one engine per object. */
export const BubbleObject = bubbleObject(wasm);

export default bubbleWorker(wasm);
