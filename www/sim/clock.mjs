// Simulated time for the offline page: a deterministic event queue (time,
// then insertion order) and a seeded random generator, so one seed always
// plays out the same run.

export class SimClock {
  #queue = [];
  #order = 0;

  constructor(start) {
    this.now = start;
  }

  /** Runs `fn` at simulated time `time`; returns a handle for `cancel`. */
  at(time, fn) {
    const item = { time: Math.max(time, this.now), order: this.#order++, fn, cancelled: false };
    let lo = 0;
    let hi = this.#queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const q = this.#queue[mid];
      if (q.time < item.time || (q.time === item.time && q.order < item.order)) lo = mid + 1;
      else hi = mid;
    }
    this.#queue.splice(lo, 0, item);
    return item;
  }

  /** Runs `fn` `ms` from now. */
  after(ms, fn) {
    return this.at(this.now + ms, fn);
  }

  cancel(item) {
    if (item) item.cancelled = true;
  }

  /** Runs everything due up to `time`, then sets the clock to it. */
  runUntil(time) {
    while (this.#queue.length > 0 && this.#queue[0].time <= time) {
      const item = this.#queue.shift();
      if (item.cancelled) continue;
      this.now = item.time;
      item.fn();
    }
    this.now = Math.max(this.now, time);
  }

  /** Runs until `done()` holds (bounded, for set-up steps). */
  runWhile(pending) {
    for (let guard = 0; pending() && this.#queue.length > 0 && guard < 100_000; guard += 1) {
      this.runUntil(this.#queue[0].time);
    }
  }
}

/** A seeded generator (mulberry32 over a hash of the seed text). */
export function seededRandom(seed) {
  let h = 1779033703 ^ String(seed).length;
  for (const ch of String(seed)) {
    h = Math.imul(h ^ ch.charCodeAt(0), 3432918353);
    h = (h << 13) | (h >>> 19);
  }
  let a = h >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n) => Math.floor(next() * n),
    pick: (list) => list[Math.floor(next() * list.length)],
    /** A 53-bit integer, for the engine's seed. */
    seed53: () => Math.floor(next() * 2 ** 21) * 2 ** 32 + Math.floor(next() * 2 ** 32),
  };
}
