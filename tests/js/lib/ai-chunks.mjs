// Seeded random conversations of AI SDK v6 UIMessageChunks (text and
// reasoning deltas, tool input streaming, tool outputs and errors,
// approvals, data parts, files, sources, metadata, error chunks, several
// runs, runs that continue a message or move to another), as thread
// events; and what the `ai` package's own readUIMessageStream makes of the
// same chunks, folded the way GET /v1/threads/:id/messages folds a thread.

import { readUIMessageStream, UIMessageStreamError } from 'ai';

/** mulberry32: a small seeded generator. */
export function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n) => Math.floor(next() * n),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)],
  };
}

const WORDS = ['Hello', ' wörld', ' 😀', '\n', ' "quoted"', ' back\\slash', ' tab\t', ' ok.', ' 21°C', ' ', 'ß', ' <b>'];

function words(r, n) {
  return Array.from({ length: n }, () => r.pick(WORDS));
}

/** A random JSON value (numbers are integers or halves, so every parser agrees on them). */
function jsonValue(r, depth = 0) {
  const kind = r.int(depth > 2 ? 4 : 6);
  switch (kind) {
    case 0:
      return r.pick([null, true, false]);
    case 1:
      return (r.int(2001) - 1000) / r.pick([1, 2]);
    case 2:
      return r.pick(['', 'Paris', 'naïve "x"', '{[,]}', 'a\\b', 'ünï 😀']);
    case 3:
      return r.int(100000);
    case 4:
      return Array.from({ length: r.int(4) }, () => jsonValue(r, depth + 1));
    default:
      return Object.fromEntries(Array.from({ length: r.int(4) }, (_, i) => [r.pick(['city', 'n', 'list', `k${i}`, 'ünit']), jsonValue(r, depth + 1)]));
  }
}

/** `text` cut at random places. */
function cuts(r, text) {
  const units = Array.from(text);
  const out = [];
  let at = 0;
  while (at < units.length) {
    const n = 1 + r.int(6);
    out.push(units.slice(at, at + n).join(''));
    at += n;
  }
  return out.length ? out : [''];
}

const providerMetadata = (r) => (r.chance(0.15) ? { providerMetadata: { test: { n: r.int(9) } } } : {});

/**
 * A conversation: `{ events }`, thread event bodies in order (runs are not
 * interleaved; approvals come between runs).
 */
export function conversation(seed) {
  const r = rng(seed);
  const events = [];
  const messages = []; // { id, role, waiting: [{ call, tool, dynamic }] }
  let n = 0;
  const id = (prefix) => `${prefix}-${seed}-${n++}`;
  const runs = 2 + r.int(6);
  for (let k = 0; k < runs; k += 1) {
    const runId = id('run');
    const chunks = [];
    const push = (...c) => chunks.push(...c);
    // Approvals for calls that wait for one, then often a run continuing it.
    const waiting = messages.filter((m) => m.waiting.length);
    let continued = null;
    for (const m of waiting) {
      for (const w of m.waiting) {
        if (!r.chance(0.8)) continue;
        w.approved = r.chance(0.7);
        const reason = r.chance(0.3) ? { reason: r.pick(['fine', 'no way']) } : {};
        events.push({ type: 'tool_call_approval', runId: id('approval'), toolCallId: w.call, approved: w.approved, ...reason });
      }
      if (r.chance(0.7)) continued = m;
    }
    if (r.chance(0.15) && !continued) {
      // A person's message, as the chat transport appends it.
      const messageId = id('user');
      push({ type: 'start', messageId }, { type: 'data-bubble-role', data: 'user', transient: true });
      push({ type: 'text-start', id: '0' }, { type: 'text-delta', id: '0', delta: words(r, 3).join('') }, { type: 'text-end', id: '0' }, { type: 'finish' });
      messages.push({ id: messageId, role: 'user', waiting: [] });
    } else {
      let message;
      const startKind = continued ? 0 : r.int(10);
      if (continued) {
        message = continued;
        push({ type: 'start', messageId: message.id });
        for (const w of message.waiting.splice(0)) {
          if (w.approved === undefined) continue;
          if (w.approved) push({ type: 'tool-output-available', toolCallId: w.call, output: jsonValue(r), ...providerMetadata(r) });
          else push({ type: 'tool-output-denied', toolCallId: w.call });
        }
      } else if (startKind < 7) {
        message = { id: id('msg'), role: 'assistant', waiting: [] };
        const metadata = r.chance(0.3) ? { messageMetadata: { model: { name: r.pick(['a', 'b']) }, n: r.int(9) } } : {};
        push({ type: 'start', messageId: message.id, ...metadata });
        messages.push(message);
      } else {
        // No messageId (or no start at all): the message is the run's.
        message = { id: runId, role: 'assistant', waiting: [] };
        if (startKind < 9) push({ type: 'start' });
        messages.push(message);
      }
      body(r, push, message, id);
    }
    if (r.chance(0.1)) {
      // A chunk the SDK throws on ends the run's fold.
      push({ type: 'text-delta', id: 'never-opened', delta: 'x' });
      push({ type: 'text-start', id: 'after' }, { type: 'text-delta', id: 'after', delta: 'ignored' });
    }
    events.push({ type: 'run_started', runId });
    for (const part of chunks) events.push({ type: 'message_part', runId, part, version: 'ai-sdk-v6' });
    if (r.chance(0.9)) events.push({ type: 'run_finished', runId, status: r.pick(['completed', 'completed', 'failed', 'aborted']) });
  }
  return { events };
}

