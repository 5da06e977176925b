// Bubble in workerd, through miniflare: the Worker entry
// (bindings-wasm/worker/workerd.mjs) and its Durable Object, with the
// object's storage persisted to a folder so that a new miniflare on the
// same folder is the same deployment restarted.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Miniflare } from 'miniflare';

import { CONFIG, REPO } from './hosts.mjs';

/** The Worker's options, as bindings-wasm/worker/wrangler.toml declares them. */
export function workerOptions(config, persist) {
  return {
    modules: true,
    modulesRoot: join(REPO, 'bindings-wasm'),
    scriptPath: join(REPO, 'bindings-wasm/worker/workerd.mjs'),
    modulesRules: [
      { type: 'ESModule', include: ['**/*.js', '**/*.mjs'] },
      { type: 'CompiledWasm', include: ['**/*.wasm'] },
    ],
    compatibilityDate: '2026-04-01',
    durableObjects: { BUBBLE: { className: 'BubbleObject', useSQLite: true } },
    durableObjectsPersist: persist,
    bindings: { BUBBLE_CONFIG: JSON.stringify(config) },
    host: '127.0.0.1',
    port: 0,
  };
}

/**
 * miniflare serving the Worker with `config`, its Durable Object storage in
 * `persist` (a new temporary folder when absent, removed by `stop`).
 */
export async function startWorkerd(config = CONFIG, { persist } = {}) {
  const own = persist === undefined;
  const dir = persist ?? (await mkdtemp(join(tmpdir(), 'bubble-workerd-')));
  const mf = new Miniflare(workerOptions(config, dir));
  const url = new URL(await mf.ready);
  return {
    name: 'workerd',
    url: url.origin,
    persist: dir,
    mf,
    logs: () => '',
    /** Stops miniflare (every socket closes); the storage folder stays unless it was our own. */
    stop: async () => {
      await mf.dispose();
      if (own) await rm(dir, { recursive: true, force: true });
    },
  };
}
