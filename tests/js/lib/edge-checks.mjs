// The request edge, checked on both hosts: bearer parsing, path decoding,
// Content-Type, the endpoints around the engine's (WebSocket paths without
// an upgrade, health, the page), query flags of the upgrades, and a
// consumer that stops reading. Each of these was, at some point, answered
// differently by the native server and the worker module; the core's edge
// now decides them for both. The hosts run with EDGE_CONFIG (a queue of 4
// frames, so a backlog overflows it at once).

import assert from 'node:assert/strict';

import { APP, CONFIG, TOKENS } from './hosts.mjs';
import { http, rawHttp, wsBase, WsClient } from './clients.mjs';

const { alice } = TOKENS;

/** CONFIG with a small outbound queue and backlog pages larger than it. */
export const EDGE_CONFIG = { ...CONFIG, limits: { outbound_queue_frames: 4, backlog_page: 1000 } };

/** The first frame after opening `/v1/ws` with `headers`, or the close. */
async function wsOutcome(url, target, headers) {
  const ws = await WsClient.connect(`${wsBase(url)}${target}`, { headers });
  ws.send({ type: 'thread.subscribe', threadId: 'edge-ws' });
  const frame = await ws.next();
  if (frame.type === 'error') {
    const closed = await ws.closeCode();
    return { frame, close: closed.code };
  }
  ws.close();
  return { frame };
}

