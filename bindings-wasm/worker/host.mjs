// BubbleHost: drives the wasm engine for any JavaScript runtime. It owns the
// sockets, the timer and the storage; the core decides everything else,
// including what a request is (the wasm `Edge`: routes, bearer, query flags,
// path decoding), when a reader is too slow, and the time the engine sees
// (a `MonotonicClock` over the host's clock).
//
// After every input it drains `pollOutput()` to `undefined`. `read` outputs
// go to the storage at once and their answers are fed back whenever they
// arrive, in any order; `persist` batches are committed in order (several
// at once: group commit) and reported in order. Then it re-arms one timer
// from `pollTimeout()`.
//
// The storage is any object in the shape of Durable Object storage (see
// storage.mjs for the methods and the key layout); a MemoryStorage by default.
//
// With `auth.jwks.url`, the host GETs the key set whenever the engine asks
// (`fetchKeys`: at start, on its refresh schedule, for an unknown `kid`)
// and hands back the document or the failure; when to ask is the engine's.
//
// Runtime adapters route each request with `route()`, then either `answer()`
// it or, for a socket route, `upgrade()` it. They give the host sockets of
// this shape:
//   { send(text), ping(), close(code) (no code: drop without a close frame),
//     queued() -> frames not yet written,
//     flushed(callback) -> calls back once everything sent so far is written }
// and report what the peer does through the connection object that `open`
// returns: text(data), binary(bytes), pong(), closed().
//
// Runtimes whose sockets outlive the host (a Durable Object evicted while
// its hibernatable sockets stay open, durable.mjs) keep each `/v1/ws`
// socket's `subscriptions()` (`onTouched` names the connections that may
// have moved) and `resume()` it on the next host; `idle()` says when
// nothing is in flight, and `tick()` is the input of a timer that is an
// alarm.

import { MemoryStorage, answerRead, commitBatches } from './storage.mjs';

/** How long one key set fetch may take. */
const KEY_FETCH_TIMEOUT_MS = 10_000;
/** The largest key set document read. */
const MAX_KEY_SET_BYTES = 1024 * 1024;

export { MemoryStorage };

/** Header `name` of a `Headers` object or of a plain object of lower-case names (Node's). */
export function header(headers, name) {
  const value = typeof headers?.get === 'function' ? headers.get(name) : headers?.[name];
  return Array.isArray(value) ? value.join(', ') : value ?? undefined;
}

export class BubbleHost {
  #engine;
  #edge;
  #Edge;
  #clock;
  #storage;
  #now;
  #setTimer;
  #clearTimer;
  #defer;
  #onError;
  #sockets = new Map();
  #requests = new Map();
  #nextConn = 1;
  #nextReq = 1;
  #inputs = [];
  #unsaved = [];
  #saving = false;
  #pumping = false;
  #timer = null;
  #timerDue = null;
  #reads = 0; // reads in flight
  #idle = [];
  #touched = new Set();
  #onTouched;
  #fetch;
  #keyFetches = 0; // key set fetches in flight

  /**
   * Builds a host: `wasm` holds the wasm classes (`Engine`, `Edge`,
   * `MonotonicClock`), `config` the JSON config (keys of bubble.toml),
   * `storage` a Durable Object-shaped storage (a MemoryStorage when
   * absent). Clock and timers may be replaced (the offline page runs on
   * simulated time).
   */
  static create(wasm, options = {}) {
    const engine = new wasm.Engine(JSON.stringify(options.config ?? {}), options.seed ?? Date.now());
    return new BubbleHost(wasm, engine, options);
  }

  constructor(wasm, engine, options = {}) {
    this.#engine = engine;
    this.#Edge = wasm.Edge;
    this.#edge = new wasm.Edge(JSON.stringify(options.config ?? {}));
    this.#clock = new wasm.MonotonicClock();
    this.#storage = options.storage ?? new MemoryStorage();
    this.#now = options.now ?? (() => Date.now());
    this.#setTimer = options.setTimer ?? ((fn, ms) => unrefTimer(setTimeout(fn, ms)));
    this.#clearTimer = options.clearTimer ?? ((handle) => clearTimeout(handle));
    this.#defer = options.defer ?? ((fn) => queueMicrotask(fn));
    this.#onError = options.onError ?? ((err) => console.error('bubble:', err));
    this.#onTouched = options.onTouched ?? null;
    this.#fetch = options.fetch ?? globalThis.fetch?.bind(globalThis);
    this.wsPath = this.#edge.wsPath;
    this.limits = engine.limits();
    // A key set to fetch: the engine asks for it on its first tick.
    if (engine.keyUrl !== undefined) this.tick();
  }

