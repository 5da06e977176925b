// The client's rules, as in the Rust core (`bubble_core::client`), input
// for input and output for output: positions, resume from the next seq,
// dedupe by seq, throughSeq, capped backoff with seeded jitter, appends
// queued while offline and retried with one idempotency key, scoped
// errors, token refresh. No I/O, no clock, no randomness: `now` comes
// with every input and the seed with the constructor. The shared
// transcript (clients/transcripts/core-client.json) holds both to the same
// outputs.

const MASK = (1n << 64n) - 1n;

/**
 * An error by code: the server's (`not_found`, `forbidden`, …) or the
 * client's own (`client_closed`, `already_subscribed`, `invalid_request`,
 * `unsubscribed`, `unavailable`).
 */
export class BubbleError extends Error {
  constructor(code, message) {
    super(message || code);
    this.name = 'BubbleError';
    this.code = code;
  }
}

/** SplitMix64, the same generator as the core's. */
export class SplitMix64 {
  /** @param {bigint} seed */
  constructor(seed) {
    this.state = BigInt.asUintN(64, seed);
  }

  /** @returns {bigint} */
  next() {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & MASK;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
    return z ^ (z >> 31n);
  }
}

/** `min(cap, base * 2^attempt)`, of which the upper half is jitter. */
export function backoffDelay(rng, baseMs, capMs, attempt) {
  const factor = 1n << BigInt(Math.min(attempt, 32));
  let ceiling = BigInt(baseMs) * factor;
  if (ceiling > BigInt(capMs)) ceiling = BigInt(capMs);
  if (ceiling < 1n) ceiling = 1n;
  const half = ceiling / 2n;
  return Number(half + (rng.next() % (ceiling - half + 1n)));
}

const subscribeFrame = (thread, fromSeq) => JSON.stringify({ type: 'thread.subscribe', threadId: thread, fromSeq });
const unsubscribeFrame = (thread) => JSON.stringify({ type: 'thread.unsubscribe', threadId: thread });

const text = (v) => (typeof v === 'string' ? v : '');
const isSeq = (v) => Number.isSafeInteger(v) && v >= 0;

export class ClientCore {
  /**
   * @param {{ token?: string | null, refreshToken?: boolean, backoffBaseMs?: number, backoffCapMs?: number }} config
   * @param {bigint} seed
   */
  constructor(config, seed) {
    this.config = { refreshToken: false, backoffBaseMs: 500, backoffCapMs: 30000, ...config };
    this.token = config.token ?? null;
    this.rng = new SplitMix64(seed);
    this.nonce = this.rng.next().toString(16).padStart(16, '0');
    this.appendsMade = 0;
    this.link = { kind: 'connecting' };
    this.reconnects = 0;
    this.tokenRequested = false;
    /** @type {Map<string, { nextSeq: number, fromApplication: boolean, phase: any, failures: number }>} */
    this.threads = new Map();
    /** @type {Array<any>} */
    this.appends = [];
    this.out = [];
    this.now = 0;
    this.emit({ type: 'state', state: 'connecting' });
    this.emit({ type: 'connect', token: this.token });
  }

  position(thread) {
    return this.threads.get(thread)?.nextSeq;
  }

  pollOutput() {
    return this.out.shift();
  }

  pollTimeout() {
    if (this.link.kind === 'waiting') return this.link.at;
    if (this.link.kind !== 'open') return undefined;
    const times = [];
    for (const sub of this.threads.values()) if (sub.phase.kind === 'retry') times.push(sub.phase.at);
    for (const p of this.appends) if (p.stage.kind === 'retry') times.push(p.stage.at);
    return times.length ? Math.min(...times) : undefined;
  }

  handle(now, input) {
    this.now = Math.max(this.now, now);
    if (this.link.kind === 'closed') {
      if (['subscribe', 'append', 'unsubscribe'].includes(input.type)) throw new BubbleError('client_closed', 'the client is closed');
      return;
    }
    switch (input.type) {
      case 'subscribe': return this.subscribe(input.thread, input.fromSeq);
      case 'unsubscribe':
        if (this.threads.delete(input.thread) && this.link.kind === 'open') this.emit({ type: 'send', frame: unsubscribeFrame(input.thread) });
        return;
      case 'append': return this.append(input.append, input.thread, input.event);
      case 'opened': return this.opened();
      case 'frame': return this.frame(input.text);
      case 'closed': return this.lost();
      case 'token': return this.tokenArrived(input.token);
      case 'append_done': return this.appendDone(input.append, input.status, input.body);
      case 'append_failed': return this.appendFailed(input.append);
      case 'close': return this.close();
      case 'tick': return this.tick();
      default: throw new Error(`unknown input ${input.type}`);
    }
  }

