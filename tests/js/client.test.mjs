// The JavaScript client (clients/js) against the real `bubble` binary on
// SQLite, reached through a TCP proxy the test controls: subscriptions
// resume after the connection is cut mid-stream and after the server is
// restarted on the same database file, delivering every event once and in
// order; appends made while the server is unreachable land once. And the
// shared transcript: the JavaScript client state machine gives the same
// outputs as the Rust core's for the same inputs.

import assert from 'node:assert/strict';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';

import { WebSocket } from 'ws';

import { BubbleError, ClientCore, connect } from '../../clients/js/src/index.js';
import { REPO, TOKENS, startNative } from './lib/native.mjs';
import { startProxy } from './lib/proxy.mjs';

const WAIT_MS = 60000;

/** Resolves once `check()` is true (polled), or fails after WAIT_MS. */
async function until(check, what) {
  const deadline = Date.now() + WAIT_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function http(base, method, path, body, token = TOKENS.alice) {
  const response = await fetch(new URL(path, base), {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

const runStarted = (runId) => ({ type: 'run_started', runId });

async function history(base, thread) {
  const events = [];
  for (let from = 1; from !== null; ) {
    const page = await http(base, 'GET', `/v1/threads/${thread}/events?fromSeq=${from}&limit=1000`);
    assert.equal(page.status, 200);
    events.push(...page.body.events);
    from = page.body.nextSeq;
  }
  return events;
}

describe('the JavaScript client follows the core transcript', () => {
  test('same inputs, same outputs as the Rust core client', async () => {
    const doc = JSON.parse(await readFile(join(REPO, 'clients/transcripts/core-client.json'), 'utf8'));
    const core = new ClientCore(doc.config, BigInt(doc.seed));
    const drain = () => {
      const outputs = [];
      for (let o = core.pollOutput(); o; o = core.pollOutput()) outputs.push(o);
      return outputs;
    };
    const outputs = [drain()];
    for (const step of doc.steps) {
      core.handle(step.now, step.input);
      outputs.push(drain());
    }
    assert.equal(outputs.length, doc.outputs.length);
    for (let i = 0; i < outputs.length; i += 1) {
      assert.deepEqual(outputs[i], doc.outputs[i], `outputs after step ${i} (${JSON.stringify(doc.steps[i - 1]?.input ?? 'start')})`);
    }
  });
});

describe('the JavaScript client against the native server on SQLite', () => {
  let dir;
  let db;
  let server;
  let proxy;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'bubble-client-'));
    db = `sqlite:${join(dir, 'bubble.db')}`;
    server = await startNative(undefined, { store: db });
    proxy = await startProxy(new URL(server.url));
  });

  after(async () => {
    await proxy?.close();
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  async function client(options = {}) {
    const connection = await connect(proxy.url, { token: TOKENS.alice, WebSocket, backoff: { baseMs: 20, capMs: 200 }, ...options });
    const states = [];
    connection.on('state', (change) => states.push(change.state));
    return { connection, states };
  }

  async function thread(id) {
    assert.equal((await http(server.url, 'POST', '/v1/threads', { threadId: id })).status, 201);
  }

  test('a connection cut mid-stream resumes: every event once, in order', async () => {
    await thread('cut-1');
    let refreshes = 0;
    const getToken = async () => {
      refreshes += 1;
      return TOKENS.alice;
    };
    const { connection, states } = await client({ getToken });
    const seen = [];
    const subscription = connection.thread('cut-1').subscribe({ fromSeq: 1 }, (event) => seen.push(event));
    await subscription.caughtUp;
    for (let i = 1; i <= 60; i += 1) {
      assert.equal((await http(server.url, 'POST', '/v1/threads/cut-1/events', runStarted(`run-${i}`))).status, 201);
      if (i === 20 || i === 40) {
        await until(() => seen.length >= 10, 'some events');
        proxy.cut();
      }
    }
    await until(() => seen.length >= 60, 'all 60 events');
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(seen.map((e) => e.seq), Array.from({ length: 60 }, (_, i) => i + 1));
    assert.deepEqual(seen, await history(server.url, 'cut-1'));
    assert.ok(states.includes('reconnecting'), `states: ${states}`);
    assert.equal(connection.state, 'open');
    // A fresh token was asked for before each reconnection.
    assert.equal(refreshes, states.filter((s) => s === 'reconnecting').length);
    connection.close();
    assert.equal(connection.state, 'closed');
  });

  test('appends made while the server is unreachable land once', async () => {
    await thread('offline-1');
    const { connection, states } = await client();
    const t = connection.thread('offline-1');
    const iterator = t.subscribe({ fromSeq: 1 })[Symbol.asyncIterator]();
    await until(() => connection.state === 'open', 'open');
    proxy.down = true;
    proxy.cut();
    await until(() => connection.state === 'reconnecting', 'reconnecting');
    const appends = Array.from({ length: 8 }, (_, i) => t.append(runStarted(`offline-${i}`)));
    // Cut again while some of them may be on the wire.
    proxy.down = false;
    await until(() => connection.state === 'open', 'open again');
    proxy.cut();
    const stored = await Promise.all(appends);
    const events = await history(server.url, 'offline-1');
    assert.deepEqual(events.map((e) => e.runId), Array.from({ length: 8 }, (_, i) => `offline-${i}`));
    assert.deepEqual(stored, events);
    const streamed = [];
    while (streamed.length < 8) streamed.push((await iterator.next()).value);
    assert.deepEqual(streamed, events);
    assert.ok(states.filter((s) => s === 'reconnecting').length >= 2, `states: ${states}`);
    await iterator.return();
    connection.close();
  });

  test('a server restarted on the same SQLite file: the stream resumes once, in order', async () => {
    await thread('restart-1');
    const { connection } = await client();
    const seen = [];
    const sub = connection.thread('restart-1').subscribe({}, (event) => seen.push(event));
    await sub.caughtUp;
    for (let i = 1; i <= 15; i += 1) await http(server.url, 'POST', '/v1/threads/restart-1/events', runStarted(`before-${i}`));
    await until(() => seen.length >= 5, 'some events');
    await server.stop();
    const pending = connection.thread('restart-1').append(runStarted('during-restart'));
    server = await startNative(undefined, { store: db });
    proxy.target = new URL(server.url);
    proxy.cut();
    for (let i = 1; i <= 15; i += 1) await http(server.url, 'POST', '/v1/threads/restart-1/events', runStarted(`after-${i}`));
    const landed = await pending;
    await until(() => seen.length >= 31, 'all 31 events');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const events = await history(server.url, 'restart-1');
    assert.equal(events.length, 31);
    assert.equal(events.filter((e) => e.runId === 'during-restart').length, 1);
    assert.deepEqual(landed, events.find((e) => e.runId === 'during-restart'));
    assert.deepEqual(seen, events);
    connection.close();
  });

  test('history pages, scoped errors and a rejected append', async () => {
    await thread('pages-1');
    for (let i = 1; i <= 17; i += 1) await http(server.url, 'POST', '/v1/threads/pages-1/events', runStarted(`p-${i}`));
    const { connection } = await client();
    const pages = [];
    for await (const page of connection.thread('pages-1').history({ limit: 5 })) pages.push(page);
    assert.deepEqual(pages.map((p) => p.events.length), [5, 5, 5, 2]);
    assert.deepEqual(pages.flatMap((p) => p.events), await history(server.url, 'pages-1'));
    // A thread alice cannot read: the subscription ends with not_found, scoped to it.
    assert.equal((await http(server.url, 'POST', '/v1/threads', { threadId: 'bobs-1' }, TOKENS.bob)).status, 201);
    const errors = [];
    connection.thread('bobs-1').on('error', (e) => errors.push(e.code));
    const denied = connection.thread('bobs-1').subscribe();
    await assert.rejects(denied[Symbol.asyncIterator]().next(), (e) => e instanceof BubbleError && e.code === 'not_found');
    assert.deepEqual(errors, ['not_found']);
    await assert.rejects(connection.thread('bobs-1').append(runStarted('x')), (e) => e.code === 'not_found');
    await assert.rejects(
      connection.thread('pages-1').append({ type: 'participant_joined' }),
      (e) => e.code === 'invalid_request',
    );
    // The other thread is unaffected.
    const more = [];
    const live = connection.thread('pages-1').subscribe({ fromSeq: 18 }, (e) => more.push(e));
    await live.caughtUp;
    const stored = await connection.thread('pages-1').append(runStarted('p-18'));
    assert.equal(stored.seq, 18);
    await until(() => more.length === 1, 'the live event');
    assert.deepEqual(more, [stored]);
    connection.close();
  });

  test('the package is small', async () => {
    const sources = await Promise.all(['src/index.js', 'src/core.js'].map((f) => readFile(join(REPO, 'clients/js', f))));
    const gzipped = gzipSync(Buffer.concat(sources)).length;
    console.log(`clients/js: ${gzipped} bytes gzipped`);
    assert.ok(gzipped < 8192, `${gzipped} bytes gzipped`);
  });
});
