// Bubble on Cloudflare Workers (workerd): a Worker that routes each request
// through the core's edge to a Durable Object, and the Durable Object that
// owns one engine. The object's storage is the engine's storage (reads
// through `read` outputs, conditional batches through `persist` outputs, in
// the key layout of storage.mjs), its alarm is the engine's timer, and its
// `/v1/ws` sockets use the WebSocket Hibernation API: an idle object can be
// evicted while they stay open, and the next instance resumes each one from
// its attachment (bearer and subscription positions).
//
// Runtime-agnostic apart from the Workers APIs it calls (WebSocketPair,
// Response with `webSocket`, `ctx.acceptWebSocket`, `ctx.storage`); the
// wasm classes are passed in. `workerd.mjs` is the entry that imports the
// wasm as a module and exports both.

import { BubbleHost, feedSocket, toResponse } from './host.mjs';

/** The attachment format of a hibernatable `/v1/ws` socket. */
const ATTACHMENT = 1;

/** `env.BUBBLE_CONFIG`: the JSON config (a string or an object). */
export function configOf(env) {
  const config = env?.BUBBLE_CONFIG;
  return typeof config === 'string' ? JSON.parse(config) : config ?? {};
}

/**
 * Durable Object storage as the engine's storage: reads as they are; each
 * put resolves once it is durable (`sync()`, where the runtime has it),
 * so `persisted` is reported only for writes on disk. Output gates hold
 * every response and frame sent after a write until it is durable anyway.
 */
export function durableStorage(storage) {
  const sync = typeof storage.sync === 'function' ? () => storage.sync() : () => undefined;
  return {
    get: (key) => storage.get(key),
    list: (options) => storage.list(options),
    put: (keyOrEntries, value) =>
      Promise.resolve(typeof keyOrEntries === 'string' ? storage.put(keyOrEntries, value) : storage.put(keyOrEntries)).then(sync),
  };
}

/**
 * The Worker: asks the core's edge what a request is, answers what needs
 * no engine (`/healthz`, unknown paths, malformed requests), and forwards
 * the rest (`/v1/threads…`, `/v1/ws`, `/socket`, `/api/apps/…`,
 * `/metrics`, `/readyz`) to the namespace's Durable Object.
 *
 * `options.binding`: the Durable Object namespace binding (`BUBBLE`);
 * `options.namespace(request, env)`: the object's name for a request
 * (default `env.BUBBLE_NAMESPACE`, else `default`). Each name is a whole
 * Bubble of its own: its threads, apps, channels and sockets.
 */
export function bubbleWorker(wasm, options = {}) {
  const binding = options.binding ?? 'BUBBLE';
  const namespace = options.namespace ?? ((_request, env) => env.BUBBLE_NAMESPACE || 'default');
  let edge = null;
  return {
    async fetch(request, env) {
      edge ??= new wasm.Edge(JSON.stringify(configOf(env)));
      const url = new URL(request.url);
      const route = edge.routeRequest(request.method, url.pathname, url.search.slice(1), request.headers);
      switch (route.kind) {
        case 'health':
          return toResponse(wasm.Edge.healthy());
        case 'page':
          return toResponse(wasm.Edge.notFound());
        case 'answer':
          return toResponse(route);
        default: {
          const objects = env[binding];
          return objects.get(objects.idFromName(namespace(request, env))).fetch(request);
        }
      }
    },
  };
}

/**
 * The Durable Object class, over the wasm classes `wasm` (`Engine`,
 * `Edge`, `MonotonicClock`). Configured from `env.BUBBLE_CONFIG`.
 */
