// The README's run command gives a working page on a fresh clone: the
// repository's HEAD is cloned into a temporary folder (committed files only),
// the server is started there with the README's command, and headless
// Chromium loads http://127.0.0.1:PORT/: the engine loads from the package
// the binary embeds, and the offline simulation runs.
//
// The release build goes to its own target directory (<target>/readme-run),
// so only the first run compiles the dependencies. Slow on a cold cache:
// scripts/test-js.sh runs this file with a longer timeout.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';

import { launch } from './lib/chromium.mjs';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

const git = (...args) => execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

/** The command of the README's "Run the server" block. */
function runCommand(readme) {
  const block = /Run the server:\s*```sh\n([^\n]+)\n```/.exec(readme);
  assert.ok(block, 'README.md has a "Run the server:" sh block');
  return block[1].trim();
}

/** Starts `command` (plus `extra` arguments) in `cwd`; resolves with the URL it prints. */
function start(command, extra, cwd, env) {
  const [program, ...args] = command.split(/\s+/);
  // Its own process group, so cargo and its compilers go too if the test stops early.
  const child = spawn(program, [...args, ...extra], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stderr.on('data', (chunk) => {
    log = (log + chunk).slice(-20000);
  });
  const url = new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const match = /^listening on (http:\/\/\S+)$/.exec(line.trim());
      if (match) resolve(match[1]);
    });
    child.once('exit', (code) => reject(new Error(`${command} exited with ${code} before listening:\n${log}`)));
    child.once('error', reject);
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    process.kill(-child.pid, 'SIGTERM');
    const timer = setTimeout(() => process.kill(-child.pid, 'SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  };
  return { url, stop, logs: () => log };
}

describe('the README run command on a fresh clone', () => {
  let dir;
  let clone;
  let server;
  let browser;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'bubble-readme-'));
    clone = join(dir, 'bubble');
    git('clone', '--quiet', REPO, clone);
    // The clone's HEAD is the repository's HEAD, even when that is detached.
    git('-C', clone, 'fetch', '--quiet', 'origin', 'HEAD');
    git('-C', clone, 'checkout', '--quiet', '--detach', 'FETCH_HEAD');
    assert.equal(git('-C', clone, 'rev-parse', 'HEAD'), git('-C', REPO, 'rev-parse', 'HEAD'));
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('serves a page whose engine loads and whose simulation runs', async () => {
    const readme = await readFile(join(clone, 'README.md'), 'utf8');
    const command = runCommand(readme);
    assert.equal(command, 'cargo run --release -p bubble-server -- serve');
    // The README's address is 127.0.0.1:3000; its documented --listen flag
    // takes a free port instead, so a server already on 3000 does not matter.
    assert.match(readme, /`--listen ADDR`/, 'README.md documents --listen');

    const target = resolve(REPO, process.env.CARGO_TARGET_DIR ?? 'target', 'readme-run');
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('BUBBLE_')));
    env.CARGO_TARGET_DIR = target;
    server = start(command, ['--listen', '127.0.0.1:0'], clone, env);
    const url = `${await server.url}/`;
    assert.ok((await stat(join(clone, 'bubble-data', 'bubble.db'))).isFile(), 'the store is in the clone');

    const page = await browser.newPage({ viewport: { width: 1500, height: 1100 } });
    const errors = [];
    const types = {};
    page.on('pageerror', (err) => errors.push(err.message));
    page.on('console', (msg) => msg.type() === 'error' && errors.push(msg.text()));
    page.on('response', (res) => {
      types[new URL(res.url()).pathname] = `${res.status()} ${res.headers()['content-type']}`;
    });
    await page.goto(url);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 }).catch(async (err) => {
      throw new Error(`${err.message}\nengine: ${await page.textContent('#engine-state')}\nfetched: ${JSON.stringify(types)}`);
    });
    assert.equal(await page.textContent('#engine-state'), 'engine: WebAssembly');
    assert.equal(types['/pkg/bubble_wasm_bg.wasm'], '200 application/wasm');
    assert.equal(types['/pkg/bubble_wasm.js'], '200 text/javascript');
    assert.equal(types['/app.mjs'], '200 text/javascript');

    await page.fill('#seed', 'readme-run');
    await page.click('#restart');
    await page.click('#forward');
    const status = await page.textContent('#sim-status');
    assert.equal(await page.getAttribute('#sim-status', 'data-state'), 'passed', status);
    const heads = await page.$$eval('.thread[data-thread]', (cards) => cards.map((c) => Number(c.dataset.head)));
    assert.equal(heads.length, 3, 'the simulation shows its threads');
    assert.match(await page.textContent('#fingerprint'), /\w/);
    assert.deepEqual(errors, []);
  });
});
