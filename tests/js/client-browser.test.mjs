// The JavaScript client (clients/js) in headless Chromium, on the
// browser's own WebSocket and fetch, with the checks of client.test.mjs
// (tests/js/lib/client-checks.mjs):
//
// - against the `bubble` binary on SQLite: the page and the client module
//   are served same-origin by the server itself (`--www` with a directory
//   of this test's page, the client's sources and www/), through a TCP
//   proxy that cuts connections; the server is restarted on the same
//   database file mid-stream;
// - against the whole engine running in the page (www/pkg), reached
//   through www/in-page-transport.mjs: the in-page sockets are dropped,
//   the in-page network taken down, the engine restarted over the same
//   storage.

import assert from 'node:assert/strict';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { call, clientChecks } from './lib/client-checks.mjs';
import { launch } from './lib/chromium.mjs';
import { CONFIG, REPO, TOKENS, startNative } from './lib/native.mjs';
import { startProxy } from './lib/proxy.mjs';

async function http(base, method, path, body, token = TOKENS.alice) {
  const response = await fetch(new URL(path, base), {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

// What Chromium logs as a console error for a failed request or socket: the
// checks cause those on purpose (cuts, a refused append).
const NETWORK_ERROR = /^(WebSocket connection to .* failed|Failed to load resource)/;

/** A page of the test site at `url`, its errors (but those of the network) collected in `errors`. */
async function openPage(browser, url, errors) {
  const page = await browser.newPage();
  page.on('pageerror', (err) => errors.push(err.message));
  page.on('console', (msg) => msg.type() === 'error' && !NETWORK_ERROR.test(msg.text()) && errors.push(msg.text()));
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]', { state: 'attached', timeout: 30_000 });
  return page;
}

describe('the JavaScript client in Chromium', () => {
  let dir;
  let browser;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'bubble-client-browser-'));
    await symlink(join(REPO, 'tests/js/client-page'), join(dir, 'page'));
    await symlink(join(REPO, 'clients/js/src'), join(dir, 'client'));
    await symlink(join(REPO, 'www'), join(dir, 'www'));
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await rm(dir, { recursive: true, force: true });
  });

  describe('against the native server on SQLite, same-origin', () => {
    const context = {};
    const errors = [];
    let server;
    let proxy;

    before(async () => {
      const db = `sqlite:${join(dir, 'bubble.db')}`;
      const start = () => startNative(undefined, { store: db, args: ['--www', dir] });
      server = await start();
      proxy = await startProxy(new URL(server.url));
      context.world = {
        url: proxy.url,
        http: (method, path, body, token) => http(server.url, method, path, body, token),
        cut: () => proxy.cut(),
        down: (down) => {
          proxy.down = down;
        },
        stop: () => server.stop(),
        start: async () => {
          server = await start();
          proxy.target = new URL(server.url);
          proxy.cut();
        },
      };
      // Loaded through the proxy: the client's socket and requests go where the page came from.
      context.page = await openPage(browser, `${proxy.url}/page/`, errors);
    });

    after(async () => {
      await context.page?.close();
      await proxy?.close();
      await server?.stop();
    });

    test('the page and the client module come from the server itself', async () => {
      const origin = await context.page.evaluate(() => location.origin);
      assert.equal(origin, proxy.url);
      const module = await fetch(new URL('/client/index.js', proxy.url));
      assert.equal(module.status, 200);
      assert.equal(module.headers.get('content-type'), 'text/javascript');
      assert.match(await module.text(), /export async function connect/);
    });

    clientChecks(context);

    test('no error in the page', () => assert.deepEqual(errors, []));
  });

  describe('against the wasm engine running in the page', () => {
    const context = {};
    const errors = [];
    let server;

    before(async () => {
      // The native server only serves the files; the engine is the page's own.
      server = await startNative(undefined, { args: ['--www', dir] });
      const page = await openPage(browser, `${server.url}/page/`, errors);
      await call(page, 'startEngine', CONFIG, 7);
      context.page = page;
      context.world = {
        // Not an address: every request and socket must be served in the page.
        url: 'http://in-page.invalid',
        http: (method, path, body, token = TOKENS.alice) => call(page, 'engineHttp', method, path, body, token),
        cut: () => call(page, 'engineCut'),
        down: (down) => call(page, 'engineDown', down),
        stop: () => call(page, 'engineStop'),
        start: () => call(page, 'engineStart'),
      };
    });

    after(async () => {
      await context.page?.close();
      await server?.stop();
    });

    clientChecks(context);

    test('the threads lived in the page only', async () => {
      const native = await http(server.url, 'GET', '/v1/threads/cut-1');
      assert.equal(native.status, 404);
      const inPage = await context.world.http('GET', '/v1/threads/cut-1');
      assert.equal(inPage.status, 200);
      assert.equal(inPage.body.headSeq, 60);
    });

    test('no error in the page', () => assert.deepEqual(errors, []));
  });
});