/** Steps of an assistant message's run. */
function body(r, push, message, id) {
  const steps = 1 + r.int(3);
  for (let s = 0; s < steps; s += 1) {
    if (r.chance(0.8)) push({ type: 'start-step' });
    const blocks = 1 + r.int(4);
    let askedApproval = false;
    for (let b = 0; b < blocks; b += 1) {
      const kind = r.int(12);
      if (kind <= 2) {
        const tid = id('t');
        push({ type: 'text-start', id: tid, ...providerMetadata(r) });
        for (const delta of words(r, 1 + r.int(12))) push({ type: 'text-delta', id: tid, delta });
        if (r.chance(0.9)) push({ type: 'text-end', id: tid, ...providerMetadata(r) });
      } else if (kind === 3) {
        const rid = id('r');
        push({ type: 'reasoning-start', id: rid });
        for (const delta of words(r, 1 + r.int(6))) push({ type: 'reasoning-delta', id: rid, delta, ...providerMetadata(r) });
        push({ type: 'reasoning-end', id: rid });
      } else if (kind <= 6) {
        const call = id('call');
        const tool = r.pick(['weather', 'search-web', 'x']);
        const dynamic = r.chance(0.25);
        const text = r.chance(0.15);
        const input = text ? r.pick(['plain text input', 'ü 😀 "q"']) : jsonValue(r, 1);
        const start = { type: 'tool-input-start', toolCallId: call, toolName: tool };
        if (dynamic) start.dynamic = true;
        if (text) start.inputEncoding = 'text';
        if (r.chance(0.2)) start.title = 'A tool';
        if (r.chance(0.1)) start.toolMetadata = { v: 1 };
        push(start);
        const raw = text ? input : JSON.stringify(input);
        const deltas = cuts(r, raw);
        // Sometimes the input stops streaming halfway.
        const sent = r.chance(0.1) ? deltas.slice(0, 1 + r.int(deltas.length)) : deltas;
        for (const inputTextDelta of sent) push({ type: 'tool-input-delta', toolCallId: call, inputTextDelta });
        if (sent.length < deltas.length) continue;
        const available = { type: 'tool-input-available', toolCallId: call, toolName: tool, input, ...providerMetadata(r) };
        if (dynamic) available.dynamic = true;
        push(available);
        const outcome = r.int(5);
        if (outcome === 0 && !askedApproval) {
          const request = { type: 'tool-approval-request', approvalId: id('approval'), toolCallId: call };
          if (r.chance(0.3)) request.approvalDescriptor = { risk: 'low' };
          push(request);
          message.waiting.push({ call, tool, dynamic });
          askedApproval = true;
        } else if (outcome <= 2) {
          push({ type: 'tool-output-available', toolCallId: call, output: jsonValue(r), ...(r.chance(0.2) ? { preliminary: true } : {}) });
        } else if (outcome === 3) {
          push({ type: 'tool-output-error', toolCallId: call, errorText: 'boom' });
        }
      } else if (kind === 7) {
        push({ type: 'tool-input-error', toolCallId: id('call'), toolName: 'broken', input: jsonValue(r), errorText: 'bad input', ...(r.chance(0.5) ? { dynamic: true } : {}) });
      } else if (kind === 8) {
        const data = r.pick(['data-progress', 'data-status']);
        const pid = r.chance(0.7) ? { id: r.pick(['p1', 'p2']) } : {};
        push({ type: data, ...pid, data: jsonValue(r, 1), ...(r.chance(0.2) ? { transient: true } : {}) });
      } else if (kind === 9) {
        push(
          r.pick([
            { type: 'file', url: 'https://example.com/a.png', mediaType: 'image/png' },
            { type: 'source-url', sourceId: id('s'), url: 'https://example.com', title: 'Ex' },
            { type: 'source-document', sourceId: id('s'), mediaType: 'text/plain', title: 'Doc', filename: 'a.txt' },
          ]),
        );
      } else if (kind === 10) {
        push(r.pick([{ type: 'error', errorText: 'transient trouble' }, { type: 'message-metadata', messageMetadata: { n: r.int(9), model: { v: 2 } } }, { type: 'some-future-chunk', x: 1 }]));
      } else if (r.chance(0.3)) {
        // The run moves on to another message.
        const next = { id: id('msg'), role: 'assistant', waiting: [] };
        push({ type: 'start', messageId: next.id });
        message.id = next.id;
      }
    }
    push({ type: 'finish-step' });
    if (askedApproval) break;
  }
  push({ type: 'finish', finishReason: r.pick(['stop', 'tool-calls', 'length']), ...(r.chance(0.2) ? { messageMetadata: { done: true } } : {}) });
}

