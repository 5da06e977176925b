// Bubble in a real edge runtime: workerd through miniflare, with the Worker
// entry (bindings-wasm/worker/workerd.mjs) routing to a Durable Object that
// owns the engine, its storage persisted to a temporary folder. Real
// WebSocket clients from Node.
//
// - The shared checks give the same transcripts as the native server.
// - A restart on the same storage keeps history, heads, grants and
//   idempotency keys; a client coming back with `fromSeq` sees every event
//   once, in order.
// - An evicted object resumes its hibernated `/v1/ws` sockets: they stay
//   open and lose nothing (one whose positions outgrew its attachment is
//   closed with 1012).
// - Heartbeats and channel idempotency expiry run from the object's alarm.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { checks, normalize } from './lib/checks.mjs';
import { http, rawHttp, wsBase, WsClient } from './lib/clients.mjs';
import { EDGE_CONFIG, edgeChecks } from './lib/edge-checks.mjs';
import { APP, CONFIG, startNative, TOKENS } from './lib/hosts.mjs';
import { startWorkerd } from './lib/workerd.mjs';

const { alice, bob } = TOKENS;
const runStarted = (runId) => ({ type: 'run_started', runId });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Edge checks whose rule a Workers runtime does not let a Worker apply,
 * with what workerd does instead (asserted exactly, so that a change of the
 * platform shows here). docs/wasm.md lists them.
 */
const PLATFORM = {
  // The runtime parses the request-target into `request.url`, which
  // resolves dot segments before the Worker sees the request: the edge
  // gets `/v1/threads`, not `/v1/threads/../threads`, and cannot refuse it.
  async 'edge: path segments are decoded one by one, strictly'(url) {
    const raw = (target) => rawHttp(url, 'GET', target, { headers: { authorization: `Bearer ${alice}` } });
    const list = await raw('/v1/threads/../threads');
    assert.equal(list.status, 200, 'arrives as /v1/threads');
    assert.ok(Array.isArray(list.body.threads));
    // Arrives as `/v1/`, a path of no endpoint.
    assert.deepEqual(await raw('/v1/threads/%2e%2E'), { status: 404, contentType: 'text/plain; charset=utf-8', body: 'Not found' });
    // Everything else of the check holds: escapes stay inside their segment.
    assert.equal((await raw('//v1/threads')).status, 404);
    assert.equal((await raw('/v1/threads/%FF')).status, 400);
  },
  // A Workers WebSocket exposes no send queue (no bufferedAmount, no write
  // callback): the runtime buffers what a reader does not read, so the
  // 1013 rule cannot apply and the reader gets everything once it reads.
  async 'edge: a consumer that stops reading is closed with 1013'(url) {
    await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'slow-w' } });
    for (let i = 1; i <= 40; i += 1) {
      await http(url, 'POST', '/v1/threads/slow-w/events', { token: alice, body: runStarted(`r-${i}`) });
    }
    const ws = await WsClient.connect(`${wsBase(url)}/v1/ws`, { token: alice });
    ws.pause();
    ws.send({ type: 'thread.subscribe', threadId: 'slow-w', fromSeq: 1 });
    await sleep(200);
    ws.resume();
    assert.equal((await ws.next()).type, 'thread.subscription_opened');
    assert.deepEqual(await seqs(ws, 'slow-w', 40), Array.from({ length: 40 }, (_, i) => i + 1));
    ws.close();
  },
};

/** Every check of `suite` against the native server and workerd, transcripts compared. */
function agree(title, suite, config, platform = {}) {
  describe(title, () => {
    let native;
    let workerd;

    before(async () => {
      [native, workerd] = await Promise.all([startNative(config), startWorkerd(config)]);
    });

    after(async () => {
      await Promise.all([native?.stop(), workerd?.stop()]);
    });

    for (const [name, check] of Object.entries(suite)) {
      if (platform[name]) {
        test(`${name}: in workerd, as the platform allows`, () => platform[name](workerd.url));
        continue;
      }
      test(name, async (t) => {
        let fromNative;
        try {
          fromNative = await check(native.url);
        } catch (err) {
          t.diagnostic(`native server log:\n${native.logs()}`);
          throw err;
        }
        const fromWorkerd = await check(workerd.url);
        assert.deepEqual(normalize(fromWorkerd), normalize(fromNative));
      });
    }
  });
}

