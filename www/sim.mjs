// The offline simulation: bubble_core's deterministic simulator (the wasm
// `Simulation` class, docs/simulation.md) played step by step in the page.
// Two or three clustered engines share one store; /v1/ws and /socket
// clients connect to any of them, subscribe with a fromSeq, append, drop,
// reconnect and join presence, while the simulated host delays, reorders
// and fails reads and commits, plays a second writer, loses broker
// messages, stalls sockets, jumps time and crashes nodes. The simulator
// checks every invariant after every step; this module only renders what
// it reports, and checks whole seeds with it.

import { el } from './timeline.mjs';

/** Steps of one run (then the simulator's final settle and its checks). */
export const STEPS = 400;
/** Seeds the "Check seeds" button runs. */
export const CHECK_SEEDS = 200;
/** Steps per second while playing. */
const RATE = 25;
/** Steps the log keeps. */
const LOG = 60;
/** Seeds checked per task, so the page stays responsive. */
const PER_SLICE = 5;

const THREADS = ['t0', 't1', 't2'];
const AGENT = /agent/;

/** A seed from the seed field: a number as typed, any other text hashed (FNV-1a). */
export function parseSeed(text) {
  const trimmed = String(text ?? '').trim() || '42';
  if (/^\d{1,15}$/.test(trimmed)) return Number(trimmed);
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(trimmed)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** A short digest of a snapshot: equal runs show equal digests. */
function digest(snapshot) {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(JSON.stringify(snapshot))) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, '0');
}

const kindOf = (principal) => (AGENT.test(principal) ? 'agent' : 'person');
const avatar = (principal) => el('div', { class: 'avatar', 'data-kind': kindOf(principal) }, principal[0].toUpperCase());

export class SimulationView {
  /** `wasm`: the page's package; `$`: the page's element lookup. */
  constructor(wasm, $) {
    this.wasm = wasm;
    this.$ = $;
    this.sim = null;
    this.playing = false;
    this.log = [];
    this.steps = 0;
    this.budget = 0;
  }

  /** Starts seed `text`'s run from its first step. */
  restart(text) {
    this.seed = parseSeed(text);
    this.sim = new this.wasm.Simulation(this.seed, STEPS);
    this.log = [];
    this.steps = 0;
    this.render();
  }

  /** Runs `n` steps (fewer once the run is over). */
  advance(n) {
    for (let i = 0; i < n; i += 1) {
      const step = this.sim.step();
      if (step === undefined) break;
      this.log.push({ n: this.steps, step });
      this.steps += 1;
    }
    if (this.log.length > LOG) this.log.splice(0, this.log.length - LOG);
    if (this.sim.finished()) this.setPlaying(false);
    this.render();
  }

  /** Runs every step left, and the final settle. */
  finish() {
    this.advance(STEPS + 1);
  }

  /** Advances by `dt` milliseconds of play. */
  tick(dt) {
    if (!this.playing || !this.sim) return;
    this.budget += (dt * RATE) / 1000;
    const n = Math.floor(this.budget);
    if (n > 0) {
      this.budget -= n;
      this.advance(n);
    }
  }

  setPlaying(on) {
    this.playing = on && !this.sim?.finished();
    this.$('play').textContent = this.playing ? 'Pause' : 'Play';
  }

  render() {
    const view = JSON.parse(this.sim.snapshot());
    const { $ } = this;
    const status = $('sim-status');
    const finished = this.sim.finished();
    if (view.violation) {
      status.dataset.state = 'failed';
      status.textContent = `Invariant broken at step ${view.done}: ${view.violation}`;
    } else if (finished) {
      status.dataset.state = 'passed';
      status.textContent = `Seed ${view.seed}: ${view.total} steps and the final settle, every invariant held after every step.`;
    } else {
      status.dataset.state = 'running';
      status.textContent = `Seed ${view.seed}: step ${view.done} of ${view.total}, every invariant held so far.`;
    }
    $('clock').textContent = new Date(view.nowMs).toISOString().slice(11, 19);
    $('fingerprint').textContent = digest(view);
    $('nodes').textContent = `${view.nodes} engines over one store`;
    this.#threads(view);
    this.#clients(view);
    this.#channels(view);
    $('log').replaceChildren(
      ...this.log
        .slice()
        .reverse()
        .map(({ n, step }) => el('li', { value: String(n) }, el('code', {}, n < STEPS ? step : `${step} (the final settle and its checks)`))),
    );
  }

