// Storages for tests: an asynchronous one over a MemoryStorage that answers
// every call after its own pseudo-random delay (so concurrent calls settle
// in a shuffled order), and one that fails some calls.

/** `storage`, answering each call with a promise after 0..`maxMs` ms (seeded, reproducible). */
export function shuffled(storage, { maxMs = 4, seed = 1 } = {}) {
  let state = seed >>> 0 || 1;
  const delay = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) % (maxMs + 1);
  };
  const later = (fn) =>
    new Promise((resolve, reject) =>
      setTimeout(() => {
        try {
          resolve(fn());
        } catch (err) {
          reject(err);
        }
      }, delay()),
    );
  return {
    get: (key) => later(() => storage.get(key)),
    put: (keyOrEntries, value) => later(() => storage.put(keyOrEntries, value)),
    list: (options) => later(() => storage.list(options)),
  };
}

/** `storage` with the methods named in `failing` rejecting (`async`) or throwing. */
export function failing(storage, failing, { async = true } = {}) {
  const wrap = (name) => (...args) => {
    if (!failing.has(name)) return storage[name](...args);
    const err = new Error(`injected ${name} failure`);
    if (async) return Promise.reject(err);
    throw err;
  };
  return { get: wrap('get'), put: wrap('put'), list: wrap('list') };
}
