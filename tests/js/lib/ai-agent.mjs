// An agent process for the chat transport test: it follows a thread, and
// when a person's message lands it answers with the AI SDK's streamText
// (over a mock model) appended through streamToThread. Mode `text`: one
// long answer. Mode `approval`: a tool call that needs approval; once a
// tool_call_approval event arrives, a second run executes the tool and
// answers at length. The model stops halfway through its long answer
// until a line arrives on stdin, so the test can cut the client's
// connection mid-stream. Every chunk it produced is written, per run, to
// the JSON file `out`.
//
// node ai-agent.mjs <url> <token> <threadId> <text|approval> <out>

import { writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';

import { convertToModelMessages, jsonSchema, streamText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { WebSocket } from 'ws';

import { streamToThread } from '../../../clients/js/src/ai.js';
import { connect } from '../../../clients/js/src/index.js';

const [url, token, threadId, mode, out] = process.argv.slice(2);
const ANSWER_DELTAS = 400;

const lines = createInterface({ input: process.stdin });
const resumed = new Promise((resolve) => lines.once('line', resolve));

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: ANSWER_DELTAS, text: ANSWER_DELTAS, reasoning: 0 },
};

/** A model stream of `parts`, stopping after `pauseAt` of them until stdin says go. */
function modelStream(parts, pauseAt) {
  let i = 0;
  return new ReadableStream({
    async pull(controller) {
      if (i === pauseAt) await resumed;
      if (i === parts.length) controller.close();
      else controller.enqueue(parts[i++]);
    },
  });
}

function answer(prefix) {
  const deltas = Array.from({ length: ANSWER_DELTAS }, (_, i) => ({ type: 'text-delta', id: 'answer', delta: `${prefix}${i} ` }));
  return [
    { type: 'stream-start', warnings: [] },
    { type: 'reasoning-start', id: 'think' },
    { type: 'reasoning-delta', id: 'think', delta: 'Counting' },
    { type: 'reasoning-end', id: 'think' },
    { type: 'text-start', id: 'answer' },
    ...deltas,
    { type: 'text-end', id: 'answer' },
    { type: 'finish', finishReason: { unified: 'stop', raw: undefined }, usage },
  ];
}

const toolCall = [
  { type: 'stream-start', warnings: [] },
  { type: 'tool-input-start', id: 'call-1', toolName: 'weather' },
  { type: 'tool-input-delta', id: 'call-1', delta: '{"city":' },
  { type: 'tool-input-delta', id: 'call-1', delta: '"Paris"}' },
  { type: 'tool-input-end', id: 'call-1' },
  { type: 'tool-call', toolCallId: 'call-1', toolName: 'weather', input: '{"city":"Paris"}' },
  { type: 'finish', finishReason: { unified: 'tool-calls', raw: undefined }, usage },
];

const model = new MockLanguageModelV3({
  doStream: async ({ prompt }) => {
    const toolDone = prompt.some((m) => m.role === 'tool');
    if (mode === 'approval' && !toolDone) return { stream: modelStream(toolCall, -1) };
    const parts = answer(toolDone ? 'sunny-' : 'n');
    return { stream: modelStream(parts, Math.floor(parts.length / 2)) };
  },
});

const tools = {
  weather: tool({
    description: 'The weather in a city.',
    inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
    needsApproval: true,
    execute: async ({ city }) => ({ city, sky: 'sunny', celsius: 21 }),
  }),
};

const connection = await connect(url, { token, WebSocket, backoff: { baseMs: 20, capMs: 200 } });
const thread = connection.thread(threadId);
const produced = [];

/** Streams one answer to the thread, recording every chunk it produced. */
async function reply(runId) {
  const { messages } = await thread.messages();
  const result = streamText({ model, tools, messages: await convertToModelMessages(messages) });
  const chunks = [];
  produced.push({ runId, chunks });
  const stream = result.toUIMessageStream({ originalMessages: messages, generateMessageId: () => runId });
  const recorded = stream.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        chunks.push(chunk);
        controller.enqueue(chunk);
      },
    }),
  );
  const run = await streamToThread(thread, recorded, { runId });
  if (run.status !== 'completed') throw new Error(`run ${runId} ended ${run.status}`);
}

const userRuns = new Set();
let answered = 0;
for await (const event of thread.subscribe({ fromSeq: 1 })) {
  if (event.type === 'message_part' && event.part.type === 'data-bubble-role' && event.part.data === 'user') {
    userRuns.add(event.runId);
  } else if (event.type === 'run_finished' && userRuns.has(event.runId)) {
    await reply(`agent-${(answered += 1)}`);
    if (mode === 'text') break;
  } else if (event.type === 'tool_call_approval' && event.approved) {
    await reply(`agent-${(answered += 1)}`);
    break;
  }
}
await writeFile(out, JSON.stringify(produced));
connection.close();
process.exit(0);
