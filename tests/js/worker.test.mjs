// The worker module on its own: the edge entry point configured from `env`,
// a slow consumer closed as the core's edge decides (a backlog overflowing
// its queue, and a reader that stops reading during live traffic while
// another reads everything), and the storage the
// host supplies ("acknowledged means durable"; a new engine over the same
// storage has the history; reads answered in any order change nothing; a
// refused group is decided again; a failed read answers `internal`).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import worker, { createBubble, MemoryStorage } from '../../bindings-wasm/worker/index.mjs';
import { checks, normalize } from './lib/checks.mjs';
import { http, wsBase, WsClient } from './lib/clients.mjs';
import { EDGE_CONFIG } from './lib/edge-checks.mjs';
import { APP, CONFIG, startWorker, TOKENS } from './lib/hosts.mjs';
import { failing, shuffled } from './lib/storages.mjs';

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

test('Idempotency-Key values that are not printable ASCII are refused', async () => {
  const bubble = await createBubble({ config: CONFIG, seed: 3 });
  // Header values are byte strings: a UTF-8 key arrives one character per byte.
  const utf8 = String.fromCharCode(...new TextEncoder().encode('café'));
  const publish = (key) =>
    bubble.fetch(
      new Request(`https://bubble.example/api/apps/${APP.id}/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${APP.secret}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ channel: 'news', name: 'e' }),
      }),
    );
  for (const key of ['café', utf8, 'a\tb']) {
    const refused = await publish(key);
    assert.equal(refused.status, 400, JSON.stringify(key));
    assert.equal((await refused.json()).code, 'invalid_idempotency_key');
  }
  const append = (key) =>
    bubble.fetch(
      new Request('https://bubble.example/v1/threads/keys-1/events', {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKENS.alice}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ type: 'run_started', runId: 'r-1' }),
      }),
    );
  assert.equal((await bubble.fetch(json('POST', '/v1/threads', { threadId: 'keys-1' }))).status, 201);
  const refused = await append(utf8);
  assert.equal(refused.status, 400);
  assert.equal((await refused.json()).error.code, 'invalid_request');
  assert.equal((await publish('order-1042-created')).status, 202);
  const appended = await append('key-1');
  assert.equal(appended.status, 201);
  assert.equal((await appended.json()).event.seq, 1);
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

test('a reader that stops reading during live traffic is closed with 1013; another gets every seq once', { timeout: 120_000 }, async (t) => {
  // Both subscribe before any event exists, so everything is live traffic.
  // The stalled socket stops reading: the kernel buffers fill (a few MB on
  // loopback: a receive buffer that is not read from does not grow), the
  // Node host's writes stop completing, its queue of 16 frames fills and
  // the core's edge decides the close (1013). The reader never falls
  // behind. The stalled socket reads again as soon as the push ends: `ws`
  // waits 30 s for the peer's answer to its close before it drops the
  // connection, and the close must be read before that.
  const host = await startWorker({ ...CONFIG, limits: { outbound_queue_frames: 16 } });
  t.after(() => host.stop());
  const alice = TOKENS.alice;
  await http(host.url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'live-1' } });
  const open = async () => {
    const ws = await WsClient.connect(`${wsBase(host.url)}/v1/ws`, { token: alice });
    ws.send({ type: 'thread.subscribe', threadId: 'live-1' });
    assert.deepEqual(await ws.next(), { type: 'thread.subscription_opened', threadId: 'live-1', throughSeq: 0 });
    return ws;
  };
  const stalled = await open();
  const reader = await open();
  stalled.pause();

  // 400 events of 32 KiB: 12.5 MiB, far more than the loopback socket
  // buffers of the stalled reader hold.
  const EVENTS = 400;
  const delta = 'x'.repeat(32 * 1024);
  let next = 1;
  const appender = async () => {
    while (next <= EVENTS) {
      const i = next;
      next += 1;
      const body = { type: 'message_part', runId: 'r', version: 'ai-sdk-v6', part: { type: 'text-delta', id: `p-${i}`, delta } };
      const res = await http(host.url, 'POST', '/v1/threads/live-1/events', { token: alice, body });
      assert.equal(res.status, 201);
    }
  };
  await Promise.all(Array.from({ length: 4 }, appender));
  stalled.resume();

  const seen = [];
  while (seen.length < EVENTS) seen.push((await reader.next()).event.seq);
  assert.deepEqual(seen, Array.from({ length: EVENTS }, (_, i) => i + 1), 'the reader got every seq once, in order');

  const { code, frames } = await stalled.closeCode();
  assert.equal(code, 1013);
  const got = frames.map((f) => f.event.seq);
  assert.deepEqual(got, got.map((_, i) => i + 1), 'the stalled reader got a gapless prefix');
  assert.ok(got.length < EVENTS, `closed before the end (${got.length} of ${EVENTS})`);
  t.diagnostic(`stalled reader: ${got.length} of ${EVENTS} events before its close (1013)`);

  // The host goes on: a new subscriber catches up from where the stalled one stopped.
  const again = await WsClient.connect(`${wsBase(host.url)}/v1/ws`, { token: alice });
  again.send({ type: 'thread.subscribe', threadId: 'live-1', fromSeq: got.length + 1 });
  assert.equal((await again.next()).throughSeq, EVENTS);
  assert.equal((await again.next()).event.seq, got.length + 1);
  again.close();
  reader.close();
});

test('answers wait for the storage, and a new engine over it has the history', async () => {
  const memory = new MemoryStorage();
  // Reads are answered at once; each put waits until the test releases it.
  const pending = [];
  const storage = {
    get: (key) => Promise.resolve(memory.get(key)),
    list: (options) => Promise.resolve(memory.list(options)),
    put: (entries) =>
      new Promise((resolve) => {
        pending.push(() => {
          memory.put(entries);
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
  await filled(pending, 1);
  await new Promise((r) => setImmediate(r));
  assert.equal(answered, false, 'no answer before the write is durable');
  assert.equal(memory.get('t/durable-1'), undefined);
  pending.shift()();
  assert.equal((await response).status, 201);

  const append = bubble.fetch(json('POST', '/v1/threads/durable-1/events', { type: 'run_started', runId: 'r-1' }));
  await filled(pending, 1);
  pending.shift()();
  assert.equal((await append).status, 201);

  const again = await createBubble({ config: CONFIG, seed: 8, storage: memory });
  const page = await (await again.fetch(json('GET', '/v1/threads/durable-1/events'))).json();
  assert.deepEqual(page.events.map((e) => [e.seq, e.runId]), [[1, 'r-1']]);
  const thread = await (await again.fetch(json('GET', '/v1/threads/durable-1'))).json();
  assert.equal(thread.headSeq, 1);
});

test('a storage that answers late and out of order changes nothing', { timeout: 120_000 }, async () => {
  const [plain, slow] = await Promise.all([
    startWorker(CONFIG),
    startWorker(CONFIG, { storage: shuffled(new MemoryStorage(), { maxMs: 3, seed: 11 }) }),
  ]);
  try {
    for (const [name, check] of Object.entries(checks)) {
      const expected = normalize(await check(plain.url));
      assert.deepEqual(normalize(await check(slow.url)), expected, name);
    }
  } finally {
    await Promise.all([plain.stop(), slow.stop()]);
  }
});

test('a group refused for a stale version is decided again; a change heard makes it read again', async () => {
  // Two engines over one storage, as two isolates would be: the second one
  // caches the thread, the first appends, the second's append then expects
  // a version that is gone and is refused, reloaded and decided again.
  const storage = new MemoryStorage();
  const one = await createBubble({ config: CONFIG, seed: 1, storage });
  const two = await createBubble({ config: CONFIG, seed: 2, storage });
  assert.equal((await one.fetch(json('POST', '/v1/threads', { threadId: 'shared' }))).status, 201);
  assert.equal((await two.fetch(json('GET', '/v1/threads/shared'))).status, 200);
  const first = await one.fetch(json('POST', '/v1/threads/shared/events', { type: 'run_started', runId: 'one' }));
  assert.equal((await first.json()).event.seq, 1);
  const second = await two.fetch(json('POST', '/v1/threads/shared/events', { type: 'run_started', runId: 'two' }));
  assert.equal(second.status, 201);
  assert.equal((await second.json()).event.seq, 2);
  // `one` hears of the other's commit only through a broker; told, it reads
  // the thread again.
  const stale = await (await one.fetch(json('GET', '/v1/threads/shared'))).json();
  assert.equal(stale.headSeq, 1);
  const { headSeq, version } = JSON.parse(storage.get('t/shared'));
  one.host.changed('shared', headSeq, version);
  const page = await (await one.fetch(json('GET', '/v1/threads/shared/events'))).json();
  assert.deepEqual(page.events.map((e) => [e.seq, e.runId]), [[1, 'one'], [2, 'two']]);
});

test('a failed read answers internal, and the host goes on', async () => {
  const memory = new MemoryStorage();
  const errors = [];
  const bubble = await createBubble({ config: CONFIG, seed: 3, storage: memory });
  assert.equal((await bubble.fetch(json('POST', '/v1/threads', { threadId: 'f-1' }))).status, 201);
  const broken = await createBubble({
    config: CONFIG,
    seed: 4,
    storage: failing(memory, new Set(['list'])),
    onError: (err) => errors.push(err),
  });
  const failed = await broken.fetch(json('GET', '/v1/threads'));
  assert.equal(failed.status, 500);
  assert.equal((await failed.json()).error.code, 'internal');
  const thread = await broken.fetch(json('GET', '/v1/threads/f-1'));
  assert.equal(thread.status, 200, 'reads that work still work');
  assert.deepEqual(errors, []);
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
