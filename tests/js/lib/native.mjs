// The native `bubble` binary as a child process, started from a config:
// what every test of the native server needs (hosts.mjs adds the worker
// module beside it).

import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../../../', import.meta.url));

export const TOKENS = { alice: 'token-alice', bob: 'token-bob', carol: 'token-carol', root: 'token-root' };
export const APP = { id: 'app-1', key: 'app-key', secret: 'app-secret' };

/** The config both hosts run with (keys of bubble.toml). */
export const CONFIG = {
  admins: ['root'],
  auth: { tokens: Object.entries(TOKENS).map(([principal, token]) => ({ token, principal })) },
  apps: [APP],
};

/** `config` as TOML (the subset of shapes bubble.toml uses). */
export function toToml(config) {
  const lines = [];
  const value = (v) => (Array.isArray(v) ? `[${v.map(value).join(', ')}]` : JSON.stringify(v));
  const scalars = (obj) => {
    for (const [k, v] of Object.entries(obj)) {
      if (typeof v !== 'object' || Array.isArray(v) && v.every((x) => typeof x !== 'object')) lines.push(`${k} = ${value(v)}`);
    }
  };
  const tables = (obj, prefix) => {
    for (const [k, v] of Object.entries(obj)) {
      const name = prefix ? `${prefix}.${k}` : k;
      if (Array.isArray(v) && v.some((x) => typeof x === 'object')) {
        for (const item of v) {
          lines.push('', `[[${name}]]`);
          scalars(item);
          tables(item, name);
        }
      } else if (v && typeof v === 'object' && !Array.isArray(v)) {
        lines.push('', `[${name}]`);
        scalars(v);
        tables(v, name);
      }
    }
  };
  scalars(config);
  tables(config, '');
  return `${lines.join('\n')}\n`;
}

/**
 * `bubble serve` on an ephemeral port (and its built-in page at `/`), with
 * an in-memory store unless `store` names another; `args` are added to the
 * command line (a cluster node's `--node-id`, `--broker`…), `env` to its
 * environment.
 */
export async function startNative(config = CONFIG, { store = 'memory', args: extra = [], env: extraEnv = {} } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'bubble-js-'));
  const configPath = join(dir, 'bubble.toml');
  await writeFile(configPath, toToml(config));
  const binary = process.env.BUBBLE_BIN ?? join(resolve(REPO, process.env.CARGO_TARGET_DIR ?? 'target'), 'debug/bubble');
  const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('BUBBLE_'))), ...extraEnv };
  const args = ['serve', '--config', configPath, '--listen', '127.0.0.1:0', '--store', store, ...extra];
  const child = spawn(binary, args, {
    cwd: dir,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stderr.on('data', (chunk) => {
    log = (log + chunk).slice(-20000);
  });
  const url = await new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      const match = /^listening on (http:\/\/\S+)$/.exec(line.trim());
      if (match) resolve(match[1]);
    });
    child.once('exit', (code) => reject(new Error(`bubble exited with ${code} before listening:\n${log}`)));
    child.once('error', reject);
  });
  return {
    name: 'native',
    url,
    logs: () => log,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
    /** Kills the process with SIGKILL (it tells nobody) and waits for it to die. */
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}
