// Bubble's JavaScript client: a host for the client rules in ./core.js.
// It owns the WebSocket, the timers and fetch; every decision (positions,
// dedupe, backoff, retries, idempotency keys) is the core's.

import { BubbleError, ClientCore } from './core.js';

export { BubbleError };

function randomSeed() {
  const words = new Uint32Array(2);
  globalThis.crypto.getRandomValues(words);
  return (BigInt(words[0]) << 32n) | BigInt(words[1]);
}

async function defaultWebSocket() {
  if (globalThis.WebSocket) return globalThis.WebSocket;
  try {
    return (await import('ws')).default;
  } catch {
    throw new Error('No WebSocket: pass { WebSocket } or install the "ws" package.');
  }
}

/** Listeners by event name. */
class Emitter {
  #listeners = new Map();

  on(name, listener) {
    if (!this.#listeners.has(name)) this.#listeners.set(name, new Set());
    this.#listeners.get(name).add(listener);
    return () => this.#listeners.get(name)?.delete(listener);
  }

  emit(name, value) {
    for (const listener of this.#listeners.get(name) ?? []) listener(value);
  }
}

/** Events of one subscription, pushed to a callback and to async iterators. */
class Subscription {
  #queue = [];
  #waiters = [];
  #iterating = false;
  #ended = null;
  #caughtUp;
  #settleCaughtUp;

  constructor(onEvent, unsubscribe) {
    this.onEvent = onEvent;
    this.unsubscribe = () => {
      unsubscribe();
      this._end(undefined, new BubbleError('unsubscribed', 'The subscription was ended before it caught up.'));
    };
    this.#caughtUp = new Promise((resolve, reject) => {
      this.#settleCaughtUp = { resolve, reject };
    });
    // Nobody has to await it: a subscription that ends early must not be an unhandled rejection.
    this.#caughtUp.catch(() => {});
  }

  /** Resolves with `throughSeq` once the backlog has been delivered; rejects if the subscription ends first. */
  get caughtUp() {
    return this.#caughtUp;
  }

  _caughtUp(throughSeq) {
    this.#settleCaughtUp.resolve(throughSeq);
  }

