// BubbleHost: drives the wasm engine for any JavaScript runtime. It owns the
// sockets, the timer and the storage; the engine decides everything else.
//
// After every input it drains `pollOutput()` to `undefined`, hands `persist`
// batches to the storage (several at once: group commit) and reports them
// durable with `persisted()`, then re-arms one timer from `pollTimeout()`.
//
// Runtime adapters give it sockets of this shape:
//   { send(text), ping(), close(code), queued() -> frames not yet written,
//     flushed(callback) -> calls back once everything sent so far is written }
// and report what the peer does through the connection object that
// `openThreads` / `openChannels` return: text(data), binary(bytes), pong(), closed().

/** Static, in-memory storage: keeps every write in order. */
export class MemoryLog {
  #writes = [];

  /** Every write stored so far, oldest first. */
  load() {
    return this.#writes.slice();
  }

  /** Makes `batches` ([{batch, writes}]) durable. */
  append(batches) {
    for (const { writes } of batches) this.#writes.push(...writes);
  }
}

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
  #unsaved = [];
  #saving = false;
  #pumping = false;
  #timer = null;
  #timerDue = null;
  #queueLimit;

  /**
   * Builds a host: `Engine` is the wasm class, `config` the JSON config
   * (keys of bubble.toml), `storage` any object with `load()` and
   * `append(batches)` (sync or async). Clock and timers may be replaced
   * (the offline page runs on simulated time).
   */
  static async create(Engine, options = {}) {
    const storage = options.storage ?? new MemoryLog();
    const log = await storage.load();
    const engine = new Engine(
      JSON.stringify(options.config ?? {}),
      options.seed ?? Date.now(),
      log.length > 0 ? JSON.stringify(log) : undefined,
    );
    return new BubbleHost(engine, { ...options, storage });
  }

  constructor(engine, options = {}) {
    this.#engine = engine;
    this.#storage = options.storage ?? new MemoryLog();
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
   * when nothing waits on storage).
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

  // One input, then everything it caused.
  #drive(input) {
    try {
      input(this.#now());
    } catch (err) {
      this.#onError(err);
    }
    this.#pump();
  }

  #pump() {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      for (;;) {
        for (let out; (out = this.#engine.pollOutput()); ) this.#perform(out);
        if (!this.#save()) break;
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
        if (entry) this.#close(entry, out.code);
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
      case 'persist':
        this.#unsaved.push({ batch: out.batch, writes: out.writes });
        return;
      default:
        this.#onError(new Error(`unknown output kind ${out.kind}`));
    }
  }

  #close(entry, code) {
    entry.closing = true;
    entry.socket.close(code);
  }

  // Hands waiting batches to storage. Returns true when they became durable
  // synchronously (the caller drains again), false otherwise.
  #save() {
    if (this.#saving || this.#unsaved.length === 0) return false;
    const batches = this.#unsaved.splice(0);
    const last = batches[batches.length - 1].batch;
    const done = this.#storage.append(batches);
    if (!done || typeof done.then !== 'function') {
      this.#engine.persisted(this.#now(), last);
      return true;
    }
    this.#saving = true;
    done.then(
      () => {
        this.#saving = false;
        this.#drive((now) => this.#engine.persisted(now, last));
      },
      (err) => {
        // Nothing depending on these writes is ever released; the host is
        // unhealthy and says so.
        this.#onError(err);
      },
    );
    return false;
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