/** Every edge check, by name: async (baseUrl) => transcript. */
export const edgeChecks = {
  async 'edge: Bearer and one or more spaces; a tab is no bearer'(url) {
    const log = [];
    await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'edge-ws' } });
    for (const authorization of [`Bearer\t${alice}`, `Bearer ${alice} extra`, `bearer   ${alice}`]) {
      log.push(await http(url, 'GET', '/v1/threads/edge-ws', { headers: { authorization } }));
      log.push(await wsOutcome(url, '/v1/ws', { authorization }));
    }
    assert.equal(log[0].status, 401);
    assert.equal(log[1].frame.code, 'unauthorized');
    assert.equal(log[1].close, 1008);
    assert.equal(log[4].status, 200);
    assert.equal(log[5].frame.type, 'thread.subscription_opened');
    // A header that holds no bearer leaves the token to `?access_token=`.
    log.push(await wsOutcome(url, `/v1/ws?access_token=${alice}`, { authorization: `Bearer\t${alice}` }));
    assert.equal(log.at(-1).frame.type, 'thread.subscription_opened');
    return log;
  },

  async 'edge: path segments are decoded one by one, strictly'(url) {
    const log = [];
    await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'edge-p' } });
    const grant = (who) => http(url, 'PUT', `/v1/threads/edge-p/grants/${who}`, { token: alice, body: { role: 'reader' } });
    log.push(await grant('a%2Fb'));
    assert.equal(log.at(-1).status, 200);
    assert.equal(log.at(-1).body.principalId, 'a/b');
    log.push(await grant('%C3%A9'));
    assert.equal(log.at(-1).body.principalId, 'é');
    for (const bad of ['%C3%A9%zz', '%FF', 'x%2']) {
      log.push(await grant(bad));
      assert.equal(log.at(-1).status, 400, bad);
      assert.equal(log.at(-1).body.error.code, 'invalid_request');
    }
    log.push(await http(url, 'GET', '/v1/threads/edge-p/grants', { token: alice }));
    assert.deepEqual(log.at(-1).body.grants.map((g) => g.principalId).sort(), ['a/b', 'alice', 'é']);
    log.push(await http(url, 'GET', '/v1/threads/edge%2Dp', { token: alice }));
    assert.equal(log.at(-1).body.threadId, 'edge-p');
    log.push(await http(url, 'GET', '/v1%2Fthreads', { token: alice }));
    assert.equal(log.at(-1).status, 404);
    const raw = (target) => rawHttp(url, 'GET', target, { headers: { authorization: `Bearer ${alice}` } });
    log.push(await raw('/v1/threads/../threads'));
    assert.equal(log.at(-1).status, 400);
    log.push(await raw('/v1/threads/%2e%2E'));
    assert.equal(log.at(-1).status, 400);
    log.push(await raw('//v1/threads'));
    assert.equal(log.at(-1).status, 404);
    return log;
  },

  async 'edge: Content-Type is not consulted'(url) {
    const log = [];
    const create = (threadId, headers, body = JSON.stringify({ threadId })) =>
      http(url, 'POST', '/v1/threads', { token: alice, headers, body: new TextEncoder().encode(body) });
    log.push(await create('ct-1', { 'content-type': 'application/json; charset=utf-8' }));
    log.push(await create('ct-2', { 'content-type': 'Application/JSON;charset="UTF-8"' }));
    log.push(await create('ct-3', { 'content-type': 'text/plain' }));
    log.push(await create('ct-4', { 'content-type': undefined }));
    assert.deepEqual(log.map((r) => r.status), [201, 201, 201, 201]);
    log.push(await create('ct-5', { 'content-type': 'application/json; charset=utf-8' }, '{"threadId":'));
    assert.equal(log.at(-1).status, 400);
    log.push(
      await http(url, 'POST', `/api/apps/${APP.id}/events`, {
        token: APP.secret,
        headers: { 'content-type': 'application/json; charset=utf-8' },
        body: { channel: 'news', name: 'ct' },
      }),
    );
    assert.equal(log.at(-1).status, 202);
    return log;
  },

  async 'edge: endpoints around the engine'(url) {
    const log = [];
    const plain = async (method, path) => {
      const r = await http(url, method, path);
      return { status: r.status, contentType: r.contentType, body: r.body };
    };
    log.push(await plain('GET', '/v1/ws'));
    assert.deepEqual(log.at(-1), { status: 400, contentType: 'text/plain; charset=utf-8', body: 'Expected a WebSocket upgrade request.' });
    log.push(await plain('POST', '/v1/ws'));
    assert.equal(log.at(-1).status, 405);
    log.push(await plain('GET', `/socket?appKey=${APP.key}`));
    assert.equal(log.at(-1).status, 400);
    log.push(await plain('GET', '/socket?appKey=nope'));
    assert.equal(log.at(-1).status, 400, 'no handshake without an upgrade');
    log.push(await plain('GET', '/healthz'));
    assert.deepEqual(log.at(-1), { status: 200, contentType: 'text/plain; charset=utf-8', body: 'ok' });
    log.push(await plain('GET', '/readyz'));
    assert.equal(log.at(-1).body, 'ready');
    const metrics = await http(url, 'GET', '/metrics');
    assert.equal(metrics.status, 200);
    assert.equal(metrics.contentType, 'text/plain; version=0.0.4; charset=utf-8');
    log.push(await plain('POST', '/healthz'));
    assert.equal(log.at(-1).status, 405);
    log.push(await plain('GET', '/no-such-page'));
    assert.deepEqual(log.at(-1), { status: 404, contentType: 'text/plain; charset=utf-8', body: 'Not found' });
    // An upgrade request to an engine route is answered as a plain request.
    log.push(await WsClient.refusal(`${wsBase(url)}/v1/threads/nope`, { headers: { authorization: `Bearer ${alice}` } }));
    assert.equal(log.at(-1).status, 404);
    return log;
  },

  async 'edge: upgrade queries (appKey, protocol, access_token)'(url) {
    const log = [];
    const ack = async (query) => {
      const ws = await WsClient.connect(`${wsBase(url)}/socket?${query}`);
      await ws.next();
      ws.send({ action: 'subscribe', channel: 'news' });
      const frame = await ws.next();
      ws.close();
      return frame.event;
    };
    log.push(await ack(`appKey=${APP.key}&protocol=2`));
    assert.equal(log.at(-1), 'pubb:subscription_succeeded');
    log.push(await ack(`appKey=${APP.key}`));
    log.push(await ack(`protocol=2&appKey=${APP.key}&protocol=1`));
    assert.equal(log.at(-1), 'pubb_internal:subscription_succeeded', 'the last protocol wins');
    log.push(await ack(`appKey=nope&appKey=${APP.key}&protocol=2`));
    assert.equal(log.at(-1), 'pubb:subscription_succeeded', 'the last appKey wins');
    log.push(await WsClient.refusal(`${wsBase(url)}/socket?appKey=&protocol=2`));
    assert.equal(log.at(-1).status, 400);
    log.push(await WsClient.refusal(`${wsBase(url)}/socket?appKey=${APP.key}%zz&protocol=2`));
    assert.deepEqual([log.at(-1).status, log.at(-1).body], [400, 'The query string is not validly percent-encoded.']);
    log.push(await WsClient.refusal(`${wsBase(url)}/v1/ws?access_token=%zz`));
    assert.equal(log.at(-1).status, 400);
    log.push(await wsOutcome(url, `/v1/ws?access_token=${alice.replace('-', '%2D')}`, {}));
    assert.notEqual(log.at(-1).frame.type, 'error');
    return log;
  },

  async 'edge: a consumer that stops reading is closed with 1013'(url) {
    await http(url, 'POST', '/v1/threads', { token: alice, body: { threadId: 'slow-1' } });
    for (let i = 1; i <= 40; i += 1) {
      await http(url, 'POST', '/v1/threads/slow-1/events', { token: alice, body: { type: 'run_started', runId: `r-${i}` } });
    }
    const ws = await WsClient.connect(`${wsBase(url)}/v1/ws`, { token: alice });
    ws.pause();
    // The whole backlog is one page of 41 frames for a queue of 4.
    ws.send({ type: 'thread.subscribe', threadId: 'slow-1', fromSeq: 1 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    ws.resume();
    const { code, frames } = await ws.closeCode();
    assert.equal(code, 1013);
    // What arrived is a gapless prefix of the subscription, never past the overflow.
    const [opened, ...events] = frames;
    if (opened) assert.equal(opened.type, 'thread.subscription_opened');
    assert.deepEqual(events.map((f) => f.event.seq), events.map((_, i) => i + 1));
    assert.ok(frames.length < 41, `${frames.length} frames`);
    // The server goes on serving everyone else.
    const other = await WsClient.connect(`${wsBase(url)}/v1/ws`, { token: alice });
    other.send({ type: 'thread.subscribe', threadId: 'slow-1', fromSeq: 39 });
    const after = [await other.next(), await other.next(), await other.next()];
    assert.deepEqual(after.slice(1).map((f) => f.event.seq), [39, 40]);
    other.close();
    return { code, gaplessPrefix: true, after };
  },
};