  #threads(view) {
    this.$('threads').replaceChildren(
      ...THREADS.map((id, i) => {
        const head = view.heads[i] ?? 0;
        const readers = view.ws.flatMap((c) =>
          c.subscriptions.filter(([t]) => t === id).map(([, next]) => ({ client: c, next })),
        );
        const rows = readers.map(({ client, next }) => {
          const have = next === null ? 0 : next - 1;
          const state = next === null ? 'opening' : client.stalled ? 'paused' : have >= head ? 'live' : 'opening';
          const label = next === null ? 'opening' : have >= head ? 'caught up' : `${head - have} behind`;
          const filled = next === null ? 0 : head ? Math.min(100, (100 * have) / head) : 100;
          const bar = el('span', { class: 'bar' }, el('span', { style: `width: ${filled}%` }));
          return el(
            'li',
            { 'data-slot': String(client.slot) },
            avatar(client.principal),
            el('span', { class: 'who' }, `${client.principal} · node ${client.node}`),
            bar,
            el('span', { class: 'state', 'data-state': state }, label),
          );
        });
        return el(
          'article',
          { class: 'thread', 'data-thread': id, 'data-head': String(head) },
          el('header', {}, el('div', { class: 'titles' }, el('h3', {}, id)), el('span', { class: 'range' }, `${head} durable events`)),
          rows.length ? el('ol', { class: 'readers' }, ...rows) : el('p', { class: 'panel-note' }, 'No subscriber.'),
        );
      }),
    );
  }

  #clients(view) {
    const cards = view.ws.map((c) =>
      el(
        'div',
        { class: 'client', 'data-slot': String(c.slot) },
        el('div', { class: 'who' }, avatar(c.principal), el('div', {}, el('b', {}, c.principal), el('small', {}, `/v1/ws on node ${c.node}`)),
          el('span', { class: 'state', 'data-state': c.stalled ? 'paused' : 'live' }, c.stalled ? 'not reading' : 'reading')),
        el('small', {}, c.subscriptions.length
          ? c.subscriptions.map(([t, next]) => (next === null ? `${t}: opening` : `${t}: next ${next}`)).join(' · ')
          : 'no subscription'),
      ),
    );
    this.$('clients').replaceChildren(...(cards.length ? cards : [el('p', { class: 'panel-note' }, 'Nobody is connected.')]));
  }

  #channels(view) {
    const joined = view.channels.filter((c) => c.members);
    const users = [...new Set(joined.map((c) => c.user))].sort();
    this.$('presence').replaceChildren(
      ...(users.length
        ? users.map((u) => el('li', { class: 'online', 'data-member': u }, avatar(u), el('span', {}, u), el('span', { class: 'dot' }, 'online')))
        : [el('li', { class: 'away' }, el('span', {}, 'nobody has joined'))]),
    );
    this.$('presence-note').textContent = joined.length
      ? `${joined.length} sockets joined; each one's view of the members: ${joined.map((c) => `[${c.members.join(', ')}]`).join(' ')}`
      : 'Sockets that join presence-room appear here.';
    const rows = view.channels.map((c) =>
      el('li', { 'data-slot': String(c.slot) }, avatar(c.user),
        el('span', {}, `${c.user} · node ${c.node} · ${c.channels.length ? c.channels.join(', ') : 'no public channel'} · ${c.received} received`)),
    );
    this.$('channel-clients').replaceChildren(...(rows.length ? rows : [el('li', { class: 'away' }, 'No /socket client.')]));
  }

  /** Checks CHECK_SEEDS seeds from the current one, a few per task. */
  checkSeeds() {
    const { $ } = this;
    const status = $('faults-status');
    const button = $('faults-run');
    const report = $('faults-report');
    const first = this.seed;
    let seed = first;
    button.disabled = true;
    report.hidden = true;
    status.dataset.state = 'running';
    const slice = () => {
      for (const until = Math.min(first + CHECK_SEEDS, seed + PER_SLICE); seed < until; seed += 1) {
        const failure = this.wasm.Simulation.check(seed, STEPS);
        if (failure) {
          status.dataset.state = 'failed';
          status.textContent = `seed ${seed} failed`;
          report.textContent = failure;
          report.hidden = false;
          button.disabled = false;
          return;
        }
      }
      const done = seed - first;
      if (done < CHECK_SEEDS) {
        status.textContent = `${done} of ${CHECK_SEEDS} seeds passed (from ${first})`;
        setTimeout(slice, 0);
        return;
      }
      status.dataset.state = 'passed';
      status.textContent = `${CHECK_SEEDS} seeds from ${first} (${CHECK_SEEDS * STEPS} steps) kept every invariant`;
      button.disabled = false;
    };
    setTimeout(slice, 0);
  }
}
