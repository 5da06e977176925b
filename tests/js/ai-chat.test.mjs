// The AI SDK's own chat (AbstractChat from `ai`, with the simplest state
// a UI keeps) over a Bubble thread through BubbleChatTransport, against the
// real server; the agent is another process that answers with streamText
// through streamToThread. The client's connection is cut in the middle of
// a long answer; Chat.resumeStream (the transport's reconnectToStream)
// picks it up from the last seq seen, and the final message equals what
// the agent produced. The same for a tool call that needs approval: the
// approval travels as a tool_call_approval event and the agent continues.
// Also: streamToThread merges deltas without changing the message, and
// lands each event once across cut connections.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { AbstractChat, readUIMessageStream } from 'ai';
import { WebSocket } from 'ws';

import { BubbleChatTransport, streamToThread } from '../../clients/js/src/ai.js';
import { connect } from '../../clients/js/src/index.js';
import { http } from './lib/clients.mjs';
import { TOKENS, startNative } from './lib/native.mjs';
import { startProxy } from './lib/proxy.mjs';

const AGENT = fileURLToPath(new URL('./lib/ai-agent.mjs', import.meta.url));
const WAIT_MS = 60000;

/** Resolves once `check()` is true (polled), or fails after WAIT_MS (hang protection). */
async function until(check, what) {
  const deadline = Date.now() + WAIT_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The chat state a UI keeps: snapshots, replaced whole. */
class TestChat extends AbstractChat {
  constructor(init) {
    const state = {
      status: 'ready',
      error: undefined,
      messages: init.messages ?? [],
      pushMessage(message) {
        this.messages = [...this.messages, structuredClone(message)];
      },
      popMessage() {
        this.messages = this.messages.slice(0, -1);
      },
      replaceMessage(index, message) {
        this.messages = this.messages.map((m, i) => (i === index ? structuredClone(message) : m));
      },
      snapshot: (value) => structuredClone(value),
    };
    super({ ...init, state });
  }
}

const json = (value) => JSON.parse(JSON.stringify(value));
const text = (message) => message?.parts.filter((p) => p.type === 'text').map((p) => p.text).join('') ?? '';

async function read(chunks, message = undefined) {
  const stream = new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(structuredClone(chunk));
      controller.close();
    },
  });
  let last;
  for await (const state of readUIMessageStream({ message, stream, terminateOnError: true })) last = state;
  return last;
}

async function events(base, threadId) {
  const all = [];
  for (let from = 1; from !== null; ) {
    const page = await http(base, 'GET', `/v1/threads/${threadId}/events?fromSeq=${from}&limit=1000`, { token: TOKENS.alice });
    all.push(...page.body.events);
    from = page.body.nextSeq;
  }
  return all;
}

