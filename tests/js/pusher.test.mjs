// Pusher compatibility with unmodified libraries from npm: pusher-js 8 and
// Laravel Echo 2 as clients of `/app/:key`, the `pusher` server library
// against the signed `/apps/:id/…` API, and a small Node endpoint that
// authorizes private and presence subscriptions with `authorizeChannel`.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { after, before, describe, test } from 'node:test';

import Echo from 'laravel-echo';
import PusherServer from 'pusher';
import Pusher from 'pusher-js';
import WebSocket from 'ws';

import { APP, startNative } from './lib/native.mjs';

const CONFIG = { apps: [{ ...APP, client_events: true }] };
/** Long enough for a loaded machine; a test only waits this long when it fails. */
const WAIT_MS = 10000;

let server;
let port;
let backend;
let authServer;
let authUrl;
const clients = [];

/** `promise`, or a failure naming `what` if it does not settle in time. */
function within(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), WAIT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The app's backend, as the `pusher` library reaches it. */
function serverLibrary(secret = APP.secret) {
  return new PusherServer({ appId: APP.id, key: APP.key, secret, host: '127.0.0.1', port: String(port), useTLS: false });
}

/** The authorization endpoint: signs with the `pusher` library's `authorizeChannel`. */
function startAuthEndpoint() {
  const http = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const { socket_id: socketId, channel_name: channel, user } = JSON.parse(body);
    const presence = channel.startsWith('presence-') ? { user_id: user, user_info: { name: user.toUpperCase() } } : undefined;
    const auth = backend.authorizeChannel(socketId, channel, presence);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(auth));
  });
  return new Promise((resolve) => {
    http.listen(0, '127.0.0.1', () => resolve(http));
  });
}

/** pusher-js's `channelAuthorization.customHandler`, posting to the endpoint as `user`. */
function authorizeAs(user) {
  return ({ socketId, channelName }, callback) => {
    fetch(authUrl, { method: 'POST', body: JSON.stringify({ socket_id: socketId, channel_name: channelName, user }) })
      .then((res) => res.json())
      .then((auth) => callback(null, auth), (err) => callback(err, null));
  };
}

/** The options every Pusher client here uses (those of the README). */
function clientOptions(user, wsPort = port) {
  return {
    wsHost: '127.0.0.1',
    wsPort,
    forceTLS: false,
    enabledTransports: ['ws'],
    cluster: 'mt1',
    disableStats: true,
    channelAuthorization: { customHandler: authorizeAs(user) },
  };
}

/** A connected pusher-js client (of the main server unless `options` say otherwise). */
async function connect(user = 'anon', options = clientOptions(user)) {
  const client = new Pusher(APP.key, options);
  clients.push(client);
  if (client.connection.state !== 'connected') {
    await within(new Promise((resolve) => client.connection.bind('connected', resolve)), `${user} to connect`);
  }
  return client;
}

/** Subscribes `client` to `name` and waits for the acknowledgement. */
async function subscribe(client, name) {
  const channel = client.subscribe(name);
  await within(new Promise((resolve) => channel.bind('pusher:subscription_succeeded', resolve)), `${name} subscribed`);
  return channel;
}

/** The next `event` on `channel`: `[data, metadata]`. */
function next(channel, event) {
  return within(
    new Promise((resolve) => {
      const handler = (data, metadata) => {
        channel.unbind(event, handler);
        resolve([data, metadata]);
      };
      channel.bind(event, handler);
    }),
    `${event} on ${channel.name}`,
  );
}

before(async () => {
  server = await startNative(CONFIG);
  port = Number(new URL(server.url).port);
  backend = serverLibrary();
  authServer = await startAuthEndpoint();
  authUrl = `http://127.0.0.1:${authServer.address().port}/auth`;
});

after(async () => {
  for (const client of clients) client.disconnect();
  authServer?.close();
  authServer?.closeAllConnections();
  await server?.stop();
});

