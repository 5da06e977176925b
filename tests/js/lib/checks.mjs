// The shared black-box checks. Each one runs against a host's base URL,
// asserts the protocol's rules, and returns a transcript of what it saw;
// the parity test runs every check on both hosts and compares transcripts
// after `normalize` blanks what legitimately differs (times, socket ids,
// publication ids).

import assert from 'node:assert/strict';

import { APP, TOKENS } from './hosts.mjs';
import { http, sign, wsBase, WsClient } from './clients.mjs';

const { alice, bob, carol, root } = TOKENS;

const runStarted = (runId) => ({ type: 'run_started', runId });
const messagePart = (runId, delta) => ({
  type: 'message_part',
  runId,
  part: { type: 'text-delta', id: 'txt-1', delta },
  version: 'ai-sdk-v6',
});

/** Replaces values that differ between hosts and runs with placeholders. */
export function normalize(value) {
  if (Array.isArray(value)) return value.map(normalize);
  if (typeof value === 'string' && value.startsWith('{"socket_id"')) {
    return JSON.stringify(normalize(JSON.parse(value)));
  }
  if (value && typeof value === 'object') {
    const out = {};
    for (const [key, v] of Object.entries(value)) {
      if (['createdAt', 'joinedAt'].includes(key)) out[key] = '<time>';
      else if (['socket_id', 'publicationId'].includes(key)) out[key] = `<${key}>`;
      else out[key] = normalize(v);
    }
    return out;
  }
  return value;
}