/** What readUIMessageStream yields last for `chunks` over `message`, and whether the SDK threw. */
async function readOver(message, chunks) {
  let last;
  let broken = false;
  const stream = new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(structuredClone(chunk));
      controller.close();
    },
  });
  const onError = (error) => {
    if (error instanceof UIMessageStreamError) broken = true;
  };
  for await (const state of readUIMessageStream({ message, stream, onError })) last = state;
  return { last, broken };
}

const isTool = (part) => part.type === 'dynamic-tool' || part.type.startsWith('tool-');

/**
 * The messages the `ai` package makes of stored `events` (in seq order):
 * each run's chunks through readUIMessageStream, one message at a time
 * (a run's `start` with another messageId moves it on; a message id seen
 * before continues that message from its last snapshot), tool approvals
 * applied as the SDK's addToolApprovalResponse applies them. Returns
 * `{ messages, activeRuns }`.
 */
export async function expectedFold(events) {
  const list = [];
  const runs = new Map();
  const flush = async (runId) => {
    const run = runs.get(runId);
    if (!run || !run.chunks.length) return;
    const chunks = run.chunks.splice(0);
    const segments = [];
    for (const chunk of chunks) {
      const moves = chunk.type === 'start' && chunk.messageId != null && chunk.messageId !== (segments.at(-1)?.id ?? run.messageId);
      if (!segments.length || moves) segments.push({ id: moves ? chunk.messageId : run.messageId, chunks: [] });
      segments.at(-1).chunks.push(chunk);
    }
    for (const segment of segments) {
      if (run.broken) break;
      run.messageId = segment.id;
      const index = list.findIndex((m) => m.id === segment.id);
      const base = index >= 0 ? structuredClone(list[index]) : { id: segment.id, role: 'assistant', parts: [] };
      const { last, broken } = await readOver(base, segment.chunks);
      run.broken = broken;
      if (!last) continue;
      const role = segment.chunks.find((c) => c.type === 'data-bubble-role')?.data;
      if (role) last.role = role;
      else if (index >= 0) last.role = list[index].role;
      if (index >= 0) list[index] = last;
      else list.push(last);
    }
  };
  let current = null;
  for (const event of events) {
    if (event.type === 'message_part') {
      if (current !== event.runId) await flush(current);
      current = event.runId;
      if (!runs.has(event.runId)) {
        const part = event.part;
        const messageId = part.type === 'start' && part.messageId != null ? part.messageId : event.runId;
        runs.set(event.runId, { messageId, fromSeq: event.seq, chunks: [], broken: false });
      }
      runs.get(event.runId).chunks.push(event.part);
      continue;
    }
    await flush(current);
    current = null;
    if (event.type === 'run_finished') runs.delete(event.runId);
    if (event.type === 'tool_call_approval') {
      const message = list.find((m) => m.parts.some((p) => isTool(p) && p.toolCallId === event.toolCallId && p.state === 'approval-requested'));
      if (message) {
        message.parts = message.parts.map((p) =>
          isTool(p) && p.toolCallId === event.toolCallId && p.state === 'approval-requested'
            ? { ...p, state: 'approval-responded', approval: { ...p.approval, approved: event.approved, reason: event.reason } }
            : p,
        );
      }
    }
  }
  await flush(current);
  const activeRuns = [...runs].map(([runId, run]) => ({ runId, messageId: run.messageId, fromSeq: run.fromSeq })).sort((a, b) => a.fromSeq - b.fromSeq);
  // The wire has no `undefined`: compare as JSON.
  return JSON.parse(JSON.stringify({ messages: list, activeRuns }));
}