  /**
   * What a request is (a plain `Route` object, decided by the core): from
   * its method, its raw path and query (without `?`) as they arrived, and
   * its headers (a `Headers` or a plain object of lower-case names).
   */
  route({ method, path, query = '', headers }) {
    return this.#edge.routeRequest(method, path, query, headers);
  }

  /**
   * The answer `{status, contentType, body, retryAfter?}` to a request
   * that is not upgraded: `route` from `route()`, `request` its method,
   * path, query, headers and body bytes.
   */
  answer(route, request = {}) {
    const answer = this.#answer(route, request);
    if (!route.cors) return answer;
    const withCors = (a) => ({ ...a, headers: [...(a.headers ?? []), ...route.cors] });
    return answer instanceof Promise ? answer.then(withCors) : withCors(answer);
  }

  #answer(route, { method, path, query = '', headers, body }) {
    switch (route.kind) {
      case 'engine':
        return new Promise((resolve) =>
          this.request(
            {
              method,
              path,
              query,
              authorization: header(headers, 'authorization'),
              idempotencyKey: header(headers, 'idempotency-key'),
              body,
            },
            resolve,
          ),
        );
      case 'health':
        return this.#Edge.healthy();
      case 'ready':
        return this.#Edge.ready();
      case 'metrics':
        return this.#engine.metricsResponse();
      case 'page':
        return this.#Edge.notFound();
      case 'threadsSocket':
      case 'channelsSocket':
        // A socket route the runtime is not upgrading (no `Connection: upgrade`).
        return this.#Edge.notAnUpgrade();
      default:
        return route;
    }
  }

  /**
   * Decides a socket route: `{open(socket) -> HostConnection}` to upgrade
   * (for `/socket` and `/app/:key`, once the engine accepted the handshake), `{refused}`
   * with the answer to send instead, or `null` when `route` is no socket.
   */
  upgrade(route) {
    if (route.kind === 'threadsSocket') {
      return { open: (socket) => this.#open(socket, (now, conn) => this.#engine.openThreads(now, conn, route.token ?? undefined)) };
    }
    if (route.kind !== 'channelsSocket') return null;
    const { accepted, refused } = this.#engine.channelHandshake(route.appKey ?? undefined, route.protocol2, route.pusher, route.version ?? undefined);
    if (refused) return { refused };
    return { open: (socket) => this.#open(socket, (now, conn) => this.#engine.openChannels(now, conn, accepted)) };
  }

  /**
   * An engine request (a route of kind `engine`; path and query raw):
   * `onAnswer({status, contentType, body, retryAfter?})` is called as soon
   * as the engine answers (synchronously when the storage answers synchronously).
   */
  request({ method, path, query = '', authorization, idempotencyKey, body = new Uint8Array() }, onAnswer) {
    const req = this.#nextReq++;
    this.#requests.set(req, onAnswer);
    this.#drive((now) =>
      this.#engine.handleHttp(now, req, method, path, query, authorization, idempotencyKey, body),
    );
  }

  /**
   * Another engine over the same storage committed to `threadId`, whose
   * record is now at `headSeq` and `version` (for a broker between engines:
   * it can learn of commits from the `t/<threadId>` records they put).
   */
  changed(threadId, headSeq, version) {
    this.#drive((now) => this.#engine.changed(now, threadId, headSeq, version));
  }

  /**
   * A `/v1/ws` socket that outlived the engine that served it (a Durable
   * Object's hibernated socket), opened again with the bearer `token` it
   * opened with and subscribed again from `subscriptions`, the
   * `[threadId, nextSeq]` pairs `subscriptions()` reported for it before.
   * Returns its connection, as `upgrade(route).open` does.
   */
  resume(socket, token, subscriptions = []) {
    const threads = subscriptions.map(([threadId]) => threadId);
    const seqs = subscriptions.map(([, next]) => next);
    return this.#open(socket, (now, conn) => this.#engine.resumeThreads(now, conn, token ?? undefined, threads, seqs));
  }

  /**
   * Where the subscriptions of `/v1/ws` connection `id` stand:
   * `[threadId, nextSeq]` pairs, or `undefined` for no open `/v1/ws`
   * connection. Exact once `idle()` resolves.
   */
  subscriptions(id) {
    return this.#engine.threadSubscriptions(id);
  }

  /** The engine's deadline passed (a runtime alarm fired): runs its timers and re-arms. */
  tick() {
    this.#timer = null;
    this.#timerDue = null;
    this.#drive((now) => this.#engine.tick(now));
  }

  /**
   * Resolves once nothing is in flight: no read, commit or drain awaited,
   * and every output performed.
   */
  idle() {
    if (this.#quiet()) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #quiet() {
    if (this.#reads > 0 || this.#keyFetches > 0 || [...this.#sockets.values()].some((entry) => entry.draining)) return false;
    return !this.#saving && this.#unsaved.length === 0 && this.#inputs.length === 0 && !this.#pumping;
  }

  /** Closes every socket (1001) and stops the timer. */
  shutdown() {
    for (const entry of this.#sockets.values()) this.#close(entry, 1001);
    this.#disarm();
  }

  #open(socket, input) {
    const conn = this.#nextConn++;
    const entry = { socket, closing: false, draining: false };
    this.#sockets.set(conn, entry);
    this.#drive((now) => input(now, conn));
    const live = () => this.#sockets.get(conn) === entry && !entry.closing;
    const touch = () => this.#touched.add(conn);
    return {
      id: conn,
      text: (data) => live() && (touch(), this.#drive((now) => this.#engine.frame(now, conn, data))),
      binary: (bytes) => live() && (touch(), this.#drive((now) => this.#engine.binaryFrame(now, conn, bytes))),
      pong: () => live() && this.#drive((now) => this.#engine.pong(now, conn)),
      closed: () => {
        if (this.#sockets.get(conn) !== entry) return;
        this.#sockets.delete(conn);
        this.#drive((now) => this.#engine.closed(now, conn));
      },
    };
  }

  // The host's clock as the engine must see it: never going backwards.
  #time() {
    return this.#clock.now(this.#now());
  }

  // One input, then everything it caused. Inputs arriving while outputs are
  // being performed (a storage that answered at once) wait their turn.
  #drive(input) {
    this.#inputs.push(input);
    this.#pump();
  }

  #pump() {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      for (;;) {
        for (let out; (out = this.#engine.pollOutput()); ) this.#perform(out);
        this.#save();
        const input = this.#inputs.shift();
        if (!input) break;
        try {
          input(this.#time());
        } catch (err) {
          this.#onError(err);
        }
      }
    } catch (err) {
      this.#onError(err);
    } finally {
      this.#pumping = false;
    }
    this.#arm();
    if (this.#touched.size > 0 && this.#onTouched) {
      const touched = this.#touched;
      this.#touched = new Set();
      try {
        this.#onTouched(touched);
      } catch (err) {
        this.#onError(err);
      }
    }
    if (this.#idle.length > 0 && this.#quiet()) for (const resolve of this.#idle.splice(0)) resolve();
  }

  // Sends `frame` to `conn` unless it is gone or closing.
  #send(conn, frame) {
    const entry = this.#sockets.get(conn);
    if (!entry || entry.closing) return;
    // A reader that cannot keep up is closed rather than buffered without
    // bound; the frame that found its queue full is not sent.
    const slow = this.#edge.admitFrame(entry.socket.queued());
    if (slow === undefined) entry.socket.send(frame);
    else this.#close(entry, slow);
    this.#touched.add(conn);
  }

  #perform(out) {
    const entry = this.#sockets.get(out.conn);
    switch (out.kind) {
      case 'send':
        this.#send(out.conn, out.frame);
        return;
      case 'sendAll':
        for (const conn of out.conns) this.#send(conn, out.frame);
        return;
      case 'ping':
        if (entry && !entry.closing) entry.socket.ping();
        return;
      case 'close':
        if (entry) this.#close(entry, out.code ?? undefined);
        return;
      case 'wantDrained':
        if (!entry) return;
        entry.draining = true;
        entry.socket.flushed(() =>
          this.#defer(() => {
            entry.draining = false;
            if (this.#sockets.get(out.conn) === entry) {
              this.#drive((now) => this.#engine.drained(now, out.conn));
            } else {
              this.#pump(); // nothing to report, but idle() may be waiting
            }
          }),
        );
        return;
      case 'respond': {
        const resolve = this.#requests.get(out.req);
        this.#requests.delete(out.req);
        resolve?.(out);
        return;
      }
      case 'read': {
        const { read } = out;
        this.#reads += 1;
        answerRead(this.#storage, out.query, (err, json) => {
          this.#reads -= 1;
          this.#drive((now) =>
            err ? this.#engine.readFailed(now, read, String(err?.message ?? err)) : this.#engine.readDone(now, read, json),
          );
        });
        return;
      }
      case 'persist':
        this.#unsaved.push(out);
        return;
      case 'fetchKeys':
        this.#fetchKeys();
        return;
      default:
        this.#onError(new Error(`unknown output kind ${out.kind}`));
    }
  }

  // GETs the key set and reports it; a failure is logged and reported, the
  // set in use staying.
  #fetchKeys() {
    const url = this.#engine.keyUrl;
    this.#keyFetches += 1;
    const settle = (input) => {
      this.#keyFetches -= 1;
      this.#drive((now) => {
        const why = input(now);
        if (why !== undefined) this.#onError(new Error(`JWKS not loaded from ${url}: ${why}`));
      });
    };
    fetchKeySet(this.#fetch, url).then(
      (document) => settle((now) => this.#engine.keysLoaded(now, document)),
      (err) =>
        settle((now) => {
          this.#engine.keysFailed(now);
          return String(err?.message ?? err);
        }),
    );
  }

  #close(entry, code) {
    entry.closing = true;
    entry.socket.close(code);
  }

  // Commits the waiting batches, unless a commit is under way (batches are
  // committed and reported in order). Each batch is reported on its own
  // turn: `persisted` for a run of whole batches, `persistFailed` for one
  // with refused groups.
  #save() {
    if (this.#saving || this.#unsaved.length === 0) return;
    const outs = this.#unsaved.splice(0);
    this.#saving = true;
    commitBatches(this.#storage, outs.map((o) => o.writes), (err, conflicts) => {
      if (err) {
        // Nothing depending on these writes is ever released, and nothing
        // after them is written: the host is unhealthy and says so.
        this.#onError(err);
        return;
      }
      this.#saving = false;
      let whole = null;
      outs.forEach(({ batch }, i) => {
        if (conflicts[i].length === 0) {
          whole = batch;
          return;
        }
        if (whole !== null) this.#inputs.push(this.#persisted(whole));
        whole = null;
        this.#inputs.push((now) => this.#engine.persistFailed(now, batch, conflicts[i]));
      });
      if (whole !== null) this.#inputs.push(this.#persisted(whole));
      this.#pump();
    });
  }

  #persisted(batch) {
    return (now) => this.#engine.persisted(now, batch);
  }

  #arm() {
    const due = this.#engine.pollTimeout();
    if (due === this.#timerDue) return;
    this.#disarm();
    if (due === undefined) return;
    this.#timerDue = due;
    this.#timer = this.#setTimer(() => this.tick(), Math.max(0, due - this.#now()));
  }

  #disarm() {
    if (this.#timer !== null) this.#clearTimer(this.#timer);
    this.#timer = null;
    this.#timerDue = null;
  }
}

