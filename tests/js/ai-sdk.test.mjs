// A run of message_part events whose parts are AI SDK v6 UIMessageChunks,
// appended over /v1/ws and read back over /v1/ws, rebuilds the original
// message with the `ai` package's own readUIMessageStream — on both hosts.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { readUIMessageStream } from 'ai';

import { http, wsBase, WsClient } from './lib/clients.mjs';
import { startNative, startWorker, TOKENS } from './lib/hosts.mjs';

const TEXT = 'Bubble keeps every part of this answer, in order: no gaps, no repeats. ✓';

/** The chunks an AI SDK v6 server emits for one streamed text answer. */
function chunksFor(text) {
  const words = text.match(/\S+\s*/g);
  return [
    { type: 'start', messageId: 'msg-1' },
    { type: 'start-step' },
    { type: 'text-start', id: 'txt-1' },
    ...words.map((delta) => ({ type: 'text-delta', id: 'txt-1', delta })),
    { type: 'text-end', id: 'txt-1' },
    { type: 'finish-step' },
    { type: 'finish' },
  ];
}

async function lastMessage(chunks) {
  const stream = new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  let message;
  for await (const state of readUIMessageStream({ stream, terminateOnError: true })) message = state;
  return message;
}

for (const [name, start] of [['native server', startNative], ['worker module', startWorker]]) {
  describe(`AI SDK v6 round trip (${name})`, () => {
    let host;
    before(async () => {
      host = await start();
    });
    after(() => host?.stop());

    test('readUIMessageStream rebuilds the streamed text', async () => {
      const threadId = 'ai-1';
      assert.equal((await http(host.url, 'POST', '/v1/threads', { token: TOKENS.alice, body: { threadId } })).status, 201);
      const reader = await WsClient.connect(`${wsBase(host.url)}/v1/ws`, { token: TOKENS.alice });
      reader.send({ type: 'thread.subscribe', threadId });
      assert.equal((await reader.next()).type, 'thread.subscription_opened');

      const writer = await WsClient.connect(`${wsBase(host.url)}/v1/ws`, { token: TOKENS.alice });
      const chunks = chunksFor(TEXT);
      const append = (event) => writer.send({ type: 'thread.append', threadId, event });
      append({ type: 'run_started', runId: 'run-1' });
      for (const part of chunks) append({ type: 'message_part', runId: 'run-1', part, version: 'ai-sdk-v6' });
      append({ type: 'run_finished', runId: 'run-1', status: 'completed' });

      const frames = await reader.until((f) => f.event?.type === 'run_finished');
      const events = frames.map((f) => f.event);
      assert.deepEqual(events.map((e) => e.seq), events.map((_, i) => i + 1), 'gapless and in order');
      const parts = events.filter((e) => e.type === 'message_part').map((e) => e.part);
      assert.deepEqual(parts, chunks, 'parts are stored verbatim');

      const message = await lastMessage(parts);
      assert.equal(message.id, 'msg-1');
      assert.equal(message.role, 'assistant');
      const text = message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
      assert.equal(text, TEXT);
      reader.close();
      writer.close();
    });
  });
}