describe('pusher-js', () => {
  test('connects with a Pusher socket id', async () => {
    const client = await connect();
    assert.match(client.connection.socket_id, /^\d+\.\d+$/);
  });

  test('receives trigger and triggerBatch on a public channel, without the excluded socket', async () => {
    const [a, b] = [await connect(), await connect()];
    const [onA, onB] = [await subscribe(a, 'news'), await subscribe(b, 'news')];
    const gotA = next(onA, 'created');
    const gotB = next(onB, 'created');
    await backend.trigger('news', 'created', { id: 1 }, { socket_id: a.connection.socket_id });
    assert.deepEqual((await gotB)[0], { id: 1 });
    await backend.trigger(['news', 'other'], 'created', { id: 2 });
    assert.deepEqual((await gotA)[0], { id: 2 }, 'the excluded socket heard only the second event');
    const batchA = next(onA, 'batched');
    await backend.triggerBatch([
      { channel: 'news', name: 'batched', data: JSON.stringify({ n: 1 }) },
      { channel: 'nobody-here', name: 'batched', data: '{}' },
    ]);
    assert.deepEqual((await batchA)[0], { n: 1 });
  });

  test('subscribes to a private channel through the authorization endpoint', async () => {
    const client = await connect('alice');
    const channel = await subscribe(client, 'private-orders');
    const got = next(channel, 'paid');
    await backend.trigger('private-orders', 'paid', { order: 7 });
    assert.deepEqual((await got)[0], { order: 7 });
  });

  test('a wrong signature is a subscription error with status 401', async () => {
    const forged = (params, callback) => callback(null, { auth: `${APP.key}:${'0'.repeat(64)}` });
    const client = await connect('mallory', { ...clientOptions('mallory'), channelAuthorization: { customHandler: forged } });
    const channel = client.subscribe('private-forged');
    const [error] = await next(channel, 'pusher:subscription_error');
    assert.equal(error.type, 'AuthError');
    assert.equal(error.status, 401);
  });

  test('presence: members, member_added and member_removed', async () => {
    const alice = await connect('alice');
    const room = await subscribe(alice, 'presence-room');
    assert.equal(room.members.count, 1);
    assert.equal(room.members.me.id, 'alice');
    assert.deepEqual(room.members.me.info, { name: 'ALICE' });
    const added = next(room, 'pusher:member_added');
    const bob = await connect('bob');
    const bobRoom = await subscribe(bob, 'presence-room');
    assert.equal(bobRoom.members.count, 2);
    assert.deepEqual(bobRoom.members.get('alice').info, { name: 'ALICE' });
    const [member] = await added;
    assert.equal(member.id, 'bob');
    assert.deepEqual(member.info, { name: 'BOB' });
    const removed = next(room, 'pusher:member_removed');
    bob.disconnect();
    assert.equal((await removed)[0].id, 'bob');
    assert.equal(room.members.count, 1);
  });

  test('client events reach the other subscribers, never the sender', async () => {
    const alice = await connect('alice');
    const bob = await connect('bob');
    const [chatA, chatB] = [await subscribe(alice, 'private-chat'), await subscribe(bob, 'private-chat')];
    const toBob = next(chatB, 'client-typing');
    const toAlice = next(chatA, 'client-typing');
    assert.equal(chatA.trigger('client-typing', { from: 'alice' }), true);
    assert.deepEqual((await toBob)[0], { from: 'alice' });
    chatB.trigger('client-typing', { from: 'bob' });
    assert.deepEqual((await toAlice)[0], { from: 'bob' }, 'alice heard bob, not her own event');
    const [roomA, roomB] = [await subscribe(alice, 'presence-chat'), await subscribe(bob, 'presence-chat')];
    const wave = next(roomB, 'client-wave');
    roomA.trigger('client-wave', 'hi');
    const [data, metadata] = await wave;
    assert.equal(data, 'hi');
    assert.equal(metadata.user_id, 'alice');
  });

  test('reconnects after the server closes its socket, and resubscribes', async () => {
    const client = await connect('carol');
    const channel = await subscribe(client, 'private-resume');
    const before = client.connection.socket_id;
    const reconnected = within(new Promise((resolve) => client.connection.bind('connected', resolve)), 'reconnection');
    // A client message over the 16 KiB limit: the server closes the socket (1009).
    client.send_event('client-big', 'x'.repeat(20 * 1024), 'private-resume');
    await reconnected;
    assert.notEqual(client.connection.socket_id, before);
    await within(new Promise((resolve) => channel.bind('pusher:subscription_succeeded', resolve)), 'resubscription');
    const got = next(channel, 'back');
    await backend.trigger('private-resume', 'back', { ok: true });
    assert.deepEqual((await got)[0], { ok: true });
  });

  test('signs in through the pusher library\'s authenticateUser and hears sendToUser', async () => {
    const signin = ({ socketId }, callback) => callback(null, backend.authenticateUser(socketId, { id: 'nina', name: 'Nina' }));
    const client = await connect('nina', { ...clientOptions('nina'), userAuthentication: { customHandler: signin } });
    client.signin();
    await within(client.user.signinDonePromise, 'signin');
    assert.deepEqual(client.user.user_data, { id: 'nina', name: 'Nina' });
    const own = client.user.serverToUserChannel;
    if (!own.subscribed) await within(new Promise((resolve) => own.bind('pusher:subscription_succeeded', resolve)), 'the user channel');
    const greeting = within(new Promise((resolve) => client.user.bind('greeting', resolve)), 'sendToUser');
    await backend.sendToUser('nina', 'greeting', { hi: 1 });
    assert.deepEqual(await greeting, { hi: 1 });
  });

  test('an unknown key is refused with 4001', async () => {
    const client = new Pusher('no-such-key', clientOptions('anon'));
    clients.push(client);
    const error = await within(new Promise((resolve) => client.connection.bind('error', resolve)), 'pusher:error');
    assert.equal((error.error ?? error).data.code, 4001, 'refused before connecting');
  });
});

