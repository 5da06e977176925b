// Same behaviour, two hosts: every shared check runs against the native
// server and against the worker module (Node adapter), and the two
// transcripts must agree once times and generated ids are blanked.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { checks, normalize } from './lib/checks.mjs';
import { EDGE_CONFIG, edgeChecks } from './lib/edge-checks.mjs';
import { CONFIG, startNative, startWorker } from './lib/hosts.mjs';

/** Runs every check of `suite` on both hosts, started with `config`. */
function agree(title, suite, config) {
  describe(title, () => {
    let native;
    let worker;

    before(async () => {
      [native, worker] = await Promise.all([startNative(config), startWorker(config)]);
    });

    after(async () => {
      await Promise.all([native?.stop(), worker?.stop()]);
    });

    for (const [name, check] of Object.entries(suite)) {
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
}

agree('native server and worker module agree', checks, CONFIG);
agree('the request edge: both hosts decide alike', edgeChecks, EDGE_CONFIG);
