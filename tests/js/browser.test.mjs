// The page in headless Chromium (Debian's package, driven by
// playwright-core). Offline, it plays the engine's deterministic simulator
// (the wasm `Simulation` class): seeds played to the end in the page keep
// every invariant, the page's own check of 200 seeds finds no failure, and
// the same seed replays the same run. Live, it follows a thread on
// `bubble serve`, drops and resumes without loss.

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

/** What the offline page shows: the run's status and each thread's durable head. */
async function outcome(page) {
  return {
    state: await page.getAttribute('#sim-status', 'data-state'),
    status: await page.textContent('#sim-status'),
    heads: await page.$$eval('.thread[data-thread]', (cards) => cards.map((c) => Number(c.dataset.head))),
    fingerprint: await page.textContent('#fingerprint'),
  };
}

describe('offline page in headless Chromium: the core simulator', () => {
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

  /** Plays `seed` to the end in the page and returns what it shows. */
  const play = async (seed) => {
    await page.fill('#seed', seed);
    await page.click('#restart');
    await page.click('#forward');
    return outcome(page);
  };

  test('seeds played to the end in the page keep every invariant', async () => {
    let events = 0;
    for (const seed of ['1', '2', '3', '42', 'browser-test']) {
      const run = await play(seed);
      assert.equal(run.state, 'passed', `seed ${seed}: ${run.status}`);
      assert.match(run.status, /every invariant held after every step/);
      assert.equal(run.heads.length, 3);
      events += run.heads.reduce((a, b) => a + b, 0);
    }
    assert.ok(events > 0, 'the runs appended events');
    // Step by step, the page shows the run as it goes.
    await page.fill('#seed', '7');
    await page.click('#restart');
    for (let i = 0; i < 150; i += 1) await page.click('#step');
    const midway = await outcome(page);
    assert.equal(midway.state, 'running');
    assert.match(midway.status, /step 150 of 400/);
    assert.equal(await page.locator('#log li').count(), 60, 'the log keeps the last 60 steps');
    await mkdir(OUTPUT, { recursive: true });
    await page.screenshot({ path: join(OUTPUT, 'offline-page.png') });
    assert.deepEqual(errors, []);
  });

  test("the page's check of 200 seeds finds no failure", { timeout: 170_000 }, async () => {
    await page.fill('#seed', '1000');
    await page.click('#restart');
    await page.click('#faults-run');
    await page.waitForFunction(() => document.querySelector('#faults-status')?.dataset.state !== 'running', null, {
      timeout: 160_000,
    });
    const status = await page.textContent('#faults-status');
    assert.equal(await page.getAttribute('#faults-status', 'data-state'), 'passed', `${status}\n${await page.textContent('#faults-report')}`);
    assert.match(status, /200 seeds from 1000 \(80000 steps\) kept every invariant/);
    assert.deepEqual(errors, []);
  });

  test('the same seed replays the same run', async () => {
    const first = await play('replay-1');
    assert.deepEqual(await play('replay-1'), first);
    assert.notEqual((await play('replay-2')).fingerprint, first.fingerprint);
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
