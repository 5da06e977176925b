// The JavaScript client's resume checks, run in a browser page
// (tests/js/client-page/harness.mjs) against a `world`: the server the
// page's client talks to, and the faults the test can cause in it.
//
//   world.url                         the base URL the client connects to
//   world.http(method, path, body, token) -> {status, body}, beside the client
//   world.cut()                       ends every connection of the client
//   world.down(bool)                  refuses new connections, or stops refusing
//   world.stop() / world.start()      stops the server; starts it again on the same data
//
// The same checks as tests/js/client.test.mjs: a subscription resumes after
// cuts and after a restart with every event once and in order, appends made
// while offline land once, history pages, scoped errors.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { TOKENS } from './native.mjs';

const WAIT_MS = 60_000;
const BACKOFF = { baseMs: 20, capMs: 200 };

const runStarted = (runId) => ({ type: 'run_started', runId });

/** `window.harness[fn](...args)` in `page`; fails instead of hanging after WAIT_MS. */
export function call(page, fn, ...args) {
  let timer;
  const hang = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${fn} did not settle in the page`)), WAIT_MS);
  });
  return Promise.race([page.evaluate(([name, list]) => window.harness[name](...list), [fn, args]), hang]).finally(() => clearTimeout(timer));
}

/** Resolves once `check()` resolves truthy (polled), or fails after WAIT_MS. */
async function until(check, what) {
  const deadline = Date.now() + WAIT_MS;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The whole history of `thread` in `world`. */
async function history(world, thread) {
  const events = [];
  for (let from = 1; from !== null; ) {
    const page = await world.http('GET', `/v1/threads/${thread}/events?fromSeq=${from}&limit=1000`);
    assert.equal(page.status, 200);
    events.push(...page.body.events);
    from = page.body.nextSeq;
  }
  return events;
}

/**
 * Registers the checks; `context.world` and `context.page` are read when
 * they run (set them in a `before` hook).
 */
export function clientChecks(context) {
  const page = () => context.page;
  const world = () => context.world;
  const client = (options = {}) => call(page(), 'open', { url: world().url, token: TOKENS.alice, backoff: BACKOFF, ...options });
  const seen = (id, thread) => call(page(), 'seen', id, thread);
  const state = (id) => call(page(), 'state', id);
  const inState = (id, wanted) => async () => (await state(id)).state === wanted;
  const count = (id, thread, n) => async () => (await seen(id, thread)).events.length >= n;

  async function thread(id) {
    assert.equal((await world().http('POST', '/v1/threads', { threadId: id })).status, 201);
  }

  async function appendFromServer(thread, runId) {
    assert.equal((await world().http('POST', `/v1/threads/${thread}/events`, runStarted(runId))).status, 201);
  }

  test('a connection cut mid-stream resumes: every event once, in order', async () => {
    await thread('cut-1');
    const id = await client({ refresh: true });
    await call(page(), 'subscribe', id, 'cut-1', 1);
    assert.deepEqual(await call(page(), 'caughtUp', id, 'cut-1'), { value: 0 });
    for (let i = 1; i <= 60; i += 1) {
      await appendFromServer('cut-1', `run-${i}`);
      if (i === 20 || i === 40) {
        await until(count(id, 'cut-1', 10), 'some events');
        await world().cut();
      }
    }
    await until(count(id, 'cut-1', 60), 'all 60 events');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const { events } = await seen(id, 'cut-1');
    assert.deepEqual(events.map((e) => e.seq), Array.from({ length: 60 }, (_, i) => i + 1));
    assert.deepEqual(events, await history(world(), 'cut-1'));
    const { state: now, states, refreshes } = await state(id);
    assert.ok(states.includes('reconnecting'), `states: ${states}`);
    assert.equal(now, 'open');
    // A fresh token was asked for before each reconnection.
    assert.equal(refreshes, states.filter((s) => s === 'reconnecting').length);
    await call(page(), 'close', id);
    assert.equal((await state(id)).state, 'closed');
  });

  test('appends made while the server is unreachable land once', async () => {
    await thread('offline-1');
    const id = await client();
    await call(page(), 'subscribe', id, 'offline-1', 1, { iterate: true });
    await until(inState(id, 'open'), 'open');
    await world().down(true);
    await world().cut();
    await until(inState(id, 'reconnecting'), 'reconnecting');
    const appends = [];
    for (let i = 0; i < 8; i += 1) appends.push(await call(page(), 'append', id, 'offline-1', runStarted(`offline-${i}`)));
    // Cut again while some of them may be on the wire.
    await world().down(false);
    await until(inState(id, 'open'), 'open again');
    await world().cut();
    const stored = [];
    for (const n of appends) stored.push((await call(page(), 'appended', id, n)).value);
    const events = await history(world(), 'offline-1');
    assert.deepEqual(events.map((e) => e.runId), Array.from({ length: 8 }, (_, i) => `offline-${i}`));
    assert.deepEqual(stored, events);
    await until(count(id, 'offline-1', 8), 'the 8 events streamed');
    assert.deepEqual((await seen(id, 'offline-1')).events, events);
    const { states } = await state(id);
    assert.ok(states.filter((s) => s === 'reconnecting').length >= 2, `states: ${states}`);
    await call(page(), 'close', id);
    // Closing the client ends its iterators.
    await until(async () => (await seen(id, 'offline-1')).ended !== null, 'the iterator to end');
    assert.deepEqual((await seen(id, 'offline-1')).ended, { done: true });
  });

  test('a restarted server: the stream resumes once, in order', async () => {
    await thread('restart-1');
    const id = await client();
    await call(page(), 'subscribe', id, 'restart-1', 1);
    await call(page(), 'caughtUp', id, 'restart-1');
    for (let i = 1; i <= 15; i += 1) await appendFromServer('restart-1', `before-${i}`);
    await until(count(id, 'restart-1', 5), 'some events');
    await world().stop();
    const pending = await call(page(), 'append', id, 'restart-1', runStarted('during-restart'));
    await world().start();
    for (let i = 1; i <= 15; i += 1) await appendFromServer('restart-1', `after-${i}`);
    const landed = await call(page(), 'appended', id, pending);
    await until(count(id, 'restart-1', 31), 'all 31 events');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const events = await history(world(), 'restart-1');
    assert.equal(events.length, 31);
    assert.equal(events.filter((e) => e.runId === 'during-restart').length, 1);
    assert.deepEqual(landed.value, events.find((e) => e.runId === 'during-restart'));
    assert.deepEqual((await seen(id, 'restart-1')).events, events);
    await call(page(), 'close', id);
  });

  test('history pages, scoped errors and a rejected append', async () => {
    await thread('pages-1');
    for (let i = 1; i <= 17; i += 1) await appendFromServer('pages-1', `p-${i}`);
    const id = await client();
    const pages = await call(page(), 'history', id, 'pages-1', 5);
    assert.deepEqual(pages.map((p) => p.events.length), [5, 5, 5, 2]);
    assert.deepEqual(pages.map((p) => p.nextSeq), [6, 11, 16, null]);
    assert.deepEqual(pages.flatMap((p) => p.events), await history(world(), 'pages-1'));
    // A thread alice cannot read: the subscription ends with not_found,
    // scoped to it; caughtUp and the iterator reject with it.
    assert.equal((await world().http('POST', '/v1/threads', { threadId: 'bobs-1' }, TOKENS.bob)).status, 201);
    await call(page(), 'subscribe', id, 'bobs-1', 1, { iterate: true });
    assert.deepEqual(await call(page(), 'caughtUp', id, 'bobs-1'), { error: 'not_found' });
    await until(async () => (await seen(id, 'bobs-1')).ended !== null, 'the denied subscription to end');
    assert.deepEqual(await seen(id, 'bobs-1'), { events: [], ended: { error: 'not_found' }, errors: ['not_found'] });
    const denied = await call(page(), 'append', id, 'bobs-1', runStarted('x'));
    assert.deepEqual(await call(page(), 'appended', id, denied), { error: 'not_found' });
    const invalid = await call(page(), 'append', id, 'pages-1', { type: 'participant_joined' });
    assert.deepEqual(await call(page(), 'appended', id, invalid), { error: 'invalid_request' });
    // The other thread is unaffected.
    await call(page(), 'subscribe', id, 'pages-1', 18);
    assert.deepEqual(await call(page(), 'caughtUp', id, 'pages-1'), { value: 17 });
    const n = await call(page(), 'append', id, 'pages-1', runStarted('p-18'));
    const stored = (await call(page(), 'appended', id, n)).value;
    assert.equal(stored.seq, 18);
    await until(count(id, 'pages-1', 1), 'the live event');
    assert.deepEqual((await seen(id, 'pages-1')).events, [stored]);
    await call(page(), 'close', id);
  });
}