/** Every check, by name: async (baseUrl) => transcript. */
export const checks = {
  async 'threads HTTP: create, get, rename, list'(url) {
    const log = [];
    const created = await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'h-1', title: 'Plans' } });
    assert.equal(created.status, 201);
    assert.equal(created.body.threadId, 'h-1');
    assert.equal(created.body.headSeq, 0);
    assert.ok(!('parentThreadId' in created.body));
    log.push(created);
    const again = await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'h-1' } });
    assert.equal(again.status, 200);
    log.push(again);
    const child = await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'h-1.a', parentThreadId: 'h-1' } });
    assert.equal(child.status, 201);
    assert.equal(child.body.parentThreadId, 'h-1');
    log.push(child);
    log.push(await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'h-1', parentThreadId: 'h-1.a' } }));
    assert.equal(log.at(-1).status, 409);
    log.push(await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'h-2', parentThreadId: 'missing' } }));
    assert.equal(log.at(-1).status, 404);
    log.push(await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'h-3', parentThreadId: 'h-3' } }));
    assert.equal(log.at(-1).status, 400);
    log.push(await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'bad id' } }));
    assert.equal(log.at(-1).body.error.code, 'invalid_request');
    const renamed = await http(url, 'PATCH', '/v1/threads/h-1', { token: alice, body: { title: 'Q3 planning' } });
    assert.equal(renamed.status, 200);
    assert.equal(renamed.body.title, 'Q3 planning');
    log.push(renamed);
    const events = await http(url, 'GET', '/v1/threads/h-1/events', { token: alice });
    assert.equal(events.body.events.at(-1).type, 'thread_title_updated');
    log.push(events);
    log.push(await http(url, 'GET', '/v1/threads/h-1', { token: alice }));
    log.push(await http(url, 'GET', '/v1/threads?parentThreadId=h-1', { token: alice }));
    log.push(await http(url, 'GET', '/v1/threads/h-1', {}));
    assert.equal(log.at(-1).status, 401);
    log.push(await http(url, 'GET', '/v1/threads/h-1', { token: bob }));
    assert.equal(log.at(-1).status, 404);
    assert.equal(log.at(-1).body.error.message, 'Thread "h-1" was not found.');
    return log;
  },

  async 'threads HTTP: append, idempotency, paging'(url) {
    const log = [];
    await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'e-1' } });
    for (let i = 1; i <= 5; i += 1) {
      const appended = await http(url, 'POST', '/v1/threads/e-1/events', { token: alice, body: messagePart('r-1', `part ${i}`) });
      assert.equal(appended.status, 201);
      assert.equal(appended.body.event.seq, i);
      assert.equal(appended.body.event.principalId, 'alice');
      log.push(appended);
    }
    const first = await http(url, 'POST', '/v1/threads/e-1/events', { token: alice, body: runStarted('r-2'), idempotencyKey: 'once' });
    const repeat = await http(url, 'POST', '/v1/threads/e-1/events', { token: alice, body: runStarted('r-2'), idempotencyKey: 'once' });
    assert.equal(repeat.status, 200);
    assert.equal(repeat.body.duplicate, true);
    assert.deepEqual(repeat.body.event, first.body.event);
    log.push(first, repeat);
    const page1 = await http(url, 'GET', '/v1/threads/e-1/events?fromSeq=1&limit=4', { token: alice });
    assert.deepEqual(page1.body.events.map((e) => e.seq), [1, 2, 3, 4]);
    assert.equal(page1.body.nextSeq, 5);
    const page2 = await http(url, 'GET', '/v1/threads/e-1/events?fromSeq=5&limit=4', { token: alice });
    assert.deepEqual(page2.body.events.map((e) => e.seq), [5, 6]);
    assert.equal(page2.body.nextSeq, null);
    log.push(page1, page2);
    for (const query of ['limit=0', 'limit=1001', 'fromSeq=0']) {
      log.push(await http(url, 'GET', `/v1/threads/e-1/events?${query}`, { token: alice }));
      assert.equal(log.at(-1).status, 400);
    }
    log.push(await http(url, 'POST', '/v1/threads/e-1/events', { token: alice, body: { type: 'participant_joined', principalId: 'alice', role: 'owner' } }));
    assert.equal(log.at(-1).body.error.code, 'invalid_request');
    log.push(await http(url, 'POST', '/v1/threads/e-1/events', { token: alice, body: { ...runStarted('r-3'), principalId: 'bob' } }));
    assert.equal(log.at(-1).body.error.code, 'forbidden');
    log.push(await http(url, 'POST', '/v1/threads/e-1/events', { token: alice, body: { ...runStarted('r-3'), pad: 'x'.repeat(70_000) } }));
    assert.equal(log.at(-1).status, 413);
    return log;
  },

  async 'threads HTTP: grants and participants'(url) {
    const log = [];
    await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'g-1' } });
    log.push(await http(url, 'PUT', '/v1/threads/g-1/grants/bob', { token: alice, body: { role: 'reader' } }));
    assert.equal(log.at(-1).status, 200);
    log.push(await http(url, 'GET', '/v1/threads/g-1/grants', { token: alice }));
    log.push(await http(url, 'POST', '/v1/threads/g-1/events', { token: bob, body: runStarted('r-1') }));
    assert.equal(log.at(-1).status, 403);
    assert.equal(log.at(-1).body.error.message, 'Principal "bob" lacks "events.run_started" on thread "g-1".');
    log.push(await http(url, 'PUT', '/v1/threads/g-1/grants/carol', { token: alice, body: { role: 'member' } }));
    log.push(await http(url, 'POST', '/v1/threads/g-1/participants', { token: carol, body: {} }));
    assert.equal(log.at(-1).body.principalId, 'carol');
    log.push(await http(url, 'GET', '/v1/threads/g-1', { token: carol }));
    assert.deepEqual(log.at(-1).body.participants.map((p) => p.principalId), ['carol']);
    log.push(await http(url, 'DELETE', '/v1/threads/g-1/participants/carol', { token: carol }));
    assert.equal(log.at(-1).status, 204);
    log.push(await http(url, 'DELETE', '/v1/threads/g-1/grants/bob', { token: alice }));
    assert.equal(log.at(-1).status, 204);
    log.push(await http(url, 'GET', '/v1/threads/g-1', { token: bob }));
    assert.equal(log.at(-1).status, 404);
    log.push(await http(url, 'GET', '/v1/threads/g-1/events', { token: root }));
    assert.deepEqual(log.at(-1).body.events.map((e) => e.type), ['participant_joined', 'participant_left']);
    return log;
  },

  async '/v1/ws: backlog, then live, without gaps'(url) {
    const log = [];
    await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'w-1' } });
    for (let i = 1; i <= 3; i += 1) await http(url, 'POST', '/v1/threads/w-1/events', { token: alice, body: messagePart('r', `b${i}`) });
    const ws = await WsClient.connect(`${wsBase(url)}/v1/ws`, { token: alice });
    ws.send({ type: 'thread.subscribe', threadId: 'w-1', fromSeq: 2 });
    const opened = await ws.next();
    assert.deepEqual(opened, { type: 'thread.subscription_opened', threadId: 'w-1', throughSeq: 3 });
    log.push(opened);
    ws.send({ type: 'thread.append', threadId: 'w-1', event: messagePart('r', 'live over ws') });
    // Two connections' appends have no order between them (a proxy in front
    // of the engine may deliver the later one first): the HTTP append waits
    // for the first's event.
    const frames = [await ws.next(), await ws.next(), await ws.next()];
    await http(url, 'POST', '/v1/threads/w-1/events', { token: alice, body: messagePart('r', 'live over http') });
    frames.push(await ws.next());
    assert.deepEqual(frames.map((f) => f.event.seq), [2, 3, 4, 5]);
    assert.ok(frames.every((f) => f.type === 'thread.event' && f.threadId === 'w-1'));
    log.push(frames);
    const beyond = await WsClient.connect(`${wsBase(url)}/v1/ws?access_token=${alice}`);
    beyond.send({ type: 'thread.subscribe', threadId: 'w-1', fromSeq: 100 });
    log.push(await beyond.next());
    await http(url, 'POST', '/v1/threads/w-1/events', { token: alice, body: runStarted('r-9') });
    const live = await beyond.next();
    assert.equal(live.event.seq, 6);
    log.push(live);
    ws.close();
    beyond.close();
    return log;
  },

  async '/v1/ws: errors keep the connection open'(url) {
    const log = [];
    await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'x-1' } });
    await http(url, 'PUT', '/v1/threads/x-1/grants/bob', { token: alice, body: { role: 'reader' } });
    const ws = await WsClient.connect(`${wsBase(url)}/v1/ws`, { token: bob });
    const sends = [
      '{not json',
      '[1,2]',
      { type: 'thread.dance', threadId: 'x-1' },
      { type: 'thread.subscribe', threadId: 'nope' },
      { type: 'thread.subscribe', threadId: 'x-1', fromSeq: 0 },
      { type: 'thread.append', threadId: 'x-1', event: 'text' },
      { type: 'thread.append', threadId: 'x-1', event: runStarted('r') },
      { type: 'thread.subscribe', threadId: 'x-1' },
      { type: 'thread.subscribe', threadId: 'x-1' },
    ];
    for (const frame of sends) ws.send(frame);
    ws.sendBinary([1, 2, 3]);
    const frames = await ws.until((f) => f.type === 'error' && f.code === 'conflict');
    const errors = frames.filter((f) => f.type === 'error');
    assert.equal(errors[0].code, 'invalid_request');
    assert.ok(!('threadId' in errors[0]));
    assert.deepEqual(errors[1], { type: 'error', code: 'invalid_request', message: 'Frame body must be a JSON object.' });
    assert.ok(frames.some((f) => f.type === 'thread.subscription_closed' && f.threadId === 'nope' && f.reason === 'not_found'));
    assert.ok(errors.some((f) => f.code === 'forbidden' && f.threadId === 'x-1'));
    assert.deepEqual(errors.at(-1), { type: 'error', threadId: 'x-1', code: 'conflict', message: 'Connection is already subscribed to thread "x-1".' });
    log.push(frames);
    const binary = await ws.next();
    assert.equal(binary.code, 'invalid_request');
    log.push(binary);
    await http(url, 'POST', '/v1/threads/x-1/events', { token: alice, body: runStarted('still-open') });
    const live = await ws.next();
    assert.equal(live.event.runId, 'still-open');
    log.push(live);
    ws.close();
    const anonymous = await WsClient.connect(`${wsBase(url)}/v1/ws`, { token: 'wrong' });
    const refused = await anonymous.closeCode();
    assert.equal(refused.code, 1008);
    assert.equal(refused.frames[0].code, 'unauthorized');
    log.push(refused);
    return log;
  },

  async 'channels: public subscribe and HTTP publish'(url) {
    const log = [];
    const ws = await WsClient.connect(`${wsBase(url)}/socket?appKey=${APP.key}&protocol=2`);
    const established = await ws.next();
    assert.equal(established.event, 'pubb:connection_established');
    const { socket_id: socketId, activity_timeout: timeout } = JSON.parse(established.data);
    assert.match(socketId, /^\S+$/);
    assert.equal(timeout, 60);
    log.push(established);
    ws.send({ action: 'subscribe', channel: 'news' });
    log.push(await ws.next());
    assert.deepEqual(log.at(-1), { event: 'pubb:subscription_succeeded', channel: 'news', data: '{}' });
    const publish = (body, idempotencyKey) =>
      http(url, 'POST', `/api/apps/${APP.id}/events`, { token: APP.secret, body, idempotencyKey });
    const accepted = await publish({ channel: 'news', name: 'order.created', data: { orderId: '1042' } }, 'order-1042');
    assert.equal(accepted.status, 202);
    assert.equal(accepted.body.duplicate, false);
    log.push(accepted);
    const delivered = await ws.next();
    assert.deepEqual(delivered, { channel: 'news', data: JSON.stringify({ name: 'order.created', data: { orderId: '1042' } }) });
    log.push(delivered);
    const duplicate = await publish({ channel: 'news', name: 'order.created', data: { orderId: '1042' } }, 'order-1042');
    assert.equal(duplicate.status, 202);
    assert.equal(duplicate.body.duplicate, true);
    assert.equal(duplicate.body.publicationId, accepted.body.publicationId);
    log.push(duplicate);
    log.push(await publish({ channel: 'news', name: 'skipped', socket_id: socketId }));
    log.push(await publish({ channel: 'news', name: 'after' }));
    const next = await ws.next();
    assert.equal(JSON.parse(next.data).name, 'after', 'the excluded socket got nothing');
    log.push(next);
    log.push(await publish({ channel: 'debug-x', name: 'nope' }));
    assert.equal(log.at(-1).status, 400);
    log.push(await http(url, 'POST', `/api/apps/${APP.id}/events`, { token: 'wrong', body: { channel: 'news', name: 'x' } }));
    assert.equal(log.at(-1).status, 401);
    log.push(await WsClient.refusal(`${wsBase(url)}/socket?appKey=unknown&protocol=2`));
    assert.equal(log.at(-1).status, 404);
    assert.equal(log.at(-1).body, 'Application not found');
    ws.close();
    return log;
  },

  async 'channels: private and presence'(url) {
    const log = [];
    const connect = async () => {
      const ws = await WsClient.connect(`${wsBase(url)}/socket?appKey=${APP.key}&protocol=2`);
      const { socket_id: socketId } = JSON.parse((await ws.next()).data);
      return { ws, socketId };
    };
    const a = await connect();
    a.ws.send({ action: 'subscribe', channel: 'private-user-42', auth: `${APP.key}:${'0'.repeat(64)}` });
    log.push(await a.ws.next());
    assert.deepEqual(log.at(-1), { event: 'subscription_error', channel: 'private-user-42', data: 'Subscription not authorized' });
    const auth = await http(url, 'POST', `/api/apps/${APP.id}/auth`, {
      token: APP.secret,
      body: { socket_id: a.socketId, channel_name: 'private-user-42' },
    });
    assert.equal(auth.body.auth, `${APP.key}:${sign(APP.secret, `${a.socketId}:private-user-42`)}`);
    a.ws.send({ action: 'subscribe', channel: 'private-user-42', auth: auth.body.auth });
    log.push(await a.ws.next());
    assert.equal(log.at(-1).event, 'pubb:subscription_succeeded');

    const join = async (client, userId, name) => {
      const channelData = JSON.stringify({ user_id: userId, user_info: { name } });
      const signature = sign(APP.secret, `${client.socketId}:presence-team:${channelData}`);
      client.ws.send({ action: 'subscribe', channel: 'presence-team', auth: `${APP.key}:${signature}`, channel_data: channelData });
      return client.ws.next();
    };
    const first = await join(a, '42', 'Alex');
    assert.deepEqual(first.data, { presence: { ids: ['42'], hash: { 42: { name: 'Alex' } }, count: 1 } });
    log.push(first);
    const b = await connect();
    const second = await join(b, '43', 'Sam');
    assert.equal(second.data.presence.count, 2);
    log.push(second);
    log.push(await a.ws.next());
    assert.deepEqual(log.at(-1), { event: 'pubb:member_added', channel: 'presence-team', data: { user_id: '43', user_info: { name: 'Sam' } } });
    const c = await connect();
    log.push(await join(c, '43', 'Sam'));
    assert.equal(log.at(-1).data.presence.count, 2, 'a second socket of user 43 adds no member');
    c.ws.close();
    b.ws.close();
    log.push(await a.ws.next());
    assert.deepEqual(log.at(-1), { event: 'pubb:member_removed', channel: 'presence-team', data: { user_id: '43' } });
    a.ws.close();
    return log;
  },
};
