// Small clients for the black-box checks: HTTP with fetch, WebSockets with
// the `ws` package. Every wait is bounded (hang protection, never a timing
// assertion).

import { createHmac } from 'node:crypto';
import { request as httpRequest } from 'node:http';

import WebSocket from 'ws';

export const HANG_MS = 20_000;

/** One HTTP exchange: {status, contentType, headers, body} (JSON parsed when JSON). */
export async function http(base, method, path, { token, body, idempotencyKey, headers = {} } = {}) {
  const h = {};
  if (token) h.authorization = `Bearer ${token}`;
  if (idempotencyKey) h['idempotency-key'] = idempotencyKey;
  if (body !== undefined) h['content-type'] = 'application/json';
  // `headers` wins; a header set to undefined is not sent at all.
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) delete h[name];
    else h[name] = value;
  }
  const raw = typeof body === 'string' || body instanceof Uint8Array;
  const res = await fetch(new URL(path, base), {
    method,
    headers: h,
    body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(HANG_MS),
  });
  const text = await res.text();
  const contentType = res.headers.get('content-type') ?? '';
  const parsed = contentType.startsWith('application/json') && text ? JSON.parse(text) : text;
  return { status: res.status, contentType, retryAfter: res.headers.get('retry-after'), body: parsed };
}

/**
 * One HTTP exchange with the request-target sent exactly as given (no URL
 * parser normalizes it first): {status, contentType, body}.
 */
export function rawHttp(base, method, target, { headers = {}, body } = {}) {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, method, path: target, headers, timeout: HANG_MS }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => {
        const contentType = res.headers['content-type'] ?? '';
        resolve({ status: res.statusCode, contentType, body: contentType.startsWith('application/json') && text ? JSON.parse(text) : text });
      });
    });
    req.on('timeout', () => req.destroy(new Error('no HTTP answer within the hang timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

/** A WebSocket client that queues every message and its close. */
export class WsClient {
  #queue = [];
  #waiters = [];

  static async connect(url, { token, headers } = {}) {
    const client = new WsClient(url, token, headers);
    await client.opened;
    return client;
  }

  /** Tries an upgrade expected to be refused: resolves to {status, body}. */
  static refusal(url, { headers } = {}) {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, headers ? { headers } : {});
      ws.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode, contentType: res.headers['content-type'], retryAfter: res.headers['retry-after'], body }));
      });
      ws.on('open', () => reject(new Error('the upgrade was accepted')));
      ws.on('error', () => {});
    });
  }

  constructor(url, token, headers = {}) {
    const all = token ? { authorization: `Bearer ${token}`, ...headers } : headers;
    this.ws = new WebSocket(url, { headers: all });
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', resolve);
      this.ws.once('error', reject);
    });
    this.ws.on('message', (data, isBinary) => this.#push({ data: isBinary ? data : data.toString() }));
    this.ws.on('close', (code) => this.#push({ close: code }));
    this.ws.on('error', () => {});
  }

  #push(item) {
    const waiter = this.#waiters.shift();
    if (waiter) waiter(item);
    else this.#queue.push(item);
  }

  #take() {
    if (this.#queue.length) return Promise.resolve(this.#queue.shift());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no WebSocket message within the hang timeout')), HANG_MS);
      this.#waiters.push((item) => {
        clearTimeout(timer);
        resolve(item);
      });
    });
  }

  /** The next frame, parsed as JSON. Fails on a close. */
  async next() {
    const item = await this.#take();
    if ('close' in item) throw new Error(`socket closed (${item.close}) while a frame was expected`);
    return JSON.parse(item.data);
  }

  /** Frames until one satisfies `pred`; returns all of them. */
  async until(pred) {
    const frames = [];
    for (;;) {
      const frame = await this.next();
      frames.push(frame);
      if (pred(frame)) return frames;
    }
  }

  /** The close code, once the server closes (frames before it are returned too). */
  async closeCode() {
    const frames = [];
    for (;;) {
      const item = await this.#take();
      if ('close' in item) return { code: item.close, frames };
      frames.push(JSON.parse(item.data));
    }
  }

  send(frame) {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  sendBinary(bytes) {
    this.ws.send(Buffer.from(bytes), { binary: true });
  }

  /** Stops reading from the socket (the server's frames wait in the network). */
  pause() {
    this.ws.pause();
  }

  /** Reads again. */
  resume() {
    this.ws.resume();
  }

  close() {
    this.ws.terminate();
  }
}

/** `ws://` base of an `http://` server URL. */
export function wsBase(url) {
  return url.replace(/^http/, 'ws');
}

/** Lowercase hex HMAC-SHA256, for private and presence subscriptions. */
export function sign(secret, message) {
  return createHmac('sha256', secret).update(message).digest('hex');
}