  _push(event) {
    this.onEvent?.(event);
    // With a callback, events are kept for an iterator only once one is started.
    if (this.onEvent && !this.#iterating) return;
    const waiter = this.#waiters.shift();
    if (waiter) waiter.resolve({ value: event, done: false });
    else this.#queue.push(event);
  }

  /** Ends it: iterators reject with `error` (or end), `caughtUp` rejects with `error` or `early`. */
  _end(error, early = error) {
    if (this.#ended) return;
    this.#ended = { error };
    this.#settleCaughtUp.reject(early);
    for (const waiter of this.#waiters.splice(0)) {
      if (error) waiter.reject(error);
      else waiter.resolve({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator]() {
    this.#iterating = true;
    return {
      next: () => {
        if (this.#queue.length) return Promise.resolve({ value: this.#queue.shift(), done: false });
        if (this.#ended) {
          return this.#ended.error ? Promise.reject(this.#ended.error) : Promise.resolve({ value: undefined, done: true });
        }
        return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
      },
      return: () => {
        this.unsubscribe();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}

/** One thread, seen through a connection. */
class Thread extends Emitter {
  #connection;

  constructor(connection, id) {
    super();
    this.#connection = connection;
    this.id = id;
  }

  /** Follows the thread from `fromSeq` (default 1); see index.d.ts. */
  subscribe(options = {}, onEvent = undefined) {
    return this.#connection._subscribe(this, options.fromSeq ?? 1, onEvent);
  }

  /** Appends `event`; resolves with the stored event (once, however often it is retried). */
  append(event) {
    return this.#connection._append(this.id, event);
  }

  /** `GET /v1/threads/:id/messages`: the folded AI SDK messages, `throughSeq` and `activeRuns`. */
  messages() {
    return this.#connection._get(`/v1/threads/${encodeURIComponent(this.id)}/messages`);
  }

  /** Pages of `GET /v1/threads/:id/events`, from `fromSeq` until the last page. */
  async *history(options = {}) {
    let fromSeq = options.fromSeq ?? 1;
    const limit = options.limit ?? 100;
    while (fromSeq !== null) {
      const path = `/v1/threads/${encodeURIComponent(this.id)}/events?fromSeq=${fromSeq}&limit=${limit}`;
      const page = await this.#connection._get(path);
      yield page;
      fromSeq = page.nextSeq;
    }
  }
}

/** A connection to a Bubble server; see index.d.ts. */
class Connection extends Emitter {
  #core;
  #base;
  #options;
  #WebSocket;
  #socket = null;
  #timer = null;
  #threads = new Map();
  #subscriptions = new Map();
  #appends = new Map();
  #nextAppend = 1;

  constructor(url, options, WebSocketImpl) {
    super();
    this.#base = new URL(url);
    this.#options = options;
    this.#WebSocket = WebSocketImpl;
    this.state = 'connecting';
    const backoff = options.backoff ?? {};
    const config = {
      token: options.token ?? null,
      refreshToken: typeof options.getToken === 'function',
      backoffBaseMs: backoff.baseMs ?? 500,
      backoffCapMs: backoff.capMs ?? 30000,
    };
    this.#core = new ClientCore(config, options.seed ?? randomSeed());
    this.#pump();
  }

  /** The thread `id` (one object per id). */
  thread(id) {
    if (!this.#threads.has(id)) this.#threads.set(id, new Thread(this, id));
    return this.#threads.get(id);
  }

  /** Closes the connection for good; pending appends reject with `client_closed`. */
  close() {
    this.#input({ type: 'close' });
  }

  _subscribe(thread, fromSeq, onEvent) {
    const subscription = new Subscription(onEvent, () => {
      if (this.#subscriptions.get(thread.id) === subscription) {
        this.#subscriptions.delete(thread.id);
        this.#input({ type: 'unsubscribe', thread: thread.id });
      }
    });
    this.#input({ type: 'subscribe', thread: thread.id, fromSeq });
    this.#subscriptions.set(thread.id, subscription);
    return subscription;
  }

  _append(thread, event) {
    const append = this.#nextAppend++;
    return new Promise((resolve, reject) => {
      this.#appends.set(append, { resolve, reject });
      this.#input({ type: 'append', append, thread, event });
    });
  }

  async _get(path) {
    const headers = this.#core.token ? { authorization: `Bearer ${this.#core.token}` } : {};
    const response = await this.#fetch(new URL(path, this.#base), { headers });
    const text = await response.text();
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    // An answer that is not the server's JSON came from something in between.
    if (body === undefined) throw new BubbleError('unavailable', `HTTP ${response.status} without a JSON body`);
    if (!response.ok) throw new BubbleError(body?.error?.code ?? 'internal', body?.error?.message);
    return body;
  }

  #fetch(url, init) {
    const fetchImpl = this.#options.fetch ?? globalThis.fetch;
    return fetchImpl(url, init);
  }

  #input(input) {
    this.#core.handle(Date.now(), input);
    this.#pump();
  }

  #pump() {
    for (let output = this.#core.pollOutput(); output; output = this.#core.pollOutput()) this.#perform(output);
    clearTimeout(this.#timer);
    const at = this.#core.pollTimeout();
    if (at !== undefined) this.#timer = setTimeout(() => this.#input({ type: 'tick' }), Math.max(0, at - Date.now()));
  }

  #perform(output) {
    switch (output.type) {
      case 'state':
        this.state = output.state;
        if (output.state === 'closed') {
          const closed = new BubbleError('client_closed', 'The client was closed before the subscription caught up.');
          for (const subscription of this.#subscriptions.values()) subscription._end(undefined, closed);
          this.#subscriptions.clear();
        }
        this.emit('state', output);
        break;
      case 'connect':
        this.#open(output.token);
        break;
      case 'need_token':
        Promise.resolve()
          .then(() => this.#options.getToken())
          .then(
            (token) => this.#input({ type: 'token', token: token ?? null }),
            () => this.#input({ type: 'token', token: this.#core.token }),
          );
        break;
      case 'send':
        this.#socket?.send(output.frame);
        break;
      case 'disconnect': {
        const socket = this.#socket;
        this.#socket = null;
        socket?.close(1000);
        break;
      }
      case 'post':
        this.#post(output);
        break;
      case 'event':
        this.#subscriptions.get(output.thread)?._push(output.event);
        break;
      case 'caught_up':
        this.#subscriptions.get(output.thread)?._caughtUp(output.throughSeq);
        break;
      case 'appended':
        this.#appends.get(output.append)?.resolve(output.event);
        this.#appends.delete(output.append);
        break;
      case 'append_rejected':
        this.#appends.get(output.append)?.reject(new BubbleError(output.code, output.message));
        this.#appends.delete(output.append);
        break;
      case 'thread_error':
        this.thread(output.thread).emit('error', new BubbleError(output.code, output.message));
        break;
      case 'subscription_closed':
        this.thread(output.thread).emit('closed', output);
        if (!output.resubscribing) {
          this.#subscriptions.get(output.thread)?._end(new BubbleError(output.reason, `Subscription closed: ${output.reason}`));
          this.#subscriptions.delete(output.thread);
        }
        break;
      case 'connection_error':
        this.emit('error', new BubbleError(output.code, output.message));
        break;
      default:
    }
  }

  #open(token) {
    const url = new URL('/v1/ws', this.#base);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    if (token) url.searchParams.set('access_token', token);
    let socket;
    try {
      socket = new this.#WebSocket(url.href);
    } catch {
      queueMicrotask(() => this.#input({ type: 'closed' }));
      return;
    }
    this.#socket = socket;
    let gone = false;
    const lost = () => {
      if (gone) return;
      gone = true;
      if (this.#socket === socket) {
        this.#socket = null;
        this.#input({ type: 'closed' });
      }
    };
    socket.onopen = () => {
      if (this.#socket === socket) this.#input({ type: 'opened' });
    };
    socket.onmessage = (message) => {
      if (this.#socket === socket && typeof message.data === 'string') this.#input({ type: 'frame', text: message.data });
    };
    socket.onclose = lost;
    socket.onerror = () => {
      lost();
      try {
        socket.close();
      } catch {
        // already closing
      }
    };
  }

  async #post({ append, thread, idempotencyKey, body, token }) {
    const headers = { 'content-type': 'application/json', 'idempotency-key': idempotencyKey };
    if (token) headers.authorization = `Bearer ${token}`;
    const url = new URL(`/v1/threads/${encodeURIComponent(thread)}/events`, this.#base);
    let input;
    try {
      const response = await this.#fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(30000) });
      input = { type: 'append_done', append, status: response.status, body: await response.text() };
    } catch {
      input = { type: 'append_failed', append };
    }
    this.#input(input);
  }
}

/**
 * Connects to the Bubble server at `url` (its HTTP base, e.g.
 * `https://bubble.example.com`); see index.d.ts.
 */
export async function connect(url, options = {}) {
  const WebSocketImpl = options.WebSocket ?? (await defaultWebSocket());
  return new Connection(url, options, WebSocketImpl);
}

export { ClientCore } from './core.js';
