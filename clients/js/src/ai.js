// The AI SDK v6 side of the client (`@bubble/client/ai`): a ChatTransport
// that runs the SDK's Chat (and useChat) over a Bubble thread, and the
// agent's helper that appends a UIMessageChunk stream to a thread as one
// run. Neither imports the `ai` package: a transport is an object with two
// methods, a chunk is plain JSON.

/** The chunk that gives a run's message another role than `assistant`. */
export const ROLE_CHUNK = 'data-bubble-role';

const VERSION = 'ai-sdk-v6';
/** Longest text put in one delta chunk (keeps each event under 64 KiB). */
const MAX_DELTA_CHARS = 8192;
const ABORTED = Symbol('aborted');

function randomId(prefix) {
  const bytes = new Uint8Array(12);
  globalThis.crypto.getRandomValues(bytes);
  return `${prefix}-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** `text` in pieces of at most `max` code points (a surrogate pair stays whole). */
function pieces(text, max) {
  const chars = Array.from(text);
  if (chars.length <= max) return [text];
  const out = [];
  for (let i = 0; i < chars.length; i += max) out.push(chars.slice(i, i + max).join(''));
  return out;
}

function defined(object) {
  return Object.fromEntries(Object.entries(object).filter(([, v]) => v !== undefined));
}

/**
 * The chunks that rebuild `message` (a UIMessage written by a person: its
 * text, reasoning, files, sources, data parts and steps; tool parts are
 * the agent's and are left out) in a thread's folded messages.
 */
export function messageChunks(message) {
  const chunks = [defined({ type: 'start', messageId: message.id, messageMetadata: message.metadata ?? undefined })];
  if (message.role && message.role !== 'assistant') chunks.push({ type: ROLE_CHUNK, data: message.role, transient: true });
  let n = 0;
  for (const part of message.parts ?? []) {
    const meta = part.providerMetadata;
    switch (part.type) {
      case 'text':
      case 'reasoning': {
        const id = String(n++);
        chunks.push(defined({ type: `${part.type}-start`, id, providerMetadata: meta }));
        for (const delta of pieces(part.text ?? '', MAX_DELTA_CHARS)) chunks.push({ type: `${part.type}-delta`, id, delta });
        chunks.push({ type: `${part.type}-end`, id });
        break;
      }
      case 'file':
        chunks.push(defined({ type: 'file', url: part.url, mediaType: part.mediaType, providerMetadata: meta }));
        break;
      case 'source-url':
        chunks.push(defined({ type: 'source-url', sourceId: part.sourceId, url: part.url, title: part.title, providerMetadata: meta }));
        break;
      case 'source-document':
        chunks.push(defined({ ...part, type: 'source-document' }));
        break;
      case 'step-start':
        chunks.push({ type: 'start-step' });
        break;
      default:
        if (part.type.startsWith('data-')) chunks.push(defined({ type: part.type, id: part.id, data: part.data }));
    }
  }
  chunks.push({ type: 'finish' });
  return chunks;
}

/**
 * Appends `message` to `thread` as one run (`run_started`, its chunks,
 * `run_finished`); resolves with the stored `run_finished` event.
 */
export async function appendMessage(thread, message, { runId = randomId('run') } = {}) {
  const events = [{ type: 'run_started', runId }];
  for (const part of messageChunks(message)) events.push({ type: 'message_part', runId, part, version: VERSION });
  events.push({ type: 'run_finished', runId, status: 'completed' });
  const stored = await Promise.all(events.map((event) => thread.append(event)));
  return stored[stored.length - 1];
}

const MERGEABLE = {
  'text-delta': ['id', 'delta'],
  'reasoning-delta': ['id', 'delta'],
  'tool-input-delta': ['toolCallId', 'inputTextDelta'],
};

/** Whether `b` can be folded into `a`: the same delta type and part, nothing else in either. */
function mergeable(a, b, max) {
  const keys = MERGEABLE[a.type];
  if (!keys || a.type !== b.type || a[keys[0]] !== b[keys[0]]) return false;
  const plain = (c) => Object.keys(c).length === 3 && typeof c[keys[1]] === 'string';
  return plain(a) && plain(b) && a[keys[1]].length + b[keys[1]].length <= max;
}

/** The chunks of a ReadableStream or async iterable, until `signal` aborts. */
async function* chunksOf(source, signal) {
  const iterator = source[Symbol.asyncIterator]
    ? source[Symbol.asyncIterator]()
    : (() => {
        const reader = source.getReader();
        return { next: () => reader.read(), return: () => reader.cancel() };
      })();
  const aborted = new Promise((resolve) => {
    if (signal?.aborted) resolve(ABORTED);
    signal?.addEventListener('abort', () => resolve(ABORTED), { once: true });
  });
  try {
    for (;;) {
      const next = await Promise.race([iterator.next(), aborted]);
      if (next === ABORTED || next.done) return;
      yield next.value;
    }
  } finally {
    try {
      await iterator.return?.();
    } catch {
      // the source is gone already
    }
  }
}

function errorText(error) {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The agent's side: appends a UIMessageChunk stream (e.g.
 * `streamText(...).toUIMessageStream()`) to `thread` as one run, between
 * `run_started` and `run_finished`. Consecutive deltas of one part merge
 * while the previous append is on its way; see ai.d.ts.
 */
export async function streamToThread(thread, stream, options = {}) {
  const runId = options.runId ?? randomId('run');
  const messageId = options.messageId ?? runId;
  const max = options.maxDeltaChars ?? MAX_DELTA_CHARS;
  const appends = [];
  const queue = [];
  let inFlight = null;
  let failure = null;
  const append = (event) => {
    const stored = thread.append(event);
    appends.push(stored);
    return stored;
  };
  const pump = () => {
    if (inFlight || failure || !queue.length) return;
    const part = queue.shift();
    inFlight = append({ type: 'message_part', runId, part, version: VERSION }).then(
      () => {
        inFlight = null;
        pump();
      },
      (error) => {
        failure ??= error;
        inFlight = null;
      },
    );
  };
  const push = (chunk) => {
    const last = queue[queue.length - 1];
    if (last && mergeable(last, chunk, max)) {
      const key = MERGEABLE[chunk.type][1];
      last[key] += chunk[key];
    } else {
      queue.push({ ...chunk });
    }
    pump();
  };
  append({ type: 'run_started', runId }).catch((error) => {
    failure ??= error;
  });
  let status = 'completed';
  let error;
  let first = true;
  try {
    for await (const chunk of chunksOf(stream, options.signal)) {
      if (failure) break;
      if (first) {
        first = false;
        // The run's message keeps one id, the same for every reader.
        if (chunk.type !== 'start') push({ type: 'start', messageId });
        else if (chunk.messageId == null) {
          push({ ...chunk, messageId });
          continue;
        }
      }
      if (chunk.type === 'abort') status = 'aborted';
      push(chunk);
    }
    if (options.signal?.aborted) status = 'aborted';
  } catch (thrown) {
    if (options.signal?.aborted) {
      status = 'aborted';
    } else {
      status = 'failed';
      error = thrown;
      push({ type: 'error', errorText: errorText(thrown) });
    }
  }
  while (!failure && (inFlight || queue.length)) {
    pump();
    await inFlight;
  }
  if (failure) {
    append({ type: 'run_finished', runId, status: 'failed' }).catch(() => {});
    throw failure;
  }
  append({ type: 'run_finished', runId, status });
  await Promise.all(appends);
  return { runId, messageId, status, error };
}

const isTool = (part) => part.type === 'dynamic-tool' || part.type.startsWith('tool-');

/** What the transport knows of one chat's thread. */
class ChatThread {
  constructor(thread) {
    this.thread = thread;
    /** The last seq handled. */
    this.lastSeq = 0;
    /** A response is expected (sent, not finished). */
    this.expecting = false;
    /** The run being streamed back, once picked. */
    this.followed = null;
    /** Chunks of runs not picked yet (their `start`s). */
    this.pending = new Map();
    this.ignored = new Set();
    this.ownRuns = new Set();
    this.sentMessages = new Set();
    this.sentApprovals = new Set();
    this.runOfCall = new Map();
    this.active = null;
  }
}

/** A ChatTransport over Bubble threads; see ai.d.ts. */
export class BubbleChatTransport {
  #connection;
  #threadId;
  #chats = new Map();

  constructor({ connection, threadId = (chatId) => chatId }) {
    this.#connection = connection;
    this.#threadId = threadId;
  }

  /** A fresh page's resume replays the run from its first chunk. */
  get resumeStreamIsReplay() {
    return true;
  }

  #chat(chatId) {
    if (!this.#chats.has(chatId)) this.#chats.set(chatId, new ChatThread(this.#connection.thread(this.#threadId(chatId))));
    return this.#chats.get(chatId);
  }

  async sendMessages({ chatId, messages, trigger, messageId, abortSignal }) {
    if (trigger === 'regenerate-message') throw new Error('A Bubble thread is append-only: a message cannot be regenerated.');
    const chat = this.#chat(chatId);
    const target = messageId != null ? messages.find((m) => m.id === messageId) : messages[messages.length - 1];
    let last = null;
    if (target?.role === 'user') {
      if (chat.sentMessages.has(target.id)) throw new Error(`Message "${target.id}" is in the thread already: a thread is append-only.`);
      const runId = randomId('run');
      chat.ownRuns.add(runId);
      chat.sentMessages.add(target.id);
      last = await appendMessage(chat.thread, target, { runId });
    } else if (target?.role === 'assistant') {
      const answered = target.parts.filter(
        (p) => isTool(p) && p.state === 'approval-responded' && !chat.sentApprovals.has(p.toolCallId),
      );
      for (const part of answered) {
        chat.sentApprovals.add(part.toolCallId);
        const event = defined({
          type: 'tool_call_approval',
          runId: chat.runOfCall.get(part.toolCallId) ?? target.id,
          toolCallId: part.toolCallId,
          approved: part.approval.approved === true,
          reason: part.approval.reason,
        });
        last = await chat.thread.append(event);
      }
    }
    chat.lastSeq = last ? last.seq : chat.lastSeq;
    chat.expecting = true;
    chat.followed = null;
    chat.pending.clear();
    return this.#stream(chat, abortSignal);
  }

  async reconnectToStream({ chatId, abortSignal }) {
    const known = this.#chats.get(chatId);
    if (known?.expecting) return this.#stream(known, abortSignal);
    const chat = this.#chat(chatId);
    const { messages, activeRuns } = await chat.thread.messages();
    const roles = new Map(messages.map((m) => [m.id, m.role]));
    const run = activeRuns.filter((r) => (roles.get(r.messageId) ?? 'assistant') === 'assistant').at(-1);
    if (!run) return null;
    chat.expecting = true;
    chat.followed = { runId: run.runId };
    chat.lastSeq = run.fromSeq - 1;
    return this.#stream(chat, abortSignal);
  }

  /** The followed run's chunks from `chat.lastSeq + 1`, until its `run_finished`. */
  #stream(chat, abortSignal) {
    chat.active?.();
    const connection = this.#connection;
    let ended = false;
    let subscription = null;
    let offState = null;
    let offClosed = null;
    let end = () => {};
    return new ReadableStream({
      start(controller) {
        end = (error) => {
          if (ended) return;
          ended = true;
          // A closed connection has no subscriptions left to end.
          if (connection.state !== 'closed') subscription?.unsubscribe();
          offState?.();
          offClosed?.();
          if (chat.active === end) chat.active = null;
          if (error) controller.error(error);
          else controller.close();
        };
        chat.active = end;
        const chunk = (event) => {
          const { runId, part } = event;
          if (event.type === 'run_finished') {
            if (chat.followed?.runId === runId || (!chat.followed && chat.pending.has(runId))) {
              for (const start of chat.pending.get(runId) ?? []) controller.enqueue(start);
              chat.expecting = false;
              end();
            }
            return;
          }
          if (event.type !== 'message_part' || !part) return;
          if (!chat.followed) {
            if (chat.ownRuns.has(runId) || chat.ignored.has(runId)) return;
            if (part.type === ROLE_CHUNK && part.data !== 'assistant') {
              chat.ignored.add(runId);
              chat.pending.delete(runId);
              return;
            }
            if (part.type === 'start') {
              chat.pending.set(runId, [...(chat.pending.get(runId) ?? []), part]);
              return;
            }
            chat.followed = { runId };
            for (const start of chat.pending.get(runId) ?? []) controller.enqueue(start);
            chat.pending.clear();
          }
          if (runId !== chat.followed.runId) return;
          if (typeof part.toolCallId === 'string') chat.runOfCall.set(part.toolCallId, runId);
          controller.enqueue(part);
        };
        subscription = chat.thread.subscribe({ fromSeq: chat.lastSeq + 1 }, (event) => {
          if (ended) return;
          chat.lastSeq = event.seq;
          chunk(event);
        });
        offState = connection.on('state', (change) => {
          if (change.state === 'reconnecting' || change.state === 'closed') end(new TypeError('network connection to the Bubble server lost'));
        });
        offClosed = chat.thread.on('closed', (closed) => {
          if (!closed.resubscribing) end(new Error(`The thread subscription ended: ${closed.reason}.`));
        });
        abortSignal?.addEventListener('abort', () => end(), { once: true });
      },
      cancel() {
        end();
      },
    });
  }
}
