// The engine's reads and batches on a key-value storage in the shape of
// Durable Object storage: `get(key)`, `put(key, value)` / `put(entries)` and
// `list({prefix, start, end, limit})` (a Map in key order). Each method may
// return its result or a promise of it. This is a storage layout, not a
// protocol rule: the engine decides everything; this module stores what it
// decided and reads it back.
//
// Keys (thread ids never contain '/'):
//   t/<threadId>                      the thread record (JSON text)
//   e/<threadId>/<seq, 16 digits>     an event (its JSON text, as the engine wrote it)
//   k/<threadId>/<idempotency key>    the seq appended with that key
//   c/<parentId>/<childId>            '' (lists a thread's children)
//
// Plain values continue synchronously and promises when they settle, so an
// in-memory storage answers without a trip through the microtask queue (the
// offline page runs everything on simulated time).

const PAGE = 128; // Durable Object storage puts at most 128 keys at once.

/** A Map-backed storage, answering synchronously. */
export class MemoryStorage {
  #values = new Map();
  #keys = []; // sorted

  get(key) {
    return this.#values.get(key);
  }

  put(keyOrEntries, value) {
    const entries = typeof keyOrEntries === 'string' ? [[keyOrEntries, value]] : Object.entries(keyOrEntries);
    for (const [key, v] of entries) {
      if (!this.#values.has(key)) this.#keys.splice(this.#bound(key), 0, key);
      this.#values.set(key, v);
    }
  }

  /** Keys in order from `start` (inclusive) to `end` (exclusive) with `prefix`, at most `limit`. */
  list({ prefix = '', start = prefix, end, limit = Infinity } = {}) {
    const found = new Map();
    const from = start > prefix ? start : prefix;
    for (let i = this.#bound(from); i < this.#keys.length && found.size < limit; i += 1) {
      const key = this.#keys[i];
      if (!key.startsWith(prefix) || (end !== undefined && key >= end)) break;
      found.set(key, this.#values.get(key));
    }
    return found;
  }

  // The index of the first key not below `key`.
  #bound(key) {
    let lo = 0;
    let hi = this.#keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.#keys[mid] < key) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

const pad = (seq) => String(seq).padStart(16, '0');
const eventKey = (threadId, seq) => `e/${threadId}/${pad(seq)}`;
// The smallest key after `key` ('\0' sorts first).
const after = (key) => `${key}\0`;

/**
 * Answers a `read` output's query from `storage`: calls `done(null, json)`
 * with the JSON `readDone` takes, or `done(error)`.
 */
export function answerRead(storage, query, done) {
  const finish = once(done);
  const fail = (err) => finish(err);
  const answer = (kind, json) => finish(null, `{"${kind}":${json}}`);
  const list = (json) => `[${json.join(',')}]`;
  attempt(fail, () => {
    switch (query.kind) {
      case 'thread':
        return settle(storage.get(`t/${query.threadId}`), (record) => answer('thread', record ?? 'null'), fail);
      case 'events': {
        const { threadId, fromSeq, throughSeq, limit } = query;
        if (fromSeq > throughSeq || limit < 1) return answer('events', '[]');
        const prefix = `e/${threadId}/`;
        const range = { prefix, start: eventKey(threadId, Math.max(fromSeq, 1)), end: eventKey(threadId, throughSeq + 1), limit };
        return settle(storage.list(range), (events) => answer('events', list([...events.values()])), fail);
      }
      case 'idempotent':
        return settle(storage.get(`k/${query.threadId}/${query.key}`), (seq) => {
          if (seq === undefined) return answer('event', 'null');
          settle(storage.get(eventKey(query.threadId, seq)), (event) => answer('event', event ?? 'null'), fail);
        }, fail);
      case 'threads': {
        const { parent, limit } = query;
        const prefix = parent === null ? 't/' : `c/${parent}/`;
        const range = { prefix, limit, ...(query.after !== null && { start: after(prefix + query.after) }) };
        return settle(storage.list(range), (found) => {
          if (parent === null) return answer('threads', list([...found.values()]));
          const children = [...found.keys()].map((key) => storage.get(`t/${key.slice(prefix.length)}`));
          all(children, (records) => answer('threads', list(records.filter((r) => r !== undefined))), fail);
        }, fail);
      }
      default:
        throw new Error(`unknown read kind ${query.kind}`);
    }
  });
}

/**
 * Applies `batches` (the `writes` of `persist` outputs) in order: each
 * thread's group only if the stored record is still at its `expect` and
 * none of its idempotency keys is taken. Calls `done(null, conflicts)`, per
 * batch the ids of the threads whose groups were refused, or `done(error)`.
 */
export function commitBatches(storage, batches, done) {
  const finish = once(done);
  const fail = (err) => finish(err);
  const conflicts = [];
  const next = () => {
    if (conflicts.length === batches.length) return finish(null, conflicts);
    attempt(fail, () => commitOne(storage, batches[conflicts.length], (refused) => {
      conflicts.push(refused);
      next();
    }, fail));
  };
  next();
}

function commitOne(storage, batch, done, fail) {
  // First everything the groups' checks need, all at once: each record and
  // each idempotency key the group would take.
  const gets = [];
  const groups = batch.threads.map((group) => {
    const id = group.threadId;
    const appends = group.writes.flatMap((w) => (w.appendEvent ? [w.appendEvent] : []));
    const keys = appends.filter((a) => a.idempotencyKey !== null).map((a) => `k/${id}/${a.idempotencyKey}`);
    const at = gets.length;
    gets.push(...[`t/${id}`, ...keys].map((key) => storage.get(key)));
    return { group, appends, at, end: gets.length };
  });
  all(gets, (found) => {
    const refused = [];
    const entries = [];
    for (const { group, appends, at, end } of groups) {
      const [stored, ...keys] = found.slice(at, end);
      const id = group.threadId;
      if (!expected(stored, group.expect) || keys.some((seq) => seq !== undefined)) {
        refused.push(id);
        continue;
      }
      entries.push([`t/${id}`, JSON.stringify(group.record)]);
      for (const { seq, idempotencyKey, event } of appends) {
        entries.push([eventKey(id, seq), event]);
        if (idempotencyKey !== null) entries.push([`k/${id}/${idempotencyKey}`, seq]);
      }
      if (group.expect === null && group.record.parentThreadId !== null) {
        entries.push([`c/${group.record.parentThreadId}/${id}`, '']);
      }
    }
    // Issued together, with nothing awaited in between: one atomic write on
    // Durable Objects, however many pages it takes.
    const puts = [];
    for (let i = 0; i < entries.length; i += PAGE) puts.push(storage.put(Object.fromEntries(entries.slice(i, i + PAGE))));
    all(puts, () => done(refused), fail);
  }, fail);
}

// Whether the stored record (JSON text or undefined) is at `expect`.
function expected(stored, expect) {
  if (stored === undefined || expect === null) return stored === undefined && expect === null;
  const { headSeq, version } = JSON.parse(stored);
  return headSeq === expect.headSeq && version === expect.version;
}

// Continues with `fn(value)`: at once for a plain value, once it resolves
// for a promise (any thenable).
function settle(value, fn, fail) {
  if (value !== null && typeof value?.then === 'function') value.then((v) => attempt(fail, () => fn(v)), fail);
  else fn(value);
}

// `fn(results)` once every value has settled, results in order.
function all(values, fn, fail) {
  const results = new Array(values.length);
  let left = values.length;
  if (left === 0) return fn(results);
  values.forEach((value, i) =>
    settle(value, (v) => {
      results[i] = v;
      left -= 1;
      if (left === 0) fn(results);
    }, fail),
  );
}

function attempt(fail, fn) {
  try {
    fn();
  } catch (err) {
    fail(err);
  }
}

function once(done) {
  let called = false;
  return (...args) => {
    if (called) return;
    called = true;
    done(...args);
  };
}
