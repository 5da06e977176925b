// The storage mapping on its own (bindings-wasm/worker/storage.mjs): the key
// layout, each read kind, conditional commits, and the same answers from a
// synchronous MemoryStorage and from an asynchronous storage that settles
// its calls in a shuffled order.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { MemoryStorage, answerRead, commitBatches } from '../../bindings-wasm/worker/storage.mjs';
import { failing, shuffled } from './lib/storages.mjs';

const TIME = '2026-01-01T00:00:00.000Z';

function record(threadId, { parent = null, headSeq = 0, version = '1', title = null } = {}) {
  return { threadId, parentThreadId: parent, title, createdAt: TIME, headSeq, version, grants: [['alice', 'owner']], participants: [] };
}

// An event's JSON text, with a number no JavaScript number holds exactly.
const event = (threadId, seq) => `{"seq":${seq},"threadId":"${threadId}","type":"run_started","runId":"r-${seq}","n":12345678901234567890}`;

const append = (threadId, seq, idempotencyKey = null) => ({
  appendEvent: { threadId, seq, idempotencyKey, event: event(threadId, seq) },
});

/** A group creating `threadId` (with `events` events, the first keyed). */
function create(threadId, { parent = null, events = 0, version = '10' } = {}) {
  const writes = [{ createThread: { threadId, parentThreadId: parent, createdAt: TIME } }];
  for (let seq = 1; seq <= events; seq += 1) writes.push(append(threadId, seq, seq === 1 ? `key-${threadId}` : null));
  return { threadId, expect: null, record: record(threadId, { parent, headSeq: events, version }), writes };
}

/** A group appending seqs `from..to` to `threadId`, at `expect`. */
function appendGroup(threadId, expect, to, version) {
  const writes = [];
  for (let seq = expect.headSeq + 1; seq <= to; seq += 1) writes.push(append(threadId, seq));
  return { threadId, expect, record: record(threadId, { headSeq: to, version }), writes };
}

// The two functions as promises (they take callbacks).
const read = (storage, query) =>
  new Promise((resolve, reject) => answerRead(storage, query, (err, json) => (err ? reject(err) : resolve(JSON.parse(json)))));
const commit = (storage, batches) =>
  new Promise((resolve, reject) => commitBatches(storage, batches, (err, conflicts) => (err ? reject(err) : resolve(conflicts))));

const seqs = (answer) => answer.events.map((e) => e.seq);

describe('MemoryStorage', () => {
  test('lists keys in order within prefix, start, end and limit', () => {
    const s = new MemoryStorage();
    s.put({ 'b/2': 2, 'a/1': 1, 'b/1': 1 });
    s.put('b/3', 3);
    s.put('c', 0);
    assert.equal(s.get('b/3'), 3);
    assert.equal(s.get('nope'), undefined);
    assert.deepEqual([...s.list().keys()], ['a/1', 'b/1', 'b/2', 'b/3', 'c']);
    assert.deepEqual([...s.list({ prefix: 'b/' })], [['b/1', 1], ['b/2', 2], ['b/3', 3]]);
    assert.deepEqual([...s.list({ prefix: 'b/', start: 'b/2' }).keys()], ['b/2', 'b/3']);
    assert.deepEqual([...s.list({ prefix: 'b/', end: 'b/3' }).keys()], ['b/1', 'b/2']);
    assert.deepEqual([...s.list({ prefix: 'b/', limit: 1 }).keys()], ['b/1']);
    assert.deepEqual([...s.list({ start: 'b/2', end: 'b/1' }).keys()], []);
    s.put('b/1', 'again');
    assert.deepEqual([...s.list({ prefix: 'b/' }).values()], ['again', 2, 3]);
  });
});