export function bubbleObject(wasm) {
  return class BubbleObject {
    #ctx;
    #host;
    #byConn = new Map(); // conn id → {ws, id, token, subs}
    #bySocket = new WeakMap(); // WebSocket → {conn, record}
    #byId = new Map(); // attachment id → {conn, record}
    #alarms = 0;
    #armed = false;
    #resumed = 0;

    constructor(ctx, env) {
      this.#ctx = ctx;
      this.#host = BubbleHost.create(wasm, {
        config: configOf(env),
        seed: randomSeed(),
        storage: durableStorage(ctx.storage),
        // The object's alarm is the engine's one timer: no setTimeout,
        // which would keep the object from hibernating.
        setTimer: (_fn, ms) => {
          this.#armed = true;
          settle(ctx.storage.setAlarm(Date.now() + ms));
          return true;
        },
        clearTimer: () => {
          this.#armed = false;
          settle(ctx.storage.deleteAlarm());
        },
        onTouched: (conns) => {
          for (const conn of conns) this.#remember(conn);
        },
      });
      // Sockets that outlived the previous instance are resumed before any
      // other event is delivered, so every append fans out to them.
      const sockets = ctx.getWebSockets();
      if (sockets.length > 0) {
        ctx.blockConcurrencyWhile(async () => {
          for (const ws of sockets) this.#resume(ws);
          await this.#host.idle();
        });
      }
    }

    async fetch(request) {
      const host = this.#host;
      const url = new URL(request.url);
      const parts = { method: request.method, path: url.pathname, query: url.search.slice(1), headers: request.headers };
      const route = host.route(parts);
      const upgrade = host.upgrade(route);
      if (upgrade?.refused) return toResponse(upgrade.refused);
      if (upgrade) return this.#accept(route, upgrade.open);
      const body = route.kind === 'engine' ? new Uint8Array(await request.arrayBuffer()) : undefined;
      const answer = await host.answer(route, { ...parts, body });
      if (route.kind === 'metrics') return toResponse({ ...answer, body: answer.body + this.#metrics() });
      return toResponse(answer);
    }

    webSocketMessage(ws, message) {
      const found = this.#find(ws);
      if (!found) return undefined;
      if (typeof message === 'string') found.conn.text(message);
      else found.conn.binary(new Uint8Array(message));
      // The event lasts until the engine settles, so the object is not
      // evicted with a read or a commit of this frame in flight.
      return this.#host.idle();
    }

    webSocketClose(ws, code, reason) {
      this.#gone(ws);
      try {
        ws.close(code === 1005 || code === 1006 ? 1000 : code, reason);
      } catch {
        // Already closed (the runtime answered the close itself).
      }
      return this.#host.idle();
    }

    webSocketError(ws) {
      this.#gone(ws);
      return this.#host.idle();
    }

    alarm() {
      this.#alarms += 1;
      this.#armed = false; // this one fired; the tick sets the next
      this.#host.tick();
      return this.#host.idle();
    }

    // Upgrades a socket route: `/v1/ws` sockets are hibernatable, `/socket`
    // ones are not (their socket id, channels and presence live in the
    // engine alone, so they keep the object in memory while open).
    #accept(route, open) {
      const [client, server] = Object.values(new WebSocketPair());
      let conn = null;
      const socket = this.#socket(server, () => conn);
      if (route.kind === 'threadsSocket') {
        this.#ctx.acceptWebSocket(server);
        const record = { ws: server, id: randomId(), token: route.token ?? null, subs: [] };
        this.#attach(record);
        conn = open(socket);
        this.#track(conn, record);
      } else {
        server.accept();
        conn = open(socket);
        feedSocket(server, conn);
      }
      return new Response(null, { status: 101, webSocket: client });
    }

    // A socket as BubbleHost drives it. The runtime answers Pings itself and
    // exposes neither Ping nor Pong, so the heartbeat's Pings are answered
    // here; it keeps no visible send queue (no slow-consumer detection).
    #socket(ws, conn) {
      return {
        send: (text) => {
          try {
            ws.send(text);
          } catch {
            // Closed meanwhile; the close event follows.
          }
        },
        ping: () => queueMicrotask(() => conn()?.pong()),
        close: (code) => {
          try {
            // No way to drop a connection without a close frame here: 1011.
            ws.close(code ?? 1011);
          } catch {
            // Already closed.
          }
        },
        queued: () => 0,
        flushed: (callback) => callback(),
      };
    }

    // A hibernated `/v1/ws` socket, opened again from its attachment.
    #resume(ws) {
      const saved = ws.deserializeAttachment();
      if (saved?.v !== ATTACHMENT || !Array.isArray(saved.subs)) {
        // Its positions could not be kept (see #attach): the client
        // reconnects and resubscribes from what it has.
        try {
          ws.close(1012, 'Restarted; reconnect and resubscribe.');
        } catch {
          // Already closed.
        }
        return;
      }
      const record = { ws, id: saved.id, token: saved.token, subs: saved.subs };
      let conn = null;
      conn = this.#host.resume(this.#socket(ws, () => conn), saved.token ?? null, saved.subs);
      this.#track(conn, record);
      this.#resumed += 1;
    }

    #track(conn, record) {
      const found = { conn, record };
      this.#byConn.set(conn.id, record);
      this.#bySocket.set(record.ws, found);
      this.#byId.set(record.id, found);
    }

    #find(ws) {
      const found = this.#bySocket.get(ws);
      if (found) return found;
      const id = ws.deserializeAttachment()?.id;
      return id === undefined ? undefined : this.#byId.get(id);
    }

    #gone(ws) {
      const found = this.#find(ws);
      if (!found) return;
      this.#byConn.delete(found.conn.id);
      this.#byId.delete(found.record.id);
      this.#bySocket.delete(ws);
      found.conn.closed();
    }

    // Keeps a socket's subscription positions in its attachment whenever
    // they change, so that an instance rebuilt after eviction resumes it.
    #remember(connId) {
      const record = this.#byConn.get(connId);
      if (!record) return;
      const subs = this.#host.subscriptions(connId);
      if (subs === undefined || sameSubs(subs, record.subs)) return;
      record.subs = subs;
      this.#attach(record);
    }

    #attach(record) {
      try {
        record.ws.serializeAttachment({ v: ATTACHMENT, id: record.id, token: record.token, subs: record.subs });
      } catch {
        // Too large for an attachment: marked, so that a rebuilt instance
        // closes this socket (1012) rather than resuming it wrongly.
        try {
          record.ws.serializeAttachment({ v: 0, id: record.id });
        } catch {
          // Closed meanwhile.
        }
      }
    }

    // The host's own lines after the engine's metrics.
    #metrics() {
      const lines = [
        ['bubble_do_alarms_total', 'counter', 'Alarms delivered to this instance.', this.#alarms],
        ['bubble_do_alarm_armed', 'gauge', 'Whether this instance has set an alarm (1) or deleted it (0).', this.#armed ? 1 : 0],
        ['bubble_do_resumed_sockets', 'gauge', 'Hibernated /v1/ws sockets this instance resumed when it started.', this.#resumed],
        ['bubble_do_hibernatable_sockets', 'gauge', 'Open /v1/ws sockets (hibernatable).', this.#ctx.getWebSockets().length],
      ];
      return lines.map(([name, type, help, value]) => `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name} ${value}\n`).join('');
    }
  };
}

// A storage call whose failure is only worth a log line (the alarm is set
// again after the next input).
function settle(promise) {
  Promise.resolve(promise).catch((err) => console.error('bubble: alarm:', err));
}

function sameSubs(a, b) {
  return a.length === b.length && a.every(([thread, next], i) => b[i][0] === thread && b[i][1] === next);
}

// Ids and version tokens of successive instances must not repeat.
function randomSeed() {
  const [hi, lo] = crypto.getRandomValues(new Uint32Array(2));
  return (hi & 0x1fffff) * 2 ** 32 + lo;
}

function randomId() {
  return [...crypto.getRandomValues(new Uint8Array(8))].map((b) => b.toString(16).padStart(2, '0')).join('');
}
