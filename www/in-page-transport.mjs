// A WebSocket constructor and a fetch function served by a BubbleHost in
// the same page, for code written against the standard ones (the threads
// client, clients/js): requests and upgrades go through the host's edge
// (`route`, `answer`, `upgrade`) as they would over the network, frames are
// delivered asynchronously and in order. Only the URL's path and query are
// read; its origin names nothing.
//
// `host` can be replaced (a restarted engine over the same storage);
// `offline` refuses new sockets and requests like a network that is down;
// `drop()` makes every open socket vanish without a close frame.

import { toResponse } from './pkg/host.mjs';

const [CONNECTING, OPEN, CLOSING, CLOSED] = [0, 1, 2, 3];

export function inPageTransport(host) {
  const transport = { host, offline: false };
  const open = new Map(); // socket -> its end, for drop()

  class InPageWebSocket extends EventTarget {
    static CONNECTING = CONNECTING;
    static OPEN = OPEN;
    static CLOSING = CLOSING;
    static CLOSED = CLOSED;

    #conn = null;
    #unwritten = 0;

    constructor(url) {
      super();
      this.url = String(url);
      this.readyState = CONNECTING;
      this.protocol = '';
      this.onopen = this.onmessage = this.onclose = this.onerror = null;
      setTimeout(() => this.#connect(new URL(this.url)), 0);
    }

    #fire(type, fields = {}) {
      const event = Object.assign(new Event(type), fields);
      this[`on${type}`]?.(event);
      this.dispatchEvent(event);
    }

    #connect(url) {
      if (this.readyState !== CONNECTING) return;
      const target = transport.host;
      const route = transport.offline
        ? null
        : target.route({ method: 'GET', path: url.pathname, query: url.search.slice(1), headers: { upgrade: 'websocket', connection: 'upgrade' } });
      const upgrade = route && target.upgrade(route);
      if (!upgrade?.open) {
        this.#fire('error');
        this.#end(1006);
        return;
      }
      const socket = this;
      this.#conn = upgrade.open({
        send: (text) => {
          socket.#unwritten += 1;
          queueMicrotask(() => {
            socket.#unwritten -= 1;
            if (socket.readyState === OPEN) socket.#fire('message', { data: text });
          });
        },
        ping: () => queueMicrotask(() => socket.readyState === OPEN && socket.#conn.pong()),
        // No code: the connection drops without a close frame (1006).
        close: (code) => queueMicrotask(() => socket.#end(code ?? 1006)),
        queued: () => socket.#unwritten,
        flushed: (callback) => queueMicrotask(callback),
      });
      open.set(this, (code) => this.#end(code));
      this.readyState = OPEN;
      this.#fire('open');
    }

    // As a browser's: an error before the socket opened, nothing once it closes.
    send(text) {
      if (this.readyState === CONNECTING) throw new DOMException('The socket is still connecting.', 'InvalidStateError');
      queueMicrotask(() => this.readyState === OPEN && this.#conn.text(String(text)));
    }

    close(code = 1005) {
      if (this.readyState === CLOSING || this.readyState === CLOSED) return;
      this.readyState = CLOSING;
      queueMicrotask(() => this.#end(code));
    }

    #end(code) {
      if (this.readyState === CLOSED) return;
      this.readyState = CLOSED;
      open.delete(this);
      this.#conn?.closed();
      this.#fire('close', { code, reason: '', wasClean: code !== 1006 });
    }
  }

  async function fetch(input, init) {
    const request = new Request(input, init);
    if (transport.offline) throw new TypeError('Failed to fetch (the in-page server is offline)');
    const url = new URL(request.url);
    const parts = { method: request.method, path: url.pathname, query: url.search.slice(1), headers: request.headers };
    const target = transport.host;
    const route = target.route(parts);
    const body = new Uint8Array(await request.arrayBuffer());
    const answer = await target.answer(route, { ...parts, body });
    if (request.signal.aborted) throw request.signal.reason;
    return toResponse(answer);
  }

  return Object.assign(transport, {
    WebSocket: InPageWebSocket,
    fetch,
    drop: () => {
      for (const end of [...open.values()]) end(1006);
    },
  });
}