for (const [name, open] of [
  ['a synchronous MemoryStorage', () => new MemoryStorage()],
  ['an asynchronous, shuffled storage', () => shuffled(new MemoryStorage(), { seed: 7 })],
]) {
  describe(`the storage mapping over ${name}`, () => {
    test('commits groups under the documented keys', async () => {
      const memory = new MemoryStorage();
      const storage = name.startsWith('a synchronous') ? memory : shuffled(memory, { seed: 3 });
      const conflicts = await commit(storage, [{ threads: [create('p', { events: 2 }), create('p.c', { parent: 'p' })] }]);
      assert.deepEqual(conflicts, [[]]);
      assert.deepEqual([...memory.list()], [
        ['c/p/p.c', ''],
        ['e/p/0000000000000001', event('p', 1)],
        ['e/p/0000000000000002', event('p', 2)],
        ['k/p/key-p', 1],
        ['t/p', JSON.stringify(record('p', { headSeq: 2, version: '10' }))],
        ['t/p.c', JSON.stringify(record('p.c', { parent: 'p', version: '10' }))],
      ]);
      assert.ok(memory.get('e/p/0000000000000001').includes('12345678901234567890'), 'events are stored as the engine wrote them');
    });

    test('answers each read kind', async () => {
      const storage = open();
      await commit(storage, [
        { threads: [create('a', { events: 5 }), create('b'), create('a.1', { parent: 'a' }), create('a.2', { parent: 'a' }), create('a.3', { parent: 'a' })] },
      ]);

      const thread = await read(storage, { kind: 'thread', threadId: 'a' });
      assert.deepEqual(thread, { thread: record('a', { headSeq: 5, version: '10' }) });
      assert.deepEqual(await read(storage, { kind: 'thread', threadId: 'zz' }), { thread: null });

      const events = (fromSeq, throughSeq, limit) => read(storage, { kind: 'events', threadId: 'a', fromSeq, throughSeq, limit });
      assert.deepEqual(seqs(await events(1, 5, 100)), [1, 2, 3, 4, 5]);
      assert.deepEqual(seqs(await events(0, 5, 100)), [1, 2, 3, 4, 5]);
      assert.deepEqual(seqs(await events(2, 4, 100)), [2, 3, 4]);
      assert.deepEqual(seqs(await events(2, 5, 2)), [2, 3]);
      assert.deepEqual(seqs(await events(6, 9, 2)), []);
      assert.deepEqual(seqs(await events(4, 3, 2)), []);
      assert.deepEqual(seqs(await read(storage, { kind: 'events', threadId: 'a.1', fromSeq: 1, throughSeq: 9, limit: 9 })), []);
      assert.deepEqual((await events(1, 1, 1)).events[0], JSON.parse(event('a', 1)));

      assert.deepEqual(await read(storage, { kind: 'idempotent', threadId: 'a', key: 'key-a' }), { event: JSON.parse(event('a', 1)) });
      assert.deepEqual(await read(storage, { kind: 'idempotent', threadId: 'a', key: 'other' }), { event: null });
      assert.deepEqual(await read(storage, { kind: 'idempotent', threadId: 'b', key: 'key-a' }), { event: null });

      const threads = async (parent, after, limit) =>
        (await read(storage, { kind: 'threads', parent, after, limit })).threads.map((r) => r.threadId);
      assert.deepEqual(await threads(null, null, 100), ['a', 'a.1', 'a.2', 'a.3', 'b']);
      assert.deepEqual(await threads(null, 'a', 2), ['a.1', 'a.2']);
      assert.deepEqual(await threads(null, 'a.3', 100), ['b']);
      assert.deepEqual(await threads('a', null, 100), ['a.1', 'a.2', 'a.3']);
      assert.deepEqual(await threads('a', 'a.1', 1), ['a.2']);
      assert.deepEqual(await threads('a', 'a.3', 100), []);
      assert.deepEqual(await threads('b', null, 100), []);
    });

    test('refuses a group whose expectation or idempotency key no longer holds, alone', async () => {
      const storage = open();
      assert.deepEqual(await commit(storage, [{ threads: [create('a', { events: 1 }), create('b')] }]), [[]]);
      const at = { headSeq: 1, version: '10' };
      const conflicts = await commit(storage, [
        // `a` exists already; `b` is not at version 99.
        { threads: [create('a'), appendGroup('b', { headSeq: 0, version: '99' }, 1, '11')] },
        // The key is taken.
        { threads: [{ ...appendGroup('a', at, 2, '12'), writes: [append('a', 2, 'key-a')] }] },
        // A later batch sees the earlier batches' writes: these expectations hold.
        { threads: [appendGroup('a', at, 3, '13'), create('c')] },
        { threads: [appendGroup('a', { headSeq: 3, version: '13' }, 4, '14'), appendGroup('a.x', { headSeq: 0, version: '1' }, 1, '2')] },
      ]);
      assert.deepEqual(conflicts, [['a', 'b'], ['a'], [], ['a.x']]);
      assert.deepEqual(seqs(await read(storage, { kind: 'events', threadId: 'a', fromSeq: 1, throughSeq: 9, limit: 9 })), [1, 2, 3, 4]);
      assert.equal((await read(storage, { kind: 'thread', threadId: 'a' })).thread.version, '14');
      assert.equal((await read(storage, { kind: 'thread', threadId: 'b' })).thread.version, '10');
      assert.deepEqual(await read(storage, { kind: 'thread', threadId: 'a.x' }), { thread: null });
    });
  });
}

describe('storage failures', () => {
  for (const async of [false, true]) {
    const how = async ? 'rejects' : 'throws';
    test(`a read whose storage ${how} fails, once`, async () => {
      const memory = new MemoryStorage();
      await commit(memory, [{ threads: [create('a', { events: 1 })] }]);
      const storage = failing(memory, new Set(['list', 'get']), { async });
      for (const query of [
        { kind: 'thread', threadId: 'a' },
        { kind: 'events', threadId: 'a', fromSeq: 1, throughSeq: 1, limit: 1 },
        { kind: 'idempotent', threadId: 'a', key: 'key-a' },
        { kind: 'threads', parent: null, after: null, limit: 1 },
      ]) {
        const calls = [];
        await new Promise((resolve) => {
          answerRead(storage, query, (...args) => {
            calls.push(args);
            resolve();
          });
        });
        await new Promise((r) => setTimeout(r, 5));
        assert.equal(calls.length, 1);
        assert.match(calls[0][0].message, /injected/);
      }
    });

    test(`a commit whose storage ${how} fails`, async () => {
      const storage = failing(new MemoryStorage(), new Set(['put']), { async });
      await assert.rejects(commit(storage, [{ threads: [create('a')] }]), /injected put failure/);
    });
  }

  test('an unknown read kind fails', async () => {
    await assert.rejects(read(new MemoryStorage(), { kind: 'everything' }), /unknown read kind/);
  });
});