agree('workerd and the native server agree', checks, CONFIG);
agree('the request edge: workerd decides as the native server', edgeChecks, EDGE_CONFIG, PLATFORM);

/** A metric's value from `/metrics` (one without labels). */
async function metric(url, name) {
  const { status, body } = await http(url, 'GET', '/metrics');
  assert.equal(status, 200);
  const line = body.split('\n').find((l) => l.startsWith(`${name} `));
  assert.ok(line, `no ${name} in /metrics`);
  return Number(line.slice(name.length + 1));
}

/** A `/v1/ws` client of alice subscribed to `thread` from `fromSeq`: the client and the opened frame. */
async function subscribed(url, thread, fromSeq, token = alice) {
  const ws = await WsClient.connect(`${wsBase(url)}/v1/ws`, { token });
  ws.send({ type: 'thread.subscribe', threadId: thread, ...(fromSeq !== undefined && { fromSeq }) });
  const opened = await ws.next();
  assert.equal(opened.type, 'thread.subscription_opened', JSON.stringify(opened));
  return { ws, opened };
}

/** The seqs of the next `n` frames of `ws`, each a `thread.event` of `thread`. */
async function seqs(ws, thread, n) {
  const out = [];
  for (let i = 0; i < n; i += 1) {
    const frame = await ws.next();
    assert.equal(frame.type, 'thread.event', JSON.stringify(frame));
    assert.equal(frame.threadId, thread);
    out.push(frame.event.seq);
  }
  return out;
}

test('a restart on the same storage keeps history, heads, grants and keys; fromSeq loses nothing', { timeout: 120_000 }, async (t) => {
  const persist = await mkdtemp(join(tmpdir(), 'bubble-workerd-restart-'));
  t.after(() => rm(persist, { recursive: true, force: true }));
  const append = (url, runId, idempotencyKey) =>
    http(url, 'POST', '/v1/threads/r-1/events', { token: alice, body: runStarted(runId), idempotencyKey });
  const seen = [];
  let first;

  let w = await startWorkerd(CONFIG, { persist });
  try {
    assert.equal((await http(w.url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'r-1', title: 'Restarts' } })).status, 201);
    assert.equal((await http(w.url, 'PUT', '/v1/threads/r-1/grants/bob', { token: alice, body: { role: 'reader' } })).status, 200);
    first = await append(w.url, 'a-1', 'key-1');
    assert.equal(first.status, 201);
    assert.equal(first.body.event.seq, 1);
    const { ws, opened } = await subscribed(w.url, 'r-1', 1);
    assert.equal(opened.throughSeq, 1);
    seen.push(...(await seqs(ws, 'r-1', 1)));
    assert.equal((await append(w.url, 'a-2')).status, 201);
    seen.push(...(await seqs(ws, 'r-1', 1)));
    // The runtime goes away with the socket open.
  } finally {
    await w.stop();
  }

  w = await startWorkerd(CONFIG, { persist });
  try {
    // Appended while the client is away, then one more restart.
    assert.equal((await append(w.url, 'a-3')).body.event.seq, 3);
    const duplicate = await append(w.url, 'a-1', 'key-1');
    assert.equal(duplicate.status, 200);
    assert.equal(duplicate.body.duplicate, true);
    assert.deepEqual(duplicate.body.event, first.body.event);
  } finally {
    await w.stop();
  }

  w = await startWorkerd(CONFIG, { persist });
  t.after(() => w.stop());
  const thread = await http(w.url, 'GET', '/v1/threads/r-1', { token: alice });
  assert.equal(thread.status, 200);
  assert.equal(thread.body.headSeq, 3);
  assert.equal(thread.body.title, 'Restarts');
  const grants = await http(w.url, 'GET', '/v1/threads/r-1/grants', { token: alice });
  assert.deepEqual(grants.body.grants.map((g) => [g.principalId, g.role]).sort(), [['alice', 'owner'], ['bob', 'reader']]);
  assert.equal((await http(w.url, 'GET', '/v1/threads/r-1', { token: bob })).status, 200);
  assert.equal((await append(w.url, 'a-1', 'key-1')).body.duplicate, true);

  const { ws, opened } = await subscribed(w.url, 'r-1', seen.at(-1) + 1);
  assert.equal(opened.throughSeq, 3);
  seen.push(...(await seqs(ws, 'r-1', 1)));
  assert.equal((await append(w.url, 'a-4')).body.event.seq, 4);
  seen.push(...(await seqs(ws, 'r-1', 1)));
  assert.deepEqual(seen, [1, 2, 3, 4], 'every event once, in order');
  const history = await http(w.url, 'GET', '/v1/threads/r-1/events', { token: bob });
  assert.deepEqual(history.body.events.map((e) => [e.seq, e.runId]), [[1, 'a-1'], [2, 'a-2'], [3, 'a-3'], [4, 'a-4']]);
  ws.close();
});

