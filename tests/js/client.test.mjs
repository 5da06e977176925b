// The JavaScript client (clients/js) against the real `bubble` binary on
// SQLite, reached through a TCP proxy the test controls: subscriptions
// resume after the connection is cut mid-stream and after the server is
// restarted on the same database file, delivering every event once and in
// order; appends made while the server is unreachable land once. And the
// shared transcripts (clients/transcripts: a scripted one and runs recorded
// against the engine by core/tests/client_resume.rs): the JavaScript client
// state machine gives the same outputs as the Rust core's for the same
// inputs.

import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { cp, readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
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

/** `promise`, or a failure after WAIT_MS (for what must settle). */
function within(promise, what) {
  let timer;
  const hang = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} never settled`)), WAIT_MS);
  });
  return Promise.race([promise, hang]).finally(() => clearTimeout(timer));
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

const TRANSCRIPTS = join(REPO, 'clients/transcripts');

describe('the JavaScript client follows the core transcripts', () => {
  const folder = TRANSCRIPTS;
  const names = readdirSync(folder).filter((name) => name.endsWith('.json')).sort();

  test('the scripted transcript and recorded runs are there', () => {
    assert.ok(names.includes('core-client.json'), `${names}`);
    assert.ok(names.filter((name) => name.startsWith('resume-')).length >= 3, `${names}`);
  });

  for (const name of names) {
    test(`same inputs, same outputs as the Rust core client: ${name}`, async () => {
      const doc = JSON.parse(await readFile(join(folder, name), 'utf8'));
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
  }
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
    await assert.rejects(within(denied.caughtUp, 'caughtUp'), (e) => e instanceof BubbleError && e.code === 'not_found');
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

  test('a subscription ended before it caught up settles caughtUp, and close ends iterators', async () => {
    await thread('early-1');
    for (let i = 1; i <= 3; i += 1) await http(server.url, 'POST', '/v1/threads/early-1/events', runStarted(`e-${i}`));
    const { connection } = await client();
    const t = connection.thread('early-1');
    // Nothing can have arrived yet: both end before any frame is read.
    const dropped = t.subscribe();
    dropped.unsubscribe();
    await assert.rejects(within(dropped.caughtUp, 'caughtUp'), (e) => e instanceof BubbleError && e.code === 'unsubscribed');
    assert.deepEqual(await dropped[Symbol.asyncIterator]().next(), { value: undefined, done: true });
    const closed = t.subscribe();
    const iterator = closed[Symbol.asyncIterator]();
    const next = iterator.next();
    connection.close();
    await assert.rejects(within(closed.caughtUp, 'caughtUp'), (e) => e instanceof BubbleError && e.code === 'client_closed');
    assert.deepEqual(await within(next, 'the iterator'), { value: undefined, done: true });
    // A subscription that did catch up keeps its resolved promise when it ends.
    const { connection: again } = await client();
    const kept = again.thread('early-1').subscribe();
    assert.equal(await kept.caughtUp, 3);
    // Misuse is refused by code; the connection goes on.
    const refused = (code) => (e) => e instanceof BubbleError && e.code === code;
    assert.throws(() => again.thread('early-1').subscribe(), refused('already_subscribed'));
    assert.throws(() => again.thread('early-2').subscribe({ fromSeq: 0 }), refused('invalid_request'));
    const later = again.thread('early-1').append(runStarted('e-4'));
    assert.equal((await later).seq, 4);
    again.close();
    assert.equal(await kept.caughtUp, 3);
    assert.throws(() => again.thread('early-1').subscribe(), refused('client_closed'));
    await assert.rejects(again.thread('early-1').append(runStarted('e-5')), refused('client_closed'));
  });

  /** Subscribes and appends with `connect` given no WebSocket, across a cut: every event once, in order. */
  async function resumesWithoutWebSocketOption(id, connectFn = connect) {
    await thread(id);
    const connection = await connectFn(proxy.url, { token: TOKENS.alice, backoff: { baseMs: 20, capMs: 200 } });
    const seen = [];
    await connection.thread(id).subscribe({}, (event) => seen.push(event)).caughtUp;
    for (let i = 1; i <= 10; i += 1) {
      await connection.thread(id).append(runStarted(`w-${i}`));
      if (i === 5) {
        await until(() => seen.length >= 3, 'some events');
        proxy.cut();
      }
    }
    await until(() => seen.length >= 10, 'all 10 events');
    assert.deepEqual(seen, await history(server.url, id));
    connection.close();
  }

  const standardWebSocket = typeof globalThis.WebSocket === 'function';

  test(
    'without a WebSocket option, the standard globalThis.WebSocket is used',
    { skip: !standardWebSocket && `no globalThis.WebSocket in Node ${process.versions.node} (Node 22 has one)` },
    async () => {
      const Standard = globalThis.WebSocket;
      let made = 0;
      globalThis.WebSocket = class extends Standard {
        constructor(...args) {
          super(...args);
          made += 1;
        }
      };
      try {
        await resumesWithoutWebSocketOption('standard-ws-1');
      } finally {
        globalThis.WebSocket = Standard;
      }
      assert.ok(made >= 2, `${made} sockets made through globalThis.WebSocket`);
    },
  );

  test(
    'installed beside ws, without a WebSocket option nor globalThis.WebSocket, the ws package is used',
    { skip: standardWebSocket && 'this Node has globalThis.WebSocket' },
    async () => {
      // As npm installs it: in an app's node_modules, where `ws` resolves.
      const installed = join(REPO, 'tests/js/node_modules/@bubble/client');
      await rm(installed, { recursive: true, force: true });
      await cp(join(REPO, 'clients/js'), installed, { recursive: true });
      try {
        const { connect: installedConnect } = await import(pathToFileURL(join(installed, 'src/index.js')).href);
        await resumesWithoutWebSocketOption('ws-package-1', installedConnect);
      } finally {
        await rm(installed, { recursive: true, force: true });
      }
    },
  );

  test('the package is small, and docs/clients.md says how small', async () => {
    const sources = await Promise.all(['src/index.js', 'src/core.js'].map((f) => readFile(join(REPO, 'clients/js', f))));
    const gzipped = gzipSync(Buffer.concat(sources)).length;
    console.log(`clients/js: ${gzipped} bytes gzipped`);
    assert.ok(gzipped < 8192, `${gzipped} bytes gzipped`);
    const docs = await readFile(join(REPO, 'docs/clients.md'), 'utf8');
    const stated = /(\d+\.\d) kB gzipped/.exec(docs)?.[1];
    assert.equal(stated, (gzipped / 1000).toFixed(1), 'the size docs/clients.md states');
  });
});