describe('both wire formats share the channels', () => {
  test('a pubb publication reaches pusher-js, a Pusher trigger reaches /socket', async () => {
    const client = await connect();
    const channel = await subscribe(client, 'shared');
    const ws = new WebSocket(`ws://127.0.0.1:${port}/socket?appKey=${APP.key}&protocol=2`);
    const frames = [];
    const waiters = [];
    ws.on('message', (raw) => {
      frames.push(JSON.parse(raw));
      waiters.splice(0).forEach((wake) => wake());
    });
    const frame = (match, what) =>
      within(
        new Promise((resolve) => {
          const look = () => {
            const found = frames.find(match);
            if (found) resolve(found);
            else waiters.push(look);
          };
          look();
        }),
        what,
      );
    await frame((f) => f.event === 'pubb:connection_established', 'pubb connection');
    ws.send(JSON.stringify({ action: 'subscribe', channel: 'shared' }));
    await frame((f) => f.event === 'pubb:subscription_succeeded', 'pubb subscription');
    const fromPubb = next(channel, 'pubb.event');
    const res = await fetch(`http://127.0.0.1:${port}/api/apps/${APP.id}/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${APP.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ channel: 'shared', name: 'pubb.event', data: { n: 1 } }),
    });
    assert.equal(res.status, 202);
    assert.deepEqual((await fromPubb)[0], { n: 1 });
    await backend.trigger('shared', 'pusher.event', { n: 2 });
    const delivered = await frame((f) => f.channel === 'shared' && !f.event && JSON.parse(f.data).name === 'pusher.event', 'pubb delivery');
    assert.deepEqual(JSON.parse(delivered.data), { name: 'pusher.event', data: JSON.stringify({ n: 2 }) });
    ws.close();
    await once(ws, 'close');
  });
});

describe('the pusher server library', () => {
  test('get: channels, one channel and its users', async () => {
    const [erin, frank] = [await connect('erin'), await connect('frank')];
    await subscribe(erin, 'presence-lobby');
    await subscribe(frank, 'presence-lobby');
    const list = await (await backend.get({ path: '/channels', params: { filter_by_prefix: 'presence-lobby', info: 'user_count' } })).json();
    assert.deepEqual(list, { channels: { 'presence-lobby': { user_count: 2 } } });
    const one = await (await backend.get({ path: '/channels/presence-lobby', params: { info: 'user_count,subscription_count' } })).json();
    assert.deepEqual(one, { occupied: true, user_count: 2, subscription_count: 2 });
    const users = await (await backend.get({ path: '/channels/presence-lobby/users' })).json();
    assert.deepEqual(users, { users: [{ id: 'erin' }, { id: 'frank' }] });
    const empty = await (await backend.get({ path: '/channels/nobody' })).json();
    assert.deepEqual(empty, { occupied: false });
  });

  test('a bad secret is refused with 401', async () => {
    await assert.rejects(serverLibrary('wrong-secret').trigger('news', 'x', {}), (err) => {
      assert.equal(err.status, 401);
      assert.match(err.body, /^Invalid signature/);
      return true;
    });
    const ok = await backend.trigger('news', 'x', {});
    assert.equal(ok.status, 200);
  });
});

describe('laravel-echo over pusher-js', () => {
  test('channel().listen, private().listen, join().here/joining/leaving', async () => {
    const echo = (user) =>
      new Echo({ broadcaster: 'pusher', key: APP.key, Pusher, ...clientOptions(user) });
    const grace = echo('grace');
    clients.push(grace.connector.pusher);
    const heard = (channel, event) => within(new Promise((resolve) => channel.listen(event, resolve)), event);
    const subscribed = (channel) => within(new Promise((resolve) => channel.subscribed(resolve)), 'subscribed');

    const orders = grace.channel('orders');
    await subscribed(orders);
    const shipped = heard(orders, '.order.shipped');
    await backend.trigger('orders', 'order.shipped', { id: 42 });
    assert.deepEqual(await shipped, { id: 42 });

    const inbox = grace.private('inbox');
    await subscribed(inbox);
    const message = heard(inbox, '.message');
    await backend.trigger('private-inbox', 'message', { text: 'hi' });
    assert.deepEqual(await message, { text: 'hi' });

    const here = new Promise((resolve) => {
      grace.join('team').here(resolve);
    });
    assert.deepEqual(await within(here, 'here'), [{ name: 'GRACE' }]);
    const team = grace.join('team');
    const joining = within(new Promise((resolve) => team.joining(resolve)), 'joining');
    const leaving = within(new Promise((resolve) => team.leaving(resolve)), 'leaving');
    const heidi = echo('heidi');
    clients.push(heidi.connector.pusher);
    await within(new Promise((resolve) => heidi.join('team').here(resolve)), 'heidi here');
    assert.deepEqual(await joining, { name: 'HEIDI' });
    heidi.disconnect();
    assert.deepEqual(await leaving, { name: 'HEIDI' });
    grace.disconnect();
  });
});

/** A webhook endpoint: verifies each POST with the `pusher` library's `webhook()`. */
function webhookEndpoint() {
  const received = [];
  const invalid = [];
  const waiters = [];
  const http = createServer(async (req, res) => {
    let rawBody = '';
    for await (const chunk of req) rawBody += chunk;
    const hook = backend.webhook({ headers: req.headers, rawBody });
    if (hook.isValid()) received.push(...hook.getEvents());
    else invalid.push(rawBody);
    res.end();
    waiters.splice(0).forEach((wake) => wake());
  });
  /** Resolves once `count` events arrived. */
  const events = (count, what) =>
    within(
      new Promise((resolve) => {
        const look = () => (received.length >= count ? resolve(received.slice(0, count)) : waiters.push(look));
        look();
      }),
      what,
    );
  return { http, received, invalid, events };
}

/** A port nothing listens on (yet). */
async function freePort() {
  const probe = createNetServer();
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port: free } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return free;
}

describe('webhooks', () => {
  test('signed batches in order; an endpoint that is down blocks nothing and gets its events once back', async () => {
    const up = webhookEndpoint();
    await new Promise((resolve) => up.http.listen(0, '127.0.0.1', resolve));
    const down = webhookEndpoint();
    const downPort = await freePort();
    const hooked = await startNative({
      apps: [
        {
          ...APP,
          client_events: true,
          webhooks: [
            {
              url: `http://127.0.0.1:${up.http.address().port}/hooks`,
              event_types: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed', 'client_event'],
            },
            { url: `http://127.0.0.1:${downPort}/hooks`, event_types: ['channel_occupied', 'channel_vacated'] },
          ],
        },
      ],
    });
    try {
      const hookPort = Number(new URL(hooked.url).port);
      const ivan = await connect('ivan', clientOptions('ivan', hookPort));
      const judy = await connect('judy', clientOptions('judy', hookPort));
      const ivanRoom = await subscribe(ivan, 'presence-hooks');
      const judyRoom = await subscribe(judy, 'presence-hooks');
      // Delivery goes on while one endpoint is down.
      const nudge = next(judyRoom, 'client-nudge');
      ivanRoom.trigger('client-nudge', { n: 1 });
      assert.deepEqual((await nudge)[0], { n: 1 });
      const judyGone = next(ivanRoom, 'pusher:member_removed');
      judy.disconnect();
      await judyGone;
      ivan.disconnect();
      const events = await up.events(7, 'the webhook events');
      assert.deepEqual(
        events.map((e) => [e.name, e.channel, e.user_id ?? null]),
        [
          ['channel_occupied', 'presence-hooks', null],
          ['member_added', 'presence-hooks', 'ivan'],
          ['member_added', 'presence-hooks', 'judy'],
          ['client_event', 'presence-hooks', 'ivan'],
          ['member_removed', 'presence-hooks', 'judy'],
          ['member_removed', 'presence-hooks', 'ivan'],
          ['channel_vacated', 'presence-hooks', null],
        ],
      );
      assert.equal(events[3].event, 'client-nudge');
      assert.equal(JSON.parse(events[3].data).n, 1);
      assert.deepEqual(up.invalid, []);

      await new Promise((resolve) => down.http.listen(downPort, '127.0.0.1', resolve));
      const late = await down.events(2, 'the events of the endpoint that was down');
      assert.deepEqual(
        late.map((e) => e.name),
        ['channel_occupied', 'channel_vacated'],
      );
      assert.deepEqual(down.invalid, []);
    } finally {
      up.http.close();
      up.http.closeAllConnections();
      down.http.close();
      down.http.closeAllConnections();
      await hooked.stop();
    }
  });
});

