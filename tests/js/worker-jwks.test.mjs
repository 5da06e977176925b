// The worker module's key set from a URL (`auth.jwks.url`): the host GETs it
// when the engine asks, at start and for a `kid` the set lacks, and tokens
// signed by its keys are accepted; a key set that cannot be had leaves
// those tokens refused, says why, and the rest keeps working.

import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { createServer } from 'node:http';
import { test } from 'node:test';

import { createBubble } from '../../bindings-wasm/worker/index.mjs';
import { CONFIG, TOKENS } from './lib/hosts.mjs';
import { startWorkerd } from './lib/workerd.mjs';

const ISSUER = 'https://idp.test/';

/** An ES256 signing key: its public JWK and tokens it signs. */
function ecKey(kid) {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const base64url = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return {
    jwk: { ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' },
    token(sub) {
      const claims = { sub, iss: ISSUER, exp: Math.floor(Date.now() / 1000) + 3600 };
      const input = `${base64url({ alg: 'ES256', kid, typ: 'JWT' })}.${base64url(claims)}`;
      const signature = sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' });
      return `${input}.${signature.toString('base64url')}`;
    },
  };
}

/** An identity provider on loopback: `answer()` gives the status and body it serves next; it counts requests. */
async function identityProvider(t, answer) {
  const idp = { requests: 0 };
  const server = createServer((req, res) => {
    idp.requests += 1;
    const { status, body } = answer();
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  idp.url = `http://127.0.0.1:${server.address().port}/jwks.json`;
  return idp;
}

async function bubbleWithKeysAt(url, errors, jwks = {}) {
  const config = { ...CONFIG, auth: { ...CONFIG.auth, jwks: { url, issuer: ISSUER, min_refresh_secs: 0, ...jwks } } };
  const bubble = await createBubble({ config, seed: 5, onError: (err) => errors.push(String(err?.message ?? err)) });
  await bubble.host.idle();
  return bubble;
}

const createThread = (bubble, token, threadId) =>
  bubble.fetch(
    new Request('https://bubble.example/v1/threads', {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ threadId }),
    }),
  );

async function refused(response, message) {
  assert.equal(response.status, 401);
  const { error } = await response.json();
  assert.equal(error.code, 'unauthorized');
  assert.equal(error.message, message);
}

test('keys fetched from auth.jwks.url at start verify tokens; a new kid is fetched when a token names it', async (t) => {
  const first = ecKey('first');
  const second = ecKey('second');
  const published = [first.jwk];
  const idp = await identityProvider(t, () => ({ status: 200, body: JSON.stringify({ keys: published }) }));
  const errors = [];
  const bubble = await bubbleWithKeysAt(idp.url, errors);
  assert.equal(idp.requests, 1, 'the key set is fetched once at start');

  const created = await createThread(bubble, first.token('ada'), 'jwks-1');
  assert.equal(created.status, 201);
  assert.equal(idp.requests, 1, 'a known kid fetches nothing');

  // A key the set does not hold yet: the token waits for the fetch it
  // triggers and is decided with what that brings.
  await refused(await createThread(bubble, second.token('bob'), 'jwks-2'), "The bearer token's signing key is unknown.");
  assert.equal(idp.requests, 2);
  published.push(second.jwk);
  assert.equal((await createThread(bubble, second.token('bob'), 'jwks-2')).status, 201);
  assert.equal(idp.requests, 3);
  assert.deepEqual(errors, []);
});

test('a key set that cannot be had refuses its tokens, says why, and the rest keeps working', async (t) => {
  const key = ecKey('only');
  let answer = { status: 500, body: '{"error":"down"}' };
  const idp = await identityProvider(t, () => answer);
  const errors = [];
  const bubble = await bubbleWithKeysAt(idp.url, errors);
  assert.match(errors.join('\n'), /JWKS not loaded from http:\/\/127\.0\.0\.1:\d+\/jwks\.json: answered 500/);

  await refused(await createThread(bubble, key.token('ada'), 'down-1'), "The bearer token's signing key is unknown.");
  assert.equal((await createThread(bubble, TOKENS.alice, 'down-static')).status, 201, 'static tokens still work');

  // A 2xx answer that is not a key set is a failed fetch too.
  answer = { status: 200, body: '{"keys":"none"}' };
  await refused(await createThread(bubble, key.token('ada'), 'down-2'), "The bearer token's signing key is unknown.");
  assert.match(errors.at(-1), /JWKS not loaded from .*: /);

  // A key set larger than 1 MiB is not read.
  answer = { status: 200, body: JSON.stringify({ keys: [key.jwk], padding: 'x'.repeat(1024 * 1024) }) };
  await refused(await createThread(bubble, key.token('ada'), 'down-3'), "The bearer token's signing key is unknown.");
  assert.match(errors.at(-1), /larger than 1048576 bytes/);

  answer = { status: 200, body: JSON.stringify({ keys: [key.jwk] }) };
  assert.equal((await createThread(bubble, key.token('ada'), 'down-4')).status, 201, 'the provider is back');
});

test('a host whose provider does not answer refuses the token and goes on', async () => {
  const key = ecKey('nowhere');
  const errors = [];
  // Nothing listens on port 9 of loopback: the connection is refused.
  const bubble = await bubbleWithKeysAt('http://127.0.0.1:9/jwks.json', errors);
  assert.match(errors.join('\n'), /JWKS not loaded from http:\/\/127\.0\.0\.1:9\/jwks\.json/);
  await refused(await createThread(bubble, key.token('ada'), 'nowhere-1'), "The bearer token's signing key is unknown.");
  assert.equal((await createThread(bubble, TOKENS.alice, 'nowhere-static')).status, 201);
});

test('in workerd, the Durable Object fetches the key set and verifies tokens with it', { timeout: 60_000 }, async (t) => {
  const key = ecKey('edge');
  const idp = await identityProvider(t, () => ({ status: 200, body: JSON.stringify({ keys: [key.jwk] }) }));
  const config = { ...CONFIG, auth: { ...CONFIG.auth, jwks: { url: idp.url, issuer: ISSUER } } };
  const workerd = await startWorkerd(config);
  t.after(() => workerd.stop());
  const post = (token, threadId) =>
    fetch(`${workerd.url}/v1/threads`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ threadId }),
    });
  const created = await post(key.token('ada'), 'edge-jwks-1');
  assert.equal(created.status, 201, await created.clone().text());
  assert.equal((await created.json()).threadId, 'edge-jwks-1');
  await refused(await post(ecKey('other').token('eve'), 'edge-jwks-2'), "The bearer token's signing key is unknown.");
  assert.ok(idp.requests >= 1);
});

test('auth.jwks needs exactly one of inline and a web url', async () => {
  for (const [jwks, says] of [
    [{ url: 'ftp://idp.test/jwks.json' }, /must be an http:\/\/ or https:\/\/ URL/],
    [{ url: 'https://idp.test/jwks.json', inline: { keys: [] } }, /exactly one of inline/],
    [{ file: '/etc/jwks.json' }, /unknown field `file`/],
  ]) {
    await assert.rejects(createBubble({ config: { auth: { jwks } } }), (err) => {
      assert.equal(err.code, 'invalid_config');
      assert.match(String(err?.message ?? err), says);
      return true;
    });
  }
});
