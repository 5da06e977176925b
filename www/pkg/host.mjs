// BubbleHost: drives the wasm engine for any JavaScript runtime. It owns the
// sockets, the timer and the storage; the engine decides everything else.
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
// Runtime adapters give it sockets of this shape:
//   { send(text), ping(), close(code) (no code: drop without a close frame),
//     queued() -> frames not yet written,
//     flushed(callback) -> calls back once everything sent so far is written }
// and report what the peer does through the connection object that
// `openThreads` / `openChannels` return: text(data), binary(bytes), pong(), closed().

import { MemoryStorage, answerRead, commitBatches } from './storage.mjs';

export { MemoryStorage };

const ENGINE_PREFIXES = ['/v1/threads/', '/api/apps/'];

/** Whether the engine answers `path` (mirrors bubble_core::http::is_engine_route). */
export function isEngineRoute(path) {
  return path === '/v1/threads' || ENGINE_PREFIXES.some((p) => path.startsWith(p));
}

/** The bearer token of an `Authorization` header value, or null. */
export function bearerToken(header) {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return match ? match[1] : null;
}

export class BubbleHost {
  #engine;
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
  #queueLimit;

  /**
   * Builds a host: `Engine` is the wasm class, `config` the JSON config
   * (keys of bubble.toml), `storage` a Durable Object-shaped storage (a
   * MemoryStorage when absent). Clock and timers may be replaced (the
   * offline page runs on simulated time).
   */
  static create(Engine, options = {}) {
    const engine = new Engine(JSON.stringify(options.config ?? {}), options.seed ?? Date.now());
    return new BubbleHost(engine, options);
  }

  constructor(engine, options = {}) {
    this.#engine = engine;
    this.#storage = options.storage ?? new MemoryStorage();
    this.#now = options.now ?? (() => Date.now());
    this.#setTimer = options.setTimer ?? ((fn, ms) => unrefTimer(setTimeout(fn, ms)));
    this.#clearTimer = options.clearTimer ?? ((handle) => clearTimeout(handle));
    this.#defer = options.defer ?? ((fn) => queueMicrotask(fn));
    this.#onError = options.onError ?? ((err) => console.error('bubble:', err));
    this.#queueLimit = engine.limits().outbound_queue_frames;
    this.wsPath = options.config?.ws_path ?? '/v1/ws';
    this.limits = engine.limits();
  }

  /** Answers an HTTP request for an engine route with a standard Response. */
  async handleHttp(request) {
    const url = new URL(request.url);
    const body = new Uint8Array(await request.arrayBuffer());
    const answer = await new Promise((resolve) =>
      this.request(
        {
          method: request.method,
          path: decodePath(url.pathname),
          query: url.search.slice(1),
          authorization: request.headers.get('authorization') ?? undefined,
          idempotencyKey: request.headers.get('idempotency-key') ?? undefined,
          body,
        },
        resolve,
      ),
    );
    return toResponse(answer);
  }

  /**
   * The same, without Request/Response: `onAnswer({status, contentType, body,
   * retryAfter?})` is called as soon as the engine answers (synchronously
   * when the storage answers synchronously).
   */
  request({ method, path, query = '', authorization, idempotencyKey, body = new Uint8Array() }, onAnswer) {
    const req = this.#nextReq++;
    this.#requests.set(req, onAnswer);
    this.#drive((now) =>
      this.#engine.handleHttp(now, req, method, path, query, authorization, idempotencyKey, body),
    );
  }

  /** Decides a `/socket` upgrade: null to accept, else the Response to send. */
  channelHandshake(appKey) {
    const refusal = this.#engine.channelHandshake(appKey ?? undefined);
    return refusal ? toResponse(refusal) : null;
  }

  /** A `/v1/ws` socket opened; returns the connection to report peer activity to. */
  openThreads(socket, token) {
    return this.#open(socket, (now, conn) => this.#engine.openThreads(now, conn, token ?? undefined));
  }

  /** A `/socket` opened (after `channelHandshake` accepted it). */
  openChannels(socket, appKey, protocol2) {
    return this.#open(socket, (now, conn) =>
      this.#engine.openChannels(now, conn, appKey, Boolean(protocol2)),
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

  /** Closes every socket (1001) and stops the timer. */
  shutdown() {
    for (const entry of this.#sockets.values()) this.#close(entry, 1001);
    this.#disarm();
  }

  #open(socket, input) {
    const conn = this.#nextConn++;
    const entry = { socket, closing: false };
    this.#sockets.set(conn, entry);
    this.#drive((now) => input(now, conn));
    const live = () => this.#sockets.get(conn) === entry && !entry.closing;
    return {
      id: conn,
      text: (data) => live() && this.#drive((now) => this.#engine.frame(now, conn, data)),
      binary: (bytes) => live() && this.#drive((now) => this.#engine.binaryFrame(now, conn, bytes)),
      pong: () => live() && this.#drive((now) => this.#engine.pong(now, conn)),
      closed: () => {
        if (this.#sockets.get(conn) !== entry) return;
        this.#sockets.delete(conn);
        this.#drive((now) => this.#engine.closed(now, conn));
      },
    };
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
          input(this.#now());
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
  }

  #perform(out) {
    const entry = this.#sockets.get(out.conn);
    switch (out.kind) {
      case 'send':
        if (!entry || entry.closing) return;
        entry.socket.send(out.frame);
        // A reader that cannot keep up is closed rather than buffered without bound.
        if (entry.socket.queued() > this.#queueLimit) this.#close(entry, 1013);
        return;
      case 'ping':
        if (entry && !entry.closing) entry.socket.ping();
        return;
      case 'close':
        if (entry) this.#close(entry, out.code ?? undefined);
        return;
      case 'wantDrained':
        entry?.socket.flushed(() =>
          this.#defer(() => {
            if (this.#sockets.get(out.conn) === entry) {
              this.#drive((now) => this.#engine.drained(now, out.conn));
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
        answerRead(this.#storage, out.query, (err, json) =>
          this.#drive((now) =>
            err ? this.#engine.readFailed(now, read, String(err?.message ?? err)) : this.#engine.readDone(now, read, json),
          ),
        );
        return;
      }
      case 'persist':
        this.#unsaved.push(out);
        return;
      default:
        this.#onError(new Error(`unknown output kind ${out.kind}`));
    }
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
    this.#timer = this.#setTimer(() => {
      this.#timer = null;
      this.#timerDue = null;
      this.#drive((now) => this.#engine.tick(now));
    }, Math.max(0, due - this.#now()));
  }

  #disarm() {
    if (this.#timer !== null) this.#clearTimer(this.#timer);
    this.#timer = null;
    this.#timerDue = null;
  }
}

function decodePath(path) {
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

// A response without a body (204) carries no Content-Type.
function toResponse({ status, contentType, body, retryAfter }) {
  const empty = status === 204 || body === '';
  const headers = empty ? {} : { 'content-type': contentType };
  if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
  return new Response(empty ? null : body, { status, headers });
}

function unrefTimer(handle) {
  handle?.unref?.();
  return handle;
}
