// The offline world: the whole engine in the page (wasm), a cast of people
// and agents, each with its own /v1/ws connection and its own /socket for
// presence, and a seeded script of conversations on simulated time.

import { BubbleHost } from '../pkg/host.mjs';
import { MemoryStorage } from '../pkg/storage.mjs';
import { ThreadsClient } from '../threads-client.mjs';
import { SimClock, seededRandom } from './clock.mjs';
import { openSocket } from './sockets.mjs';

export const APP = { id: 'app-1', key: 'sim-app-key', secret: 'sim-app-secret' };
export const PRESENCE_CHANNEL = 'presence-team';
const START = Date.UTC(2026, 0, 5, 9, 0, 0);
export const STEP_MS = 1500;
// How long the in-page storage takes to answer, in simulated milliseconds.
const STORAGE_MS = 3;

export const CAST = [
  { id: 'alice', name: 'Alice', kind: 'person', role: 'Product lead' },
  { id: 'bob', name: 'Bob', kind: 'person', role: 'Engineer' },
  { id: 'carol', name: 'Carol', kind: 'person', role: 'Support' },
  { id: 'scout', name: 'Scout', kind: 'agent', role: 'Research agent' },
  { id: 'helper', name: 'Helper', kind: 'agent', role: 'Support agent' },
];

export const THREADS = [
  { id: 'launch', title: 'Launch plan', owner: 'alice', members: ['bob', 'scout'] },
  { id: 'launch.research', parent: 'launch', title: 'Competitor research', owner: 'alice', members: ['scout', 'bob'] },
  { id: 'support', title: 'Customer support', owner: 'carol', members: ['alice', 'helper'] },
];

const LINES = {
  launch: [
    'Can we lock the launch date this week?',
    'Docs are ready for review, pricing page still pending.',
    'Beta feedback is mostly about onboarding.',
    'I moved the announcement to Tuesday morning.',
    'Who owns the status page for launch day?',
  ],
  'launch.research': [
    'Pull the pricing tiers of the three closest tools.',
    'Do any of them offer replay after a disconnect?',
    'Summarise what their free plans include.',
  ],
  support: [
    'A customer says messages arrive twice after reconnecting.',
    'Ticket #4312: presence shows a user who left an hour ago.',
    'Can we send a refund link for the duplicate charge?',
    'The customer confirmed it works now, closing.',
  ],
};

const AGENT_REPLIES = {
  scout: [
    'Three competitors compared: two resume from a cursor, one replays the last minute only.',
    'Free plans range from 100 to 200 concurrent connections; none keep history longer than a day.',
    'Pricing starts at 49 dollars a month for all three, billed per connection.',
  ],
  helper: [
    'Reconnecting with fromSeq set to the next unseen seq avoids duplicates; I linked the guide.',
    'Presence is rebuilt from the snapshot on every new subscription, so stale members clear on reconnect.',
    'Refund link sent. The ticket stays open until the customer confirms.',
  ],
};

const token = (id) => `sim-${id}`;
const utf8 = new TextEncoder();

export class World {
  /** `wasm`: the wasm module's classes (`Engine`, `Edge`, `MonotonicClock`). */
  constructor(wasm, seed) {
    this.seed = String(seed);
    this.rng = seededRandom(this.seed);
    this.clock = new SimClock(START);
    this.store = new MemoryStorage();
    this.busy = new Map();
    this.listeners = new Set();
    this.steps = 0;
    const config = this.#config();
    this.host = new BubbleHost(
      wasm,
      new wasm.Engine(JSON.stringify(config), this.rng.seed53()),
      {
        config,
        storage: onClock(this.store, this.clock, STORAGE_MS),
        now: () => this.clock.now,
        setTimer: (fn, ms) => this.clock.after(ms, fn),
        clearTimer: (handle) => this.clock.cancel(handle),
        defer: (fn) => this.clock.after(0, fn),
        onError: (err) => console.error('bubble engine:', err),
      },
    );
    this.clients = CAST.map((person) => this.#client(person));
  }

  #config() {
    return {
      auth: { tokens: CAST.map((p) => ({ token: token(p.id), principal: p.id })) },
      apps: [APP],
      limits: { outbound_queue_frames: 400 },
    };
  }