  emit(output) {
    this.out.push(output);
  }

  delay(attempt) {
    return backoffDelay(this.rng, this.config.backoffBaseMs, this.config.backoffCapMs, attempt);
  }

  subscribe(thread, fromSeq) {
    if (!Number.isSafeInteger(fromSeq) || fromSeq < 1) throw new BubbleError('invalid_request', 'fromSeq must be at least 1');
    if (this.threads.has(thread)) throw new BubbleError('already_subscribed', `already subscribed to ${thread}`);
    const sub = { nextSeq: fromSeq, fromApplication: true, phase: { kind: 'idle' }, failures: 0 };
    if (this.link.kind === 'open') {
      sub.phase = { kind: 'pending' };
      this.emit({ type: 'send', frame: subscribeFrame(thread, fromSeq) });
    }
    this.threads.set(thread, sub);
  }

  append(append, thread, event) {
    if (this.appends.some((p) => p.append === append)) throw new Error(`append ${append} is already pending`);
    this.appendsMade += 1;
    // The event's own key, when it has one: the server refuses a header
    // that differs from it.
    const own = event?.idempotencyKey;
    this.appends.push({
      append,
      thread,
      key: typeof own === 'string' ? own : `${this.nonce}-${this.appendsMade}`,
      body: JSON.stringify(event),
      stage: { kind: 'queued' },
      failures: 0,
      refreshedToken: false,
    });
    this.postDue(false);
  }

  postDue(reconnected) {
    if (this.link.kind !== 'open') return;
    const seen = new Set();
    for (const p of this.appends) {
      if (seen.has(p.thread)) continue;
      seen.add(p.thread);
      const ready = p.stage.kind === 'queued' || (p.stage.kind === 'retry' && (reconnected || p.stage.at <= this.now));
      if (!ready) continue;
      p.stage = { kind: 'in_flight' };
      this.emit({ type: 'post', append: p.append, thread: p.thread, idempotencyKey: p.key, body: p.body, token: this.token });
    }
  }

  opened() {
    if (this.link.kind !== 'connecting') return;
    this.link = { kind: 'open' };
    this.reconnects = 0;
    this.emit({ type: 'state', state: 'open' });
    for (const [thread, sub] of [...this.threads].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      sub.phase = { kind: 'pending' };
      this.emit({ type: 'send', frame: subscribeFrame(thread, sub.nextSeq) });
    }
    this.postDue(true);
  }

  lost() {
    if (this.link.kind !== 'connecting' && this.link.kind !== 'open') return;
    for (const sub of this.threads.values()) sub.phase = { kind: 'idle' };
    const delay = this.delay(this.reconnects);
    this.reconnects += 1;
    const at = this.now + delay;
    this.link = { kind: 'waiting', at };
    this.emit({ type: 'state', state: 'reconnecting', attempt: this.reconnects, at });
  }

  tick() {
    if (this.link.kind === 'waiting' && this.link.at <= this.now) return this.reconnect();
    if (this.link.kind !== 'open') return;
    for (const [thread, sub] of [...this.threads].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (sub.phase.kind === 'retry' && sub.phase.at <= this.now) {
        sub.phase = { kind: 'pending' };
        this.emit({ type: 'send', frame: subscribeFrame(thread, sub.nextSeq) });
      }
    }
    this.postDue(false);
  }

  reconnect() {
    this.emit({ type: 'state', state: 'connecting' });
    if (this.config.refreshToken) {
      this.link = { kind: 'awaiting_token' };
      this.requestToken();
    } else {
      this.link = { kind: 'connecting' };
      this.emit({ type: 'connect', token: this.token });
    }
  }

  requestToken() {
    if (this.tokenRequested) return;
    this.tokenRequested = true;
    this.emit({ type: 'need_token' });
  }

  tokenArrived(token) {
    this.tokenRequested = false;
    this.token = token ?? null;
    for (const p of this.appends) if (p.stage.kind === 'awaiting_token') p.stage = { kind: 'queued' };
    if (this.link.kind === 'awaiting_token') {
      this.link = { kind: 'connecting' };
      this.emit({ type: 'connect', token: this.token });
    }
    this.postDue(false);
  }

  frame(raw) {
    if (this.link.kind !== 'open') return;
    let frame;
    try {
      frame = JSON.parse(raw);
    } catch {
      return;
    }
    if (!frame || typeof frame !== 'object') return;
    const thread = typeof frame.threadId === 'string' ? frame.threadId : undefined;
    switch (frame.type) {
      case 'thread.subscription_opened':
        if (thread !== undefined && isSeq(frame.throughSeq)) this.subscriptionOpened(thread, frame.throughSeq);
        return;
      case 'thread.event':
        if (thread !== undefined && frame.event && isSeq(frame.event.seq)) this.event(thread, frame.event.seq, frame.event);
        return;
      case 'thread.subscription_closed':
        if (thread !== undefined) this.subscriptionClosed(thread, text(frame.reason));
        return;
      case 'error': {
        const error = { code: text(frame.code), message: text(frame.message) };
        this.emit(thread !== undefined ? { type: 'thread_error', thread, ...error } : { type: 'connection_error', ...error });
        return;
      }
      default:
    }
  }