/** Polls `fetch` until `done` holds for its answer. */
async function until(fetch, done, what) {
  return within(
    (async () => {
      for (;;) {
        const answer = await fetch();
        if (done(answer)) return answer;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })(),
    what,
  );
}

describe('cluster', () => {
  test('pusher-js clients on two nodes hear each other\'s presence and client events; webhooks once', async () => {
    const postgres = process.env.BUBBLE_TEST_POSTGRES ?? 'postgres://postgres:postgres@127.0.0.1:5432/test';
    const redis = process.env.BUBBLE_TEST_REDIS ?? 'redis://127.0.0.1:6379';
    const schema = `bubble_js_${process.pid}_${Date.now().toString(36)}`;
    const hooks = webhookEndpoint();
    await new Promise((resolve) => hooks.http.listen(0, '127.0.0.1', resolve));
    const hooked = {
      apps: [
        {
          ...APP,
          client_events: true,
          webhooks: [
            {
              url: `http://127.0.0.1:${hooks.http.address().port}/hooks`,
              event_types: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed', 'client_event'],
            },
          ],
        },
      ],
    };
    const node = (id) =>
      startNative(hooked, {
        store: `${postgres}?schema=${schema}`,
        args: ['--node-id', id, '--broker', redis, '--broker-prefix', `bubble-test:${schema}`],
      });
    const nodes = [];
    try {
      nodes.push(await node('node-1'));
      nodes.push(await node('node-2'));
      const [port1, port2] = nodes.map((n) => Number(new URL(n.url).port));
      const api = (p) => new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(p), useTLS: false });
      const users = async (p) => (await (await api(p).get({ path: '/channels/presence-cluster/users' })).json()).users.map((u) => u.id);

      const alice = await connect('alice', clientOptions('alice', port1));
      const aliceRoom = await subscribe(alice, 'presence-cluster');
      await until(() => users(port2), (ids) => ids.includes('alice'), 'node-2 to hear of alice');

      const joined = next(aliceRoom, 'pusher:member_added');
      const bob = await connect('bob', clientOptions('bob', port2));
      const bobRoom = await subscribe(bob, 'presence-cluster');
      assert.deepEqual(bobRoom.members.get('alice')?.info, { name: 'ALICE' }, 'bob sees alice in his snapshot');
      assert.equal((await joined)[0].id, 'bob');
      await until(() => users(port1), (ids) => ids.includes('bob'), 'node-1 to hear of bob');

      const toBob = next(bobRoom, 'client-hello');
      aliceRoom.trigger('client-hello', { from: 'alice' });
      const [data, metadata] = await toBob;
      assert.deepEqual(data, { from: 'alice' });
      assert.equal(metadata.user_id, 'alice');
      const toAlice = next(aliceRoom, 'client-hello');
      bobRoom.trigger('client-hello', { from: 'bob' });
      assert.deepEqual((await toAlice)[0], { from: 'bob' });

      const left = next(aliceRoom, 'pusher:member_removed');
      bob.disconnect();
      assert.equal((await left)[0].id, 'bob');
      alice.disconnect();

      // Every webhook event once for the whole cluster.
      const events = await hooks.events(8, 'the cluster\'s webhook events');
      assert.deepEqual(
        events.map((e) => `${e.name} ${e.user_id ?? ''}`).sort(),
        [
          'channel_occupied ',
          'channel_vacated ',
          'client_event alice',
          'client_event bob',
          'member_added alice',
          'member_added bob',
          'member_removed alice',
          'member_removed bob',
        ],
      );
      assert.deepEqual(hooks.invalid, []);
    } finally {
      hooks.http.close();
      hooks.http.closeAllConnections();
      for (const n of nodes) await n.stop();
      execFileSync('psql', [postgres, '-qtAX', '-c', `DROP SCHEMA IF EXISTS ${schema} CASCADE`], { stdio: 'ignore' });
    }
  });
});

describe('the worker host (the engine in wasm)', () => {
  test('pusher-js and the pusher library work against it too', async () => {
    const { startWorker } = await import('./lib/hosts.mjs');
    const worker = await startWorker(CONFIG);
    try {
      const workerPort = Number(new URL(worker.url).port);
      const api = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1', port: String(workerPort), useTLS: false });
      const [kim, leo] = [await connect('kim', clientOptions('kim', workerPort)), await connect('leo', clientOptions('leo', workerPort))];
      const [kimRoom, leoRoom] = [await subscribe(kim, 'presence-wasm'), await subscribe(leo, 'presence-wasm')];
      assert.equal(leoRoom.members.count, 2);
      const news = next(kimRoom, 'news');
      await api.trigger('presence-wasm', 'news', { n: 1 });
      assert.deepEqual((await news)[0], { n: 1 });
      const hello = next(leoRoom, 'client-hello');
      kimRoom.trigger('client-hello', 'hi');
      assert.equal((await hello)[0], 'hi');
      kim.disconnect();
      leo.disconnect();
    } finally {
      await worker.stop();
    }
  });
});
