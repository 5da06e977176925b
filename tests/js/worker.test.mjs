// The worker module on its own: the edge entry point configured from `env`,
// and persistence through a storage the host supplies ("acknowledged means
// durable"; a stored log restarts an engine with its history).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import worker, { createBubble } from '../../bindings-wasm/worker/index.mjs';
import { http, wsBase, WsClient } from './lib/clients.mjs';
import { EDGE_CONFIG } from './lib/edge-checks.mjs';
import { CONFIG, TOKENS, startWorker } from './lib/hosts.mjs';

const json = (method, path, body) =>
  new Request(`https://bubble.example${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKENS.alice}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

test('the default export answers engine routes from env config', async () => {
  const env = { BUBBLE_CONFIG: JSON.stringify(CONFIG) };
  const created = await worker.fetch(json('POST', '/v1/threads', { threadId: 'edge-1' }), env);
  assert.equal(created.status, 201);
  assert.equal(created.headers.get('content-type'), 'application/json');
  assert.equal((await created.json()).threadId, 'edge-1');
  const missing = await worker.fetch(new Request('https://bubble.example/elsewhere'), env);
  assert.equal(missing.status, 404);
  const upgrade = await worker.fetch(new Request('https://bubble.example/socket?appKey=nope', { headers: { upgrade: 'websocket' } }), env);
  assert.equal(upgrade.status, 404);
  assert.equal(await upgrade.text(), 'Application not found');
});

test('a slow consumer gets what its queue held, never the frame that overflowed it', async (t) => {
  // The Node host hands each frame to the socket as it is sent, and the
  // engine queues a whole backlog page in one turn: with a queue of 4, the
  // subscription's first four frames go out and the fifth closes it (1013).
  const host = await startWorker(EDGE_CONFIG);
  t.after(() => host.stop());
  const alice = TOKENS.alice;
  await http(host.url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'slow-2' } });
  for (let i = 1; i <= 10; i += 1) {
    await http(host.url, 'POST', '/v1/threads/slow-2/events', { token: alice, body: { type: 'run_started', runId: `r-${i}` } });
  }
  const ws = await WsClient.connect(`${wsBase(host.url)}/v1/ws`, { token: alice });
  ws.send({ type: 'thread.subscribe', threadId: 'slow-2', fromSeq: 1 });
  const { code, frames } = await ws.closeCode();
  assert.equal(code, 1013);
  assert.deepEqual(
    frames.map((f) => f.event?.seq ?? f.type),
    ['thread.subscription_opened', 1, 2, 3],
  );
});

test('answers wait for the storage, and its log restarts the engine', async () => {
  const stored = [];
  const pending = [];
  const storage = {
    load: () => stored.slice(),
    append: (batches) =>
      new Promise((resolve) => {
        pending.push(() => {
          for (const b of batches) stored.push(...b.writes);
          resolve();
        });
      }),
  };
  const bubble = await createBubble({ config: CONFIG, seed: 7, storage });
  let answered = false;
  const response = bubble.fetch(json('POST', '/v1/threads', { threadId: 'durable-1' })).then((r) => {
    answered = true;
    return r;
  });
  while (pending.length === 0) await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  assert.equal(answered, false, 'no answer before the write is durable');
  pending.shift()();
  assert.equal((await response).status, 201);

  const append = bubble.fetch(json('POST', '/v1/threads/durable-1/events', { type: 'run_started', runId: 'r-1' }));
  while (pending.length === 0) await new Promise((r) => setImmediate(r));
  pending.shift()();
  assert.equal((await append).status, 201);

  const again = await createBubble({ config: CONFIG, seed: 8, storage });
  const page = await (await again.fetch(json('GET', '/v1/threads/durable-1/events'))).json();
  assert.deepEqual(page.events.map((e) => [e.seq, e.runId]), [[1, 'r-1']]);
});

// A Workers-style runtime, in miniature: a WebSocketPair of two linked
// endpoints (messages wait until the receiving side listens, as they wait
// for the runtime to hand the client end over), and a Response that accepts
// status 101 with a `webSocket`.
class Endpoint extends EventTarget {
  peer = null;
  #inbox = [];
  #listening = false;

  accept() {}

  addEventListener(type, listener) {
    super.addEventListener(type, listener);
    if (type === 'message' && !this.#listening) {
      this.#listening = true;
      for (const data of this.#inbox.splice(0)) this.deliver(data);
    }
  }

  deliver(data) {
    if (!this.#listening) this.#inbox.push(data);
    else queueMicrotask(() => this.dispatchEvent(Object.assign(new Event('message'), { data })));
  }

  send(data) {
    this.peer.deliver(data);
  }

  close(code) {
    queueMicrotask(() => this.peer.dispatchEvent(Object.assign(new Event('close'), { code })));
  }
}

/** Resolves once `list` holds `n` items (bounded by the test runner's timeout). */
function filled(list, n) {
  return new Promise((resolve) => {
    const check = () => (list.length >= n ? resolve() : setImmediate(check));
    check();
  });
}

class WorkersResponse extends Response {
  constructor(body, init = {}) {
    super(init.status === 101 ? null : body, init.status === 101 ? { status: 200 } : init);
    if (init.status === 101) Object.defineProperty(this, 'status', { value: 101 });
    this.webSocket = init.webSocket;
  }
}

test('WebSocket upgrades go through the runtime WebSocketPair', { timeout: 20_000 }, async (t) => {
  const realResponse = globalThis.Response;
  globalThis.WebSocketPair = function WebSocketPair() {
    const a = new Endpoint();
    const b = new Endpoint();
    a.peer = b;
    b.peer = a;
    return { 0: a, 1: b };
  };
  globalThis.Response = WorkersResponse;
  t.after(() => {
    globalThis.Response = realResponse;
    delete globalThis.WebSocketPair;
  });

  const bubble = await createBubble({ config: CONFIG, seed: 9 });
  await bubble.fetch(json('POST', '/v1/threads', { threadId: 'pair-1' }));
  const upgrade = await bubble.fetch(
    new Request('https://bubble.example/v1/ws', { headers: { upgrade: 'websocket', authorization: `Bearer ${TOKENS.alice}` } }),
  );
  assert.equal(upgrade.status, 101);
  const client = upgrade.webSocket;
  const frames = [];
  client.addEventListener('message', (e) => frames.push(JSON.parse(e.data)));
  client.send(JSON.stringify({ type: 'thread.subscribe', threadId: 'pair-1' }));
  client.send(JSON.stringify({ type: 'thread.append', threadId: 'pair-1', event: { type: 'run_started', runId: 'r' } }));
  await filled(frames, 2);
  assert.deepEqual(frames[0], { type: 'thread.subscription_opened', threadId: 'pair-1', throughSeq: 0 });
  assert.equal(frames[1].event.runId, 'r');

  const channels = await bubble.fetch(
    new Request(`https://bubble.example/socket?appKey=${CONFIG.apps[0].key}&protocol=2`, { headers: { upgrade: 'websocket' } }),
  );
  assert.equal(channels.status, 101);
  const packets = [];
  channels.webSocket.addEventListener('message', (e) => packets.push(JSON.parse(e.data)));
  await filled(packets, 1);
  assert.equal(packets[0].event, 'pubb:connection_established');
  client.close(1000);
});
