// The page side of tests/js/client-browser.test.mjs: the JavaScript client
// (clients/js, served same-origin) driven from the test through
// `page.evaluate`, on the browser's own WebSocket and fetch, or on the
// engine running in this page (www/pkg) through www/in-page-transport.mjs.
// What the client delivers is recorded here for the test to read.

import { connect } from '../client/index.js';

const clients = new Map();
let nextClient = 1;
let engine = null;

const settle = (promise) => promise.then((value) => ({ value }), (error) => ({ error: error.code ?? String(error) }));

/**
 * Connects a client to `url` (the in-page engine's transport when the
 * engine runs); `refresh`: count `getToken` calls. Returns its id.
 */
export async function open({ url, token, backoff, refresh = false }) {
  const record = { states: [], refreshes: 0, subscriptions: new Map(), appends: new Map(), errors: new Map(), nextAppend: 1 };
  const options = { token, backoff };
  if (refresh) {
    options.getToken = async () => {
      record.refreshes += 1;
      return token;
    };
  }
  if (engine) Object.assign(options, { WebSocket: engine.transport.WebSocket, fetch: engine.transport.fetch });
  record.connection = await connect(url, options);
  record.connection.on('state', (change) => record.states.push(change.state));
  const id = nextClient++;
  clients.set(id, record);
  return id;
}

/**
 * Subscribes client `id` to `thread` from `fromSeq`, collecting events
 * through the callback or (`iterate`) an async iterator, and its end.
 */
export function subscribe(id, thread, fromSeq, { iterate = false } = {}) {
  const record = clients.get(id);
  const handle = record.connection.thread(thread);
  if (!record.errors.has(thread)) {
    record.errors.set(thread, []);
    handle.on('error', (error) => record.errors.get(thread).push(error.code));
  }
  const entry = { seen: [], ended: null };
  const subscription = iterate ? handle.subscribe({ fromSeq }) : handle.subscribe({ fromSeq }, (event) => entry.seen.push(event));
  entry.caughtUp = settle(subscription.caughtUp);
  if (iterate) {
    (async () => {
      for await (const event of subscription) entry.seen.push(event);
    })().then(
      () => (entry.ended = { done: true }),
      (error) => (entry.ended = { error: error.code }),
    );
  }
  record.subscriptions.set(thread, entry);
}

/** `{value: throughSeq}` once caught up, or `{error: code}`. */
export function caughtUp(id, thread) {
  return clients.get(id).subscriptions.get(thread).caughtUp;
}

/** What client `id` delivered on `thread`, how its subscription ended, and the thread's scoped errors. */
export function seen(id, thread) {
  const record = clients.get(id);
  const entry = record.subscriptions.get(thread);
  return { events: entry?.seen ?? [], ended: entry?.ended ?? null, errors: record.errors.get(thread) ?? [] };
}

/** The connection's state, every state it went through, and how often it asked for a token. */
export function state(id) {
  const { connection, states, refreshes } = clients.get(id);
  return { state: connection.state, states, refreshes };
}

/** Starts an append; returns its number for `appended`. */
export function append(id, thread, event) {
  const record = clients.get(id);
  const n = record.nextAppend++;
  record.appends.set(n, settle(record.connection.thread(thread).append(event)));
  return n;
}

/** `{value: stored event}` or `{error: code}` once append `n` settled. */
export function appended(id, n) {
  return clients.get(id).appends.get(n);
}

/** Every page of the thread's history through the client. */
export async function history(id, thread, limit) {
  const pages = [];
  for await (const page of clients.get(id).connection.thread(thread).history({ limit })) pages.push(page);
  return pages;
}

export function close(id) {
  clients.get(id).connection.close();
}

/** Starts the whole engine in this page (www/pkg) with `config`; clients opened after it use it. */
export async function startEngine(config, seed) {
  const [{ default: init, ...wasm }, { BubbleHost }, { MemoryStorage }, { inPageTransport }] = await Promise.all([
    import('../www/pkg/bubble_wasm.js'),
    import('../www/pkg/host.mjs'),
    import('../www/pkg/storage.mjs'),
    import('../www/in-page-transport.mjs'),
  ]);
  await init();
  const storage = new MemoryStorage();
  const boot = (n) => BubbleHost.create(wasm, { config, seed: seed + n, storage, onError: (err) => console.error('bubble engine:', err) });
  engine = { boot, restarts: 0, storage, transport: inPageTransport(boot(0)) };
}

/** A request to the in-page engine, beside the clients (never offline). */
export async function engineHttp(method, path, body, token) {
  const host = engine.transport.host;
  const [pathname, query = ''] = path.split('?');
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const parts = { method, path: pathname, query, headers };
  const bytes = new TextEncoder().encode(body === undefined ? '' : JSON.stringify(body));
  const answer = await host.answer(host.route(parts), { ...parts, body: bytes });
  return { status: answer.status, body: answer.body ? JSON.parse(answer.body) : null };
}

/** Drops every in-page socket without a close frame. */
export function engineCut() {
  engine.transport.drop();
}

/** Takes the in-page engine's network down (new sockets and requests fail) or up. */
export function engineDown(down) {
  engine.transport.offline = down;
}

/** Stops the in-page engine (its sockets closed with 1001) and keeps the network down. */
export function engineStop() {
  engine.transport.offline = true;
  engine.transport.host.shutdown();
}

/** Starts a new engine over the same storage and brings the network up. */
export function engineStart() {
  engine.restarts += 1;
  engine.transport.host = engine.boot(engine.restarts);
  engine.transport.offline = false;
}