/**
 * Lets workerd evict the namespace's Durable Object with its sockets open,
 * as the runtime does to an idle object: after 10 s without an event (the
 * pinned miniflare has no eviction call). Nothing may talk to the object
 * meanwhile; `bubble_do_resumed_sockets` afterwards shows it happened.
 */
async function evict() {
  await sleep(12_000);
}

test('an evicted object resumes its hibernated sockets: they stay open and lose nothing', { timeout: 120_000 }, async (t) => {
  // No heartbeat within the test, so nothing wakes the object but the test.
  const config = { ...CONFIG, heartbeat: { ping_interval_ms: 600_000, pong_timeout_ms: 1_200_000 } };
  const w = await startWorkerd(config);
  t.after(() => w.stop());
  const url = w.url;
  for (const threadId of ['hib-1', 'hib-2']) {
    assert.equal((await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId } })).status, 201);
  }
  for (const runId of ['r-1', 'r-2']) {
    await http(url, 'POST', '/v1/threads/hib-1/events', { token: alice, body: runStarted(runId) });
  }
  const a = await subscribed(url, 'hib-1', 1);
  assert.deepEqual(await seqs(a.ws, 'hib-1', 2), [1, 2]);
  a.ws.send({ type: 'thread.subscribe', threadId: 'hib-2' });
  assert.deepEqual(await a.ws.next(), { type: 'thread.subscription_opened', threadId: 'hib-2', throughSeq: 0 });
  const b = await subscribed(url, 'hib-1', 100); // beyond the head: live only
  assert.equal(b.opened.throughSeq, 2);
  // A socket whose positions outgrow an attachment (16 KiB): 150 threads
  // with 120-character ids.
  const big = await WsClient.connect(`${wsBase(url)}/v1/ws`, { token: alice });
  for (let i = 0; i < 150; i += 1) {
    const threadId = `big-${String(i).padStart(3, '0')}-${'x'.repeat(112)}`;
    assert.equal((await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId } })).status, 201);
    big.send({ type: 'thread.subscribe', threadId, fromSeq: 1 });
  }
  const opened = await big.until((f) => f.threadId?.startsWith('big-149-'));
  assert.equal(opened.filter((f) => f.type === 'thread.subscription_opened').length, 150);
  assert.equal(await metric(url, 'bubble_do_resumed_sockets'), 0);

  await evict();

  // An HTTP append wakes a new instance, which resumes both sockets first.
  const third = await http(url, 'POST', '/v1/threads/hib-1/events', { token: alice, body: runStarted('r-3') });
  assert.equal(third.body.event.seq, 3);
  assert.deepEqual(await seqs(a.ws, 'hib-1', 1), [3], 'no second subscription_opened, no replay');
  assert.deepEqual(await seqs(b.ws, 'hib-1', 1), [3]);
  assert.equal(await metric(url, 'bubble_do_resumed_sockets'), 2);
  // The socket whose positions did not fit is closed for its client to
  // reconnect and resubscribe with fromSeq.
  assert.deepEqual(await big.closeCode(), { code: 1012, frames: [] });
  // The resumed socket keeps its subscriptions: appends over it, and a
  // second subscribe conflicts.
  a.ws.send({ type: 'thread.append', threadId: 'hib-2', event: runStarted('over-ws') });
  assert.deepEqual(await seqs(a.ws, 'hib-2', 1), [1]);
  a.ws.send({ type: 'thread.subscribe', threadId: 'hib-1' });
  const conflict = await a.ws.next();
  assert.equal(conflict.code, 'conflict');

  // Unsubscribed before the next eviction: stays unsubscribed after it.
  b.ws.send({ type: 'thread.unsubscribe', threadId: 'hib-1' });
  b.ws.send({ type: 'thread.subscribe', threadId: 'hib-2', fromSeq: 1 });
  assert.equal((await b.ws.next()).type, 'thread.subscription_opened');
  assert.deepEqual(await seqs(b.ws, 'hib-2', 1), [1]);

  await evict();

  // Woken by a socket this time.
  a.ws.send({ type: 'thread.append', threadId: 'hib-1', event: runStarted('r-4') });
  assert.deepEqual(await seqs(a.ws, 'hib-1', 1), [4]);
  await http(url, 'POST', '/v1/threads/hib-2/events', { token: alice, body: runStarted('r-5') });
  assert.deepEqual(await seqs(a.ws, 'hib-2', 1), [2]);
  assert.deepEqual(await seqs(b.ws, 'hib-2', 1), [2], 'b got nothing of hib-1 in between');
  assert.equal(await metric(url, 'bubble_do_resumed_sockets'), 2);
  a.ws.close();
  b.ws.close();
});