  subscriptionOpened(thread, throughSeq) {
    const sub = this.threads.get(thread);
    if (!sub || sub.phase.kind !== 'pending') return;
    sub.failures = 0;
    // The application's fromSeq past the head (the seed's "live only"
    // sentinel): the live events start right after the boundary. A
    // position of the client's own stays: a throughSeq below it comes from
    // a node that has not seen the latest commit yet, and the events up to
    // the position were delivered already.
    if (sub.fromApplication) sub.nextSeq = Math.min(sub.nextSeq, throughSeq + 1);
    sub.fromApplication = false;
    const caughtUp = sub.nextSeq > throughSeq;
    sub.phase = { kind: 'open', throughSeq, caughtUp };
    if (caughtUp) this.emit({ type: 'caught_up', thread, throughSeq });
  }

  event(thread, seq, event) {
    const sub = this.threads.get(thread);
    if (!sub || sub.phase.kind !== 'open') return;
    if (seq < sub.nextSeq) return;
    if (seq > sub.nextSeq) {
      sub.phase = { kind: 'pending' };
      this.emit({ type: 'send', frame: unsubscribeFrame(thread) });
      this.emit({ type: 'send', frame: subscribeFrame(thread, sub.nextSeq) });
      return;
    }
    sub.nextSeq = seq + 1;
    const { throughSeq } = sub.phase;
    const nowCaughtUp = !sub.phase.caughtUp && seq >= throughSeq;
    if (nowCaughtUp) sub.phase = { kind: 'open', throughSeq, caughtUp: true };
    this.emit({ type: 'event', thread, seq, event });
    if (nowCaughtUp) this.emit({ type: 'caught_up', thread, throughSeq });
  }

  subscriptionClosed(thread, reason) {
    const sub = this.threads.get(thread);
    if (!sub || (sub.phase.kind !== 'pending' && sub.phase.kind !== 'open')) return;
    const resubscribing = reason === 'internal';
    if (resubscribing) {
      const at = this.now + this.delay(sub.failures);
      sub.failures += 1;
      sub.phase = { kind: 'retry', at };
    } else {
      this.threads.delete(thread);
    }
    this.emit({ type: 'subscription_closed', thread, reason, resubscribing });
  }

  appendDone(append, status, body) {
    const p = this.appends.find((x) => x.append === append);
    if (!p || p.stage.kind !== 'in_flight') return;
    let parsed;
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = undefined;
    }
    if (status >= 200 && status < 300) {
      const event = parsed?.event;
      if (event && typeof event === 'object' && !Array.isArray(event)) {
        this.appends.splice(this.appends.indexOf(p), 1);
        this.emit({ type: 'appended', append, thread: p.thread, event });
        this.postDue(false);
        return;
      }
    }
    if (status === 401 && this.config.refreshToken && !p.refreshedToken) {
      p.refreshedToken = true;
      p.stage = { kind: 'awaiting_token' };
      this.requestToken();
      return;
    }
    if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
      const error = parsed?.error;
      this.appends.splice(this.appends.indexOf(p), 1);
      // An answer without the server's error came from something in between
      // (a proxy's page, say).
      const [code, message] =
        typeof error?.code === 'string'
          ? [error.code, text(error?.message)]
          : ['unavailable', `HTTP ${status} without a JSON body`];
      this.emit({ type: 'append_rejected', append, thread: p.thread, code, message });
      this.postDue(false);
      return;
    }
    this.appendFailed(append);
  }

  appendFailed(append) {
    const p = this.appends.find((x) => x.append === append);
    if (!p || p.stage.kind !== 'in_flight') return;
    const at = this.now + this.delay(p.failures);
    p.failures += 1;
    p.stage = { kind: 'retry', at };
  }

  close() {
    if (this.link.kind === 'connecting' || this.link.kind === 'open') this.emit({ type: 'disconnect' });
    this.link = { kind: 'closed' };
    this.threads.clear();
    for (const p of this.appends.splice(0)) {
      this.emit({
        type: 'append_rejected',
        append: p.append,
        thread: p.thread,
        code: 'client_closed',
        message: 'The client was closed before the append landed.',
      });
    }
    this.emit({ type: 'state', state: 'closed' });
  }
}
