// The two hosts under test, started the same way from the same config: the
// native `bubble` binary (a child process) and the worker module served by
// its Node adapter in this process.

import { WebSocketServer } from 'ws';

import { createBubble } from '../../../bindings-wasm/worker/index.mjs';
import { listen } from '../../../bindings-wasm/worker/node.mjs';
import { CONFIG } from './native.mjs';

export { APP, CONFIG, REPO, TOKENS, startNative, toToml } from './native.mjs';

/** The worker module, served by its Node adapter on an ephemeral port. */
export async function startWorker(config = CONFIG, options = {}) {
  const bubble = await createBubble({ config, seed: 42, ...options });
  const server = await listen(bubble, { WebSocketServer });
  return { name: 'worker', url: server.url, bubble, logs: () => '', stop: () => server.close() };
}