test('heartbeats and channel idempotency expiry run from the alarm', { timeout: 60_000 }, async (t) => {
  const config = {
    ...CONFIG,
    heartbeat: { ping_interval_ms: 200, pong_timeout_ms: 1000 },
    limits: { idempotency_retention_ms: 300 },
  };
  const w = await startWorkerd(config);
  t.after(() => w.stop());
  const url = w.url;
  assert.equal(await metric(url, 'bubble_do_alarm_armed'), 0, 'nothing due, no alarm');

  // Pings every 200 ms, each answered on the client's behalf (the runtime
  // answers real Pings itself): past the 1 s Pong deadline the socket is
  // still served.
  const ws = await WsClient.connect(`${wsBase(url)}/v1/ws`, { token: alice });
  assert.equal(await metric(url, 'bubble_do_alarm_armed'), 1);
  await sleep(1_600);
  assert.ok((await metric(url, 'bubble_do_alarms_total')) >= 4, 'the heartbeat ran from alarms');
  assert.equal((await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'alarm-1' } })).status, 201);
  ws.send({ type: 'thread.subscribe', threadId: 'alarm-1' });
  assert.deepEqual(await ws.next(), { type: 'thread.subscription_opened', threadId: 'alarm-1', throughSeq: 0 });
  ws.close();

  // A publish key is remembered for 300 ms, then forgotten by an alarm.
  const publish = () =>
    http(url, 'POST', `/api/apps/${APP.id}/events`, {
      token: APP.secret,
      body: { channel: 'news', name: 'e' },
      idempotencyKey: 'alarm-key',
    });
  const first = await publish();
  assert.equal(first.status, 202);
  assert.equal(first.body.duplicate, false);
  assert.equal((await publish()).body.duplicate, true);
  await sleep(800);
  const later = await publish();
  assert.equal(later.body.duplicate, false);
  assert.notEqual(later.body.publicationId, first.body.publicationId);
  // With no socket and no key left, the engine has no deadline: the last
  // alarm deletes itself.
  let armed = 1;
  for (let i = 0; i < 30 && armed === 1; i += 1) {
    await sleep(200);
    armed = await metric(url, 'bubble_do_alarm_armed');
  }
  assert.equal(armed, 0);
});

test('the Worker answers /healthz and unknown paths itself, and forwards the rest', async (t) => {
  const w = await startWorkerd(CONFIG);
  t.after(() => w.stop());
  assert.deepEqual(await http(w.url, 'GET', '/healthz'), { status: 200, contentType: 'text/plain; charset=utf-8', retryAfter: null, body: 'ok' });
  assert.equal((await http(w.url, 'GET', '/readyz')).body, 'ready');
  assert.equal((await http(w.url, 'GET', '/')).status, 404);
  assert.equal(await metric(w.url, 'bubble_ws_connections'), 0);
  const refused = await WsClient.refusal(`${wsBase(w.url)}/socket?appKey=nope&protocol=2`);
  assert.deepEqual([refused.status, refused.body], [404, 'Application not found']);
});
