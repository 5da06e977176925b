// GET /v1/threads/:id/messages on the real server equals what the `ai`
// package's own readUIMessageStream makes of the same chunks, for seeded
// random conversations (text and reasoning deltas, tool input streaming,
// tool outputs and errors, approvals, data parts, error chunks, several
// runs), read whole and halfway through; on the native server and on the
// worker module (the same core, compiled to wasm).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { conversation, expectedFold, rng } from './lib/ai-chunks.mjs';
import { http } from './lib/clients.mjs';
import { startNative, startWorker, TOKENS } from './lib/hosts.mjs';

const SEEDS = 40;

async function history(base, threadId) {
  const events = [];
  for (let from = 1; from !== null; ) {
    const page = await http(base, 'GET', `/v1/threads/${threadId}/events?fromSeq=${from}&limit=1000`, { token: TOKENS.alice });
    assert.equal(page.status, 200);
    events.push(...page.body.events);
    from = page.body.nextSeq;
  }
  return events;
}

for (const [name, start] of [['native server', startNative], ['worker module', startWorker]]) {
  describe(`folded messages against the AI SDK (${name})`, () => {
    let server;
    before(async () => {
      server = await start();
    });
    after(() => server?.stop());

    test(`${SEEDS} seeded conversations fold as readUIMessageStream reads them`, async () => {
      const seen = new Map();
      for (let seed = 1; seed <= SEEDS; seed += 1) {
        const threadId = `fold-${seed}`;
        assert.equal((await http(server.url, 'POST', '/v1/threads', { token: TOKENS.alice, body: { threadId } })).status, 201);
        const { events } = conversation(seed);
        const halfway = rng(seed ^ 0x5eed).int(events.length);
        const read = async (through) => {
          const got = await http(server.url, 'GET', `/v1/threads/${threadId}/messages`, { token: TOKENS.alice });
          assert.equal(got.status, 200, JSON.stringify(got.body));
          const stored = (await history(server.url, threadId)).slice(0, through);
          assert.equal(got.body.throughSeq, through, `seed ${seed}`);
          const want = await expectedFold(stored);
          assert.deepEqual(got.body.messages, want.messages, `seed ${seed} through ${through}`);
          assert.deepEqual(got.body.activeRuns, want.activeRuns, `seed ${seed} through ${through}`);
          return want;
        };
        for (const [i, event] of events.entries()) {
          const kind = event.type === 'message_part' ? event.part.type : event.type;
          seen.set(kind, (seen.get(kind) ?? 0) + 1);
          const res = await http(server.url, 'POST', `/v1/threads/${threadId}/events`, { token: TOKENS.alice, body: event });
          assert.equal(res.status, 201, JSON.stringify(res.body));
          // The server folds what committed since it built the fold.
          if (i + 1 === halfway) await read(halfway);
        }
        const want = await read(events.length);
        for (const m of want.messages) seen.set(`role:${m.role}`, (seen.get(`role:${m.role}`) ?? 0) + 1);
      }
      // The conversations cover what they claim to.
      for (const kind of [
        'text-delta',
        'reasoning-delta',
        'tool-input-delta',
        'tool-input-available',
        'tool-approval-request',
        'tool_call_approval',
        'tool-output-available',
        'tool-output-error',
        'tool-output-denied',
        'tool-input-error',
        'data-progress',
        'error',
        'message-metadata',
        'source-document',
        'role:user',
        'role:assistant',
      ]) {
        assert.ok(seen.get(kind) > 0, `no ${kind} in ${SEEDS} conversations: ${JSON.stringify([...seen])}`);
      }
    });
  });
}
