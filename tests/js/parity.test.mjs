// Same behaviour, two hosts: every shared check runs against the native
// server and against the worker module (Node adapter), and the two
// transcripts must agree once times and generated ids are blanked.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { checks, normalize } from './lib/checks.mjs';
import { startNative, startWorker } from './lib/hosts.mjs';

describe('native server and worker module agree', () => {
  let native;
  let worker;

  before(async () => {
    [native, worker] = await Promise.all([startNative(), startWorker()]);
  });

  after(async () => {
    await Promise.all([native?.stop(), worker?.stop()]);
  });

  for (const [name, check] of Object.entries(checks)) {
    test(name, async (t) => {
      let fromNative;
      try {
        fromNative = await check(native.url);
      } catch (err) {
        t.diagnostic(`native server log:\n${native.logs()}`);
        throw err;
      }
      const fromWorker = await check(worker.url);
      assert.deepEqual(normalize(fromWorker), normalize(fromNative));
    });
  }
});
