// The offline page in headless Chromium (Debian's package, driven by
// playwright-core): a seeded run, a client paused and a client dropped while
// the conversation goes on, both brought back; every timeline must then hold
// each seq exactly once, in order, and the same seed must replay the same run.

import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { extname, join, normalize } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { launch } from './lib/chromium.mjs';
import { http } from './lib/clients.mjs';
import { REPO, startNative, TOKENS } from './lib/hosts.mjs';

const WWW = join(REPO, 'www');
const OUTPUT = join(REPO, 'test-output');
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.mjs': 'text/javascript',
  '.js': 'text/javascript',
  '.css': 'text/css',
  '.wasm': 'application/wasm',
};

/** A static server for www/ on an ephemeral port. */
async function serveWww() {
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://localhost').pathname)).replace(/^(\.\.[/\\])+/, '');
    const file = join(WWW, path.endsWith('/') ? `${path}index.html` : path);
    try {
      const body = await readFile(file);
      res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found');
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}/`, close: () => new Promise((r) => server.close(r)) };
}

/** Seqs shown in each thread column, with the column's durable head. */
function timelines(page) {
  return page.$$eval('.thread[data-thread]', (cards) =>
    cards.map((card) => ({
      thread: card.dataset.thread,
      head: Number(card.dataset.head),
      hidden: card.classList.contains('hidden-thread'),
      seqs: [...card.querySelectorAll('.timeline [data-seq]')].map((e) => Number(e.dataset.seq)),
      resumes: [...card.querySelectorAll('.timeline > li')]
        .map((li, i, all) => (li.classList.contains('resume') ? Number(all[i + 1]?.dataset.seq ?? all[i + 1]?.querySelector('[data-seq]')?.dataset.seq) : null))
        .filter((x) => x !== null),
    })),
  );
}

describe('offline page in headless Chromium', () => {
  let site;
  let browser;
  let page;
  const errors = [];

  before(async () => {
    site = await serveWww();
    browser = await launch();
    page = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
    page.on('pageerror', (err) => errors.push(err.message));
    page.on('console', (msg) => msg.type() === 'error' && errors.push(msg.text()));
    await page.goto(site.url);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
  });

  after(async () => {
    await browser?.close();
    await site?.close();
  });

  test('timelines stay complete and in order through a pause and a drop', async () => {
    await page.fill('#seed', 'browser-test');
    await page.click('#restart');
    await page.click('#forward');

    await page.click('[data-act="pause"][data-client="carol"]');
    await page.click('[data-act="drop"][data-client="alice"]');
    assert.match(await page.textContent('[data-client="alice"] .state'), /dropped/);
    await page.click('#forward');
    const behind = await timelines(page);
    assert.ok(behind.some((t) => !t.hidden && t.seqs.length < t.head), 'Alice missed events while offline');
    assert.match(await page.textContent('[data-client="carol"] .sync'), /behind/);

    await page.click('[data-act="reconnect"][data-client="alice"]');
    await page.click('[data-act="pause"][data-client="carol"]');
    await page.click('#forward');

    for (const t of await timelines(page)) {
      assert.equal(t.hidden, false, `Alice follows ${t.thread}`);
      assert.ok(t.head > 10, `${t.thread} has a conversation`);
      assert.deepEqual(t.seqs, Array.from({ length: t.head }, (_, i) => i + 1), `${t.thread}: every seq once, in order`);
      assert.equal(t.resumes.length, 1, `${t.thread}: one resume marker`);
    }
    for (const id of ['alice', 'bob', 'carol', 'scout', 'helper']) {
      const card = `[data-client="${id}"]`;
      assert.equal(await page.textContent(`${card} .stat.missed`), '0', `${id} missed nothing`);
      assert.equal(await page.textContent(`${card} .stat.duplicates`), '0', `${id} got no duplicate`);
      assert.match(await page.textContent(`${card} .sync`), /complete/, `${id} is complete`);
    }
    assert.equal(await page.locator('.presence li.online').count(), 5, 'everyone is back in presence');

    await page.locator('.thread[data-thread="launch"] .resume').scrollIntoViewIfNeeded();
    await mkdir(OUTPUT, { recursive: true });
    await page.screenshot({ path: join(OUTPUT, 'offline-page.png') });
    assert.deepEqual(errors, []);
  });

  test('the same seed replays the same run', async () => {
    const run = async (seed) => {
      await page.fill('#seed', seed);
      await page.click('#restart');
      await page.click('#forward');
      return page.textContent('#fingerprint');
    };
    const first = await run('replay-1');
    assert.equal(await run('replay-1'), first);
    assert.notEqual(await run('replay-2'), first);
  });
});

describe('live mode against bubble serve', () => {
  let native;
  let browser;

  before(async () => {
    native = await startNative();
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await native?.stop();
  });

  test('the served page follows a thread, sends, drops and resumes without loss', async () => {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(native.url);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
    await page.click('button[data-mode="live"]');
    await page.fill('#live-token', TOKENS.alice);
    await page.fill('#live-thread', 'live-1');
    await page.click('#live-form button.primary');
    await page.waitForSelector('#live-state[data-state="live"]');

    await page.fill('#live-text', 'Hello from the page');
    await page.click('#live-compose button');
    await page.waitForFunction(() => document.querySelector('#live-timeline .msg.done .text')?.textContent === 'Hello from the page');

    const say = (runId, delta) =>
      ['run_started', 'message_part', 'run_finished'].reduce(
        (p, type) =>
          p.then(() =>
            http(native.url, 'POST', '/v1/threads/live-1/events', {
              token: TOKENS.alice,
              body: type === 'message_part' ? { type, runId, part: { type: 'text-delta', id: 't', delta }, version: 'ai-sdk-v6' } : type === 'run_finished' ? { type, runId, status: 'completed' } : { type, runId },
            }),
          ),
        Promise.resolve(),
      );
    await page.click('#live-drop');
    await page.waitForSelector('#live-state[data-state="offline"]');
    await say('while-away', 'Sent while the page was offline');
    await page.click('#live-reconnect');
    await page.waitForSelector('#live-state[data-state="live"]');
    await say('after', 'Sent after the reconnect');
    await page.waitForFunction(() => document.querySelectorAll('#live-timeline .msg.done').length === 3);

    const seqs = await page.$$eval('#live-timeline [data-seq]', (els) => els.map((e) => Number(e.dataset.seq)));
    const { body } = await http(native.url, 'GET', '/v1/threads/live-1', { token: TOKENS.alice });
    assert.deepEqual(seqs, Array.from({ length: body.headSeq }, (_, i) => i + 1));
    assert.equal(await page.locator('#live-timeline .resume').count(), 1);
    assert.match(await page.textContent('#live-stats'), /0 missed · 0 duplicates/);
    await page.screenshot({ path: join(OUTPUT, 'live-mode.png') });
  });
});