  // A thread's durable record, read straight from the in-memory store.
  #record(id) {
    const json = this.store.get(`t/${id}`);
    return json === undefined ? null : JSON.parse(json);
  }

  /** The thread's durable head seq (0 before it exists). */
  head(id) {
    return this.#record(id)?.headSeq ?? 0;
  }

  /** The thread's durable title (null when cleared or before it exists). */
  title(id) {
    return this.#record(id)?.title ?? null;
  }

  /** Calls `fn(change)` after anything visible changes. */
  subscribe(fn) {
    this.listeners.add(fn);
  }

  #emit(change) {
    for (const fn of this.listeners) fn(change);
  }

  #client(person) {
    const threads = new ThreadsClient();
    for (const t of THREADS) if (t.owner === person.id || t.members.includes(person.id)) threads.follow(t.id);
    threads.onChange = (change) => this.#emit({ ...change, client: person.id });
    return { person, threads, socket: null, channels: null, presence: new Map(), presenceLive: false, closeReason: null };
  }

  /** An HTTP call to the in-page engine, completed on simulated time. */
  #call(who, method, path, body) {
    let answer = null;
    this.host.request(
      {
        method,
        path,
        authorization: who === APP ? `Bearer ${APP.secret}` : `Bearer ${token(who)}`,
        body: body === undefined ? undefined : utf8.encode(JSON.stringify(body)),
      },
      (a) => {
        answer = a;
      },
    );
    this.clock.runWhile(() => answer === null);
    return answer ? { status: answer.status, body: answer.body ? JSON.parse(answer.body) : null } : null;
  }

  /** Creates the threads, grants and participants, and connects everyone. */
  setup() {
    for (const t of THREADS) {
      this.#call(t.owner, 'POST', '/v1/threads', { threadId: t.id, title: t.title, parentThreadId: t.parent });
      this.#call(t.owner, 'POST', `/v1/threads/${t.id}/participants`, {});
      for (const member of t.members) {
        this.#call(t.owner, 'PUT', `/v1/threads/${t.id}/grants/${member}`, { role: 'member' });
        this.#call(member, 'POST', `/v1/threads/${t.id}/participants`, {});
      }
    }
    for (const client of this.clients) this.connect(client.person.id);
    this.clock.runUntil(this.clock.now + 50);
    this.#emit({ kind: 'reset' });
  }

  client(id) {
    return this.clients.find((c) => c.person.id === id);
  }

  /** Opens the person's two sockets (again), resuming each thread from its next unseen seq. */
  connect(id) {
    const client = this.client(id);
    if (client.socket?.open) return;
    if (client.socket) client.threads.reconnecting(`${client.person.name} reconnected`);
    client.closeReason = null;
    client.socket = openSocket(this.clock, this.host, 'threads', { token: token(id) }, {
      frame: (frame) => client.threads.handle(frame),
      close: (code) => this.#closed(client, code),
    });
    for (const frame of client.threads.subscribeFrames()) client.socket.send(frame);
    this.#connectChannels(client);
    this.#emit({ kind: 'status', client: id });
  }

  #connectChannels(client) {
    client.presence = new Map();
    client.presenceLive = false;
    const channelData = JSON.stringify({
      user_id: client.person.id,
      user_info: { name: client.person.name, kind: client.person.kind },
    });
    client.channels = openSocket(this.clock, this.host, 'channels', { appKey: APP.key }, {
      frame: (packet) => this.#presenceFrame(client, packet, channelData),
      close: () => {
        client.presenceLive = false;
        this.#emit({ kind: 'presence', client: client.person.id });
      },
    });
  }

  #presenceFrame(client, packet, channelData) {
    if (packet.event === 'pubb:connection_established') {
      const socketId = JSON.parse(packet.data).socket_id;
      const auth = this.#call(APP, 'POST', `/api/apps/${APP.id}/auth`, {
        socket_id: socketId,
        channel_name: PRESENCE_CHANNEL,
        user_id: client.person.id,
        user_info: { name: client.person.name, kind: client.person.kind },
      });
      client.channels.send({
        action: 'subscribe',
        channel: PRESENCE_CHANNEL,
        auth: auth.body.auth,
        channel_data: auth.body.channel_data ?? channelData,
      });
      return;
    }
    if (packet.channel !== PRESENCE_CHANNEL) return;
    if (packet.event === 'pubb:subscription_succeeded') {
      const { ids, hash } = packet.data.presence;
      client.presence = new Map(ids.map((id) => [id, hash[id] ?? {}]));
      client.presenceLive = true;
    } else if (packet.event === 'pubb:member_added') {
      client.presence.set(packet.data.user_id, packet.data.user_info ?? {});
    } else if (packet.event === 'pubb:member_removed') {
      client.presence.delete(packet.data.user_id);
    }
    this.#emit({ kind: 'presence', client: client.person.id });
  }

  #closed(client, code) {
    client.threads.disconnected();
    client.closeReason = CLOSE_REASONS[code] ?? `closed (${code})`;
    if (client.channels?.open) client.channels.drop();
    this.#emit({ kind: 'status', client: client.person.id });
  }

  /** Drops both of the person's connections, as a network failure would. */
  drop(id) {
    const client = this.client(id);
    if (!client.socket?.open) return;
    client.socket.drop();
    client.closeReason = 'dropped';
    this.#emit({ kind: 'status', client: id });
  }

  /** Stops (or resumes) reading: frames queue up for this person meanwhile. */
  togglePause(id) {
    const client = this.client(id);
    for (const socket of [client.socket, client.channels]) {
      if (!socket?.open) continue;
      if (client.socket.paused) socket.resume();
      else socket.pause();
    }
    this.#emit({ kind: 'status', client: id });
  }

  /** Advances simulated time by `ms`, running the script's steps on the way. */
  advance(ms) {
    const end = this.clock.now + ms;
    while (this.clock.now < end) {
      const next = Math.min(end, this.#nextStepAt());
      this.clock.runUntil(next);
      if (next === this.#nextStepAt()) this.#step();
    }
    this.#emit({ kind: 'tick' });
  }

  /** Lets the runs in flight finish without starting new ones: a quiet moment. */
  settle() {
    const quiet = Math.max(this.clock.now, ...this.busy.values()) + 100;
    this.clock.runUntil(quiet);
    this.steps = Math.floor((this.clock.now - START) / STEP_MS);
    this.#emit({ kind: 'tick' });
  }

  #nextStepAt() {
    return START + (this.steps + 1) * STEP_MS;
  }

  #step() {
    this.steps += 1;
    const free = THREADS.filter((t) => (this.busy.get(t.id) ?? 0) <= this.clock.now);
    if (free.length === 0) return;
    const thread = this.rng.pick(free);
    const agents = [thread.owner, ...thread.members].filter((id) => AGENT_REPLIES[id]);
    const people = [thread.owner, ...thread.members].filter((id) => !AGENT_REPLIES[id]);
    const roll = this.rng.next();
    if (roll < 0.5) this.#say(this.rng.pick(people), thread, this.rng.pick(LINES[thread.id]), 1);
    else if (roll < 0.92 && agents.length) {
      const agent = this.rng.pick(agents);
      this.#say(agent, thread, this.rng.pick(AGENT_REPLIES[agent]), 2);
    }
    else if (thread.owner && this.rng.next() < 0.5) this.#rename(thread);
    else this.#say(this.rng.pick(people), thread, this.rng.pick(LINES[thread.id]), 1);
  }

  // A run: run_started, the AI SDK chunks of one text message (streamed in
  // `wordsPerDelta`-word deltas), run_finished — appended over the author's
  // own /v1/ws connection (or, while it is offline, not at all).
  #say(who, thread, text, wordsPerDelta) {
    const client = this.client(who);
    if (!client.socket?.open) return;
    const runId = `run-${this.steps}`;
    const words = text.match(/\S+\s*/g);
    const deltas = [];
    for (let i = 0; i < words.length; i += wordsPerDelta) deltas.push(words.slice(i, i + wordsPerDelta).join(''));
    const part = (p) => ({ type: 'message_part', runId, part: p, version: 'ai-sdk-v6' });
    const events = [
      { type: 'run_started', runId },
      part({ type: 'start', messageId: `msg-${this.steps}` }),
      part({ type: 'text-start', id: 'text-1' }),
      ...deltas.map((delta) => part({ type: 'text-delta', id: 'text-1', delta })),
      part({ type: 'text-end', id: 'text-1' }),
      part({ type: 'finish' }),
      { type: 'run_finished', runId, status: 'completed' },
    ];
    const gap = wordsPerDelta > 1 ? 90 : 15;
    events.forEach((event, i) =>
      this.clock.after(i * gap, () => client.socket.open && client.socket.send({ type: 'thread.append', threadId: thread.id, event })),
    );
    this.busy.set(thread.id, this.clock.now + events.length * gap + 50);
  }

  #rename(thread) {
    const titles = [thread.title, `${thread.title} (draft)`, `${thread.title} — this week`];
    const current = this.title(thread.id);
    const title = this.rng.pick(titles.filter((t) => t !== current));
    this.#call(thread.owner, 'PATCH', `/v1/threads/${thread.id}`, { title });
  }

  /** A short digest of everything stored: equal seeds give equal fingerprints. */
  fingerprint() {
    let h = 2166136261;
    for (const ch of JSON.stringify([...this.store.list()])) h = Math.imul(h ^ ch.charCodeAt(0), 16777619);
    return (h >>> 0).toString(16).padStart(8, '0');
  }
}

// The in-memory storage, answering `ms` simulated milliseconds later through
// the clock (reads and writes alike), so a run replays identically at any
// speed.
function onClock(storage, clock, ms) {
  const later = (fn) => ({
    then: (resolve, reject) =>
      clock.after(ms, () => {
        let value;
        try {
          value = fn();
        } catch (err) {
          reject(err);
          return;
        }
        resolve(value);
      }),
  });
  return {
    get: (key) => later(() => storage.get(key)),
    put: (keyOrEntries, value) => later(() => storage.put(keyOrEntries, value)),
    list: (options) => later(() => storage.list(options)),
  };
}

const CLOSE_REASONS = {
  1006: 'connection lost',
  1008: 'closed: policy',
  1013: 'closed: too slow to keep up',
  1001: 'server going away',
};