/**
 * Feeds a runtime WebSocket's messages and its end to `conn`, a connection
 * `BubbleHost` opened for it.
 */
export function feedSocket(ws, conn) {
  ws.addEventListener('message', (event) =>
    typeof event.data === 'string' ? conn.text(event.data) : conn.binary(new Uint8Array(event.data)),
  );
  ws.addEventListener('close', () => conn.closed());
  ws.addEventListener('error', () => conn.closed());
}

/** The headers and body (null when empty) to write for an answer. */
export function answerParts({ status, contentType, body, retryAfter, headers: more = [] }) {
  // A response without a body (204) carries no Content-Type.
  const empty = status === 204 || body === '';
  const headers = empty ? {} : { 'content-type': contentType };
  if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
  for (const [name, value] of more) headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  return { status, headers, body: empty ? null : body };
}

/** An answer as a standard Response. */
export function toResponse(answer) {
  const { status, headers, body } = answerParts(answer);
  return new Response(body, { status, headers });
}

// The document at `url`: a `2xx` answer of at most MAX_KEY_SET_BYTES,
// within KEY_FETCH_TIMEOUT_MS.
async function fetchKeySet(fetch, url) {
  if (url === undefined) throw new Error('no auth.jwks.url is configured');
  if (typeof fetch !== 'function') throw new Error('this runtime has no fetch');
  const signal = AbortSignal.timeout(KEY_FETCH_TIMEOUT_MS);
  const res = await fetch(url, { headers: { accept: 'application/json' }, signal });
  if (!res.ok) {
    await res.body?.cancel();
    throw new Error(`answered ${res.status}`);
  }
  const chunks = [];
  let size = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_KEY_SET_BYTES) {
      await reader.cancel();
      throw new Error(`the document is larger than ${MAX_KEY_SET_BYTES} bytes`);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}

function unrefTimer(handle) {
  handle?.unref?.();
  return handle;
}