describe('the AI SDK chat over a Bubble thread', () => {
  let server;
  let proxy;
  let dir;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'bubble-ai-'));
    server = await startNative();
    proxy = await startProxy(new URL(server.url));
  });

  after(async () => {
    await proxy?.close();
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  async function thread(threadId) {
    assert.equal((await http(server.url, 'POST', '/v1/threads', { token: TOKENS.alice, body: { threadId } })).status, 201);
    const grant = await http(server.url, 'PUT', `/v1/threads/${threadId}/grants/bob`, { token: TOKENS.alice, body: { role: 'member' } });
    assert.equal(grant.status, 200);
  }

  /** The agent process (bob), connected straight to the server. */
  function agent(threadId, mode) {
    const out = join(dir, `${threadId}.json`);
    const child = spawn(process.execPath, [AGENT, server.url, TOKENS.bob, threadId, mode, out], {
      stdio: ['pipe', 'inherit', 'inherit'],
    });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    return {
      go: () => child.stdin.write('go\n'),
      produced: async () => {
        assert.equal(await exited, 0, 'the agent exits cleanly');
        return JSON.parse(await readFile(out, 'utf8'));
      },
    };
  }

  async function chatOn(threadId) {
    const connection = await connect(proxy.url, { token: TOKENS.alice, WebSocket, backoff: { baseMs: 20, capMs: 200 } });
    const errors = [];
    const chat = new TestChat({ id: threadId, transport: new BubbleChatTransport({ connection }), onError: (e) => errors.push(e) });
    return { connection, chat, errors };
  }

  /** Cuts the client's connection once the answer reached `mark`, lets the agent finish, resumes. */
  async function cutAndResume({ chat, connection, errors }, bot, sending, mark) {
    await until(() => text(chat.lastMessage).includes(mark), `the answer up to "${mark}"`);
    proxy.cut();
    await sending;
    assert.equal(chat.status, 'error');
    assert.ok(errors.at(-1) instanceof TypeError && /network/.test(errors.at(-1).message), String(errors.at(-1)));
    const before = text(chat.lastMessage);
    assert.ok(before.includes(mark) && !before.endsWith('399 '), 'cut in the middle');
    bot.go();
    const produced = await bot.produced();
    await until(() => connection.state === 'open', 'the connection back');
    await chat.resumeStream();
    assert.equal(chat.status, 'ready', String(chat.error));
    return produced;
  }

  test('a long answer, cut in the middle, resumed without a duplicate', async () => {
    const threadId = 'chat-text';
    await thread(threadId);
    const bot = agent(threadId, 'text');
    const client = await chatOn(threadId);
    const { chat } = client;
    const sending = chat.sendMessage({ text: 'Count to four hundred.' });
    const produced = await cutAndResume(client, bot, sending, 'n150 ');
    assert.equal(produced.length, 1);
    assert.ok(produced[0].chunks.length > 400, `${produced[0].chunks.length} chunks`);
    const want = json(await read(produced[0].chunks));
    assert.equal(text(want), Array.from({ length: 400 }, (_, i) => `n${i} `).join(''));
    assert.equal(chat.messages.length, 2);
    assert.deepEqual(json(chat.lastMessage), want);
    // The page-load view is the same message, after the person's.
    const folded = await http(server.url, 'GET', `/v1/threads/${threadId}/messages`, { token: TOKENS.alice });
    assert.equal(folded.status, 200);
    assert.deepEqual(folded.body.messages[1], want);
    assert.deepEqual(folded.body.activeRuns, []);
    const [user] = folded.body.messages;
    assert.deepEqual(
      { id: user.id, role: user.role, text: text(user) },
      { id: chat.messages[0].id, role: 'user', text: 'Count to four hundred.' },
    );
    // Deltas were merged: fewer events than chunks.
    const parts = (await events(server.url, threadId)).filter((e) => e.type === 'message_part' && e.runId === 'agent-1');
    assert.ok(parts.length < produced[0].chunks.length, `${parts.length} events for ${produced[0].chunks.length} chunks`);
    client.connection.close();
  });

  test('a fresh page resumes the answer being streamed: the run is replayed, once', async () => {
    const threadId = 'chat-reload';
    await thread(threadId);
    const bot = agent(threadId, 'text');
    const first = await chatOn(threadId);
    const sending = first.chat.sendMessage({ text: 'Count, then I reload.' });
    await until(() => text(first.chat.lastMessage).includes('n150 '), 'half the answer');
    // The page goes away; a new one loads the messages and resumes.
    first.connection.close();
    await sending;
    const connection = await connect(proxy.url, { token: TOKENS.alice, WebSocket });
    const loaded = await connection.thread(threadId).messages();
    assert.equal(loaded.messages.length, 2);
    assert.deepEqual(loaded.activeRuns.map((r) => [r.runId, r.messageId]), [['agent-1', 'agent-1']]);
    const chat = new TestChat({ id: threadId, messages: loaded.messages, transport: new BubbleChatTransport({ connection }) });
    const resuming = chat.resumeStream();
    await until(() => text(chat.lastMessage).includes('n150 '), 'the replayed half');
    bot.go();
    const produced = await bot.produced();
    await resuming;
    assert.equal(chat.status, 'ready', String(chat.error));
    const want = json(await read(produced[0].chunks));
    assert.equal(chat.messages.length, 2);
    assert.deepEqual(json(chat.lastMessage), want);
    assert.deepEqual(json(chat.messages[0]), loaded.messages[0]);
    connection.close();
  });

  test('a tool call approved in the chat: the agent continues, cut and resumed', async () => {
    const threadId = 'chat-approval';
    await thread(threadId);
    const bot = agent(threadId, 'approval');
    const client = await chatOn(threadId);
    const { chat } = client;
    await chat.sendMessage({ text: 'What is the weather in Paris?' });
    assert.equal(chat.status, 'ready', String(chat.error));
    const call = chat.lastMessage.parts.find((p) => p.type === 'tool-weather');
    assert.equal(call?.state, 'approval-requested', JSON.stringify(chat.lastMessage));
    await chat.addToolApprovalResponse({ id: call.approval.id, approved: true });
    const sending = chat.sendMessage();
    const produced = await cutAndResume(client, bot, sending, 'sunny-150 ');
    assert.deepEqual(produced.map((r) => r.runId), ['agent-1', 'agent-2']);
    const requested = await read(produced[0].chunks);
    const part = requested.parts.find((p) => p.type === 'tool-weather');
    part.state = 'approval-responded';
    part.approval = { ...part.approval, approved: true };
    const want = json(await read(produced[1].chunks, requested));
    const done = want.parts.find((p) => p.type === 'tool-weather');
    assert.deepEqual(done.output, { city: 'Paris', sky: 'sunny', celsius: 21 });
    assert.equal(chat.messages.length, 2);
    assert.deepEqual(json(chat.lastMessage), want);
    const folded = await http(server.url, 'GET', `/v1/threads/${threadId}/messages`, { token: TOKENS.alice });
    assert.deepEqual(folded.body.messages[1], want);
    const decisions = (await events(server.url, threadId)).filter((e) => e.type === 'tool_call_approval');
    assert.deepEqual(
      decisions.map((e) => [e.principalId, e.toolCallId, e.approved, e.runId]),
      [['alice', 'call-1', true, 'agent-1']],
    );
    client.connection.close();
  });

  test('streamToThread merges deltas and lands every event once across cuts', async () => {
    const threadId = 'agent-cuts';
    await thread(threadId);
    const chunks = [
      { type: 'start', messageId: 'm-1' },
      { type: 'start-step' },
      { type: 'reasoning-start', id: 'r' },
      ...Array.from({ length: 200 }, (_, i) => ({ type: 'reasoning-delta', id: 'r', delta: `r${i} ` })),
      { type: 'reasoning-end', id: 'r' },
      { type: 'tool-input-start', toolCallId: 'c', toolName: 'sum' },
      ...Array.from(JSON.stringify({ numbers: Array.from({ length: 50 }, (_, i) => i) }), (ch) => ({ type: 'tool-input-delta', toolCallId: 'c', inputTextDelta: ch })),
      { type: 'tool-input-available', toolCallId: 'c', toolName: 'sum', input: { numbers: Array.from({ length: 50 }, (_, i) => i) } },
      { type: 'tool-output-available', toolCallId: 'c', output: 1225 },
      { type: 'text-start', id: 't' },
      ...Array.from({ length: 600 }, (_, i) => ({ type: 'text-delta', id: 't', delta: `w${i} ` })),
      { type: 'text-delta', id: 't', delta: 'with metadata', providerMetadata: { p: { k: 1 } } },
      { type: 'text-end', id: 't' },
      { type: 'finish-step' },
      { type: 'finish', finishReason: 'stop' },
    ];
    const connection = await connect(proxy.url, { token: TOKENS.bob, WebSocket, backoff: { baseMs: 20, capMs: 200 } });
    let sent = 0;
    const source = new ReadableStream({
      async pull(controller) {
        if (sent === chunks.length) {
          controller.close();
          return;
        }
        // Cut the connection now and then while appends are on their way.
        if (sent % 250 === 125) proxy.cut();
        if (sent % 50 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
        controller.enqueue(chunks[sent++]);
      },
    });
    const run = await streamToThread(connection.thread(threadId), source, { runId: 'cuts-1' });
    assert.deepEqual(run, { runId: 'cuts-1', messageId: 'cuts-1', status: 'completed', error: undefined });
    const stored = await events(server.url, threadId);
    assert.deepEqual(stored.map((e) => e.seq), stored.map((_, i) => i + 1));
    assert.equal(stored.at(0).type, 'run_started');
    assert.deepEqual(stored.at(-1).status, 'completed');
    const parts = stored.filter((e) => e.type === 'message_part').map((e) => e.part);
    assert.ok(parts.length < chunks.length / 2, `${parts.length} events for ${chunks.length} chunks`);
    const want = json(await read(chunks));
    assert.deepEqual(json(await read(parts)), want, 'merged deltas rebuild the same message');
    const folded = await http(server.url, 'GET', `/v1/threads/${threadId}/messages`, { token: TOKENS.alice });
    assert.deepEqual(folded.body.messages, [want]);
    connection.close();
  });

  test('a failing stream finishes its run failed, with an error chunk', async () => {
    const threadId = 'agent-fails';
    await thread(threadId);
    const connection = await connect(server.url, { token: TOKENS.bob, WebSocket });
    async function* failing() {
      yield { type: 'text-start', id: 't' };
      yield { type: 'text-delta', id: 't', delta: 'partial' };
      throw new Error('model went away');
    }
    const run = await streamToThread(connection.thread(threadId), failing(), { runId: 'fails-1' });
    assert.equal(run.status, 'failed');
    assert.equal(run.error.message, 'model went away');
    const stored = await events(server.url, threadId);
    assert.deepEqual(
      stored.map((e) => (e.type === 'message_part' ? e.part.type : `${e.type}${e.status ? `:${e.status}` : ''}`)),
      ['run_started', 'start', 'text-start', 'text-delta', 'error', 'run_finished:failed'],
    );
    assert.deepEqual(stored[1].part, { type: 'start', messageId: 'fails-1' });
    const aborting = new AbortController();
    const never = new ReadableStream({
      start(controller) {
        controller.enqueue({ type: 'start' });
        aborting.abort();
      },
    });
    const aborted = await streamToThread(connection.thread(threadId), never, { runId: 'aborts-1', signal: aborting.signal });
    assert.equal(aborted.status, 'aborted');
    assert.equal((await events(server.url, threadId)).at(-1).status, 'aborted');
    connection.close();
  });
});
