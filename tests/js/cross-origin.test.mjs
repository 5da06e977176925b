// A page served from another origin (another port) uses the JS client
// against `bubble serve` in headless Chromium: with that origin allowed
// ([cors] and [websocket] allowed_origins) it subscribes, appends and reads
// history; the same page from an origin not allowed is refused (the
// preflight fails, the socket upgrade is refused with 403).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

import { launch } from './lib/chromium.mjs';
import { CONFIG, REPO, TOKENS, startNative } from './lib/native.mjs';

const PAGE = `<!doctype html><meta charset="utf-8"><title>cross-origin</title>
<script type="module">
  window.bubble = await import('/client/index.js');
  document.title = 'ready';
</script>`;

/** A page and the JS client's sources, on an ephemeral port of 127.0.0.1. */
async function servePage() {
  const server = createServer(async (req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    if (path === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      return res.end(PAGE);
    }
    const name = /^\/client\/([a-z]+\.js)$/.exec(path)?.[1];
    if (!name) {
      res.writeHead(404);
      return res.end();
    }
    res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' });
    res.end(await readFile(join(REPO, 'clients/js/src', name)));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

describe('a page on another origin', () => {
  let allowed;
  let other;
  let native;
  let browser;

  before(async () => {
    allowed = await servePage();
    other = await servePage();
    const origins = [allowed.origin];
    native = await startNative({ ...CONFIG, cors: { allowed_origins: origins }, websocket: { allowed_origins: origins } });
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await native?.stop();
    await allowed?.close();
    await other?.close();
  });

  async function open(site) {
    const page = await browser.newPage();
    await page.goto(`${site.origin}/`);
    await page.waitForFunction(() => document.title === 'ready');
    return page;
  }

  test('uses the JS client when its origin is allowed', async () => {
    const page = await open(allowed);
    const result = await page.evaluate(async ({ url, token }) => {
      const created = await fetch(`${url}/v1/threads`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ threadId: 'cross-origin' }),
      });
      const connection = await window.bubble.connect(url, { token });
      const thread = connection.thread('cross-origin');
      const live = [];
      const subscription = thread.subscribe({ fromSeq: 1 }, (event) => live.push(event));
      await subscription.caughtUp;
      const stored = [];
      for (let i = 1; i <= 3; i += 1) {
        stored.push(await thread.append({ type: 'run_started', runId: `run-${i}` }));
      }
      while (live.length < 3) await new Promise((resolve) => setTimeout(resolve, 10));
      const pages = [];
      for await (const p of thread.history({ limit: 2 })) pages.push(p);
      connection.close();
      return { status: created.status, stored, live, pages };
    }, { url: native.url, token: TOKENS.alice });
    assert.equal(result.status, 201);
    assert.deepEqual(result.stored.map((e) => e.seq), [1, 2, 3]);
    assert.deepEqual(result.live, result.stored);
    assert.deepEqual(result.pages.flatMap((p) => p.events), result.stored);
    assert.equal(result.pages.length, 2);
    await page.close();
  });

  test('is refused when its origin is not allowed', async () => {
    const page = await open(other);
    const result = await page.evaluate(async ({ url, token }) => {
      let fetchError = null;
      try {
        await fetch(`${url}/v1/threads`, { headers: { authorization: `Bearer ${token}` } });
      } catch (err) {
        fetchError = err.name;
      }
      const socket = await new Promise((resolve) => {
        const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/ws?access_token=${token}`);
        ws.onopen = () => resolve('open');
        ws.onclose = (event) => resolve(`closed ${event.code}`);
      });
      return { fetchError, socket };
    }, { url: native.url, token: TOKENS.alice });
    assert.equal(result.fetchError, 'TypeError', 'the preflight is refused');
    assert.equal(result.socket, 'closed 1006', 'the upgrade is refused');
    await page.close();
  });
});
