// The playground page: loads the engine (wasm), runs the offline world and
// renders it; the live mode lives in live.mjs.

import init, * as wasm from './pkg/bubble_wasm.js';
import { mountFaultSimulator } from './faults.mjs';
import { startLive } from './live.mjs';
import { CAST, THREADS, World } from './sim/world.mjs';
import { el, Timeline } from './timeline.mjs';

const $ = (id) => document.getElementById(id);
const person = (id) => CAST.find((p) => p.id === id) ?? { id, name: id, kind: 'person' };

let world = null;
let viewer = 'alice';
let playing = false;
let lastFrame = 0;
const columns = new Map();
const cards = new Map();

function buildColumns() {
  const root = $('threads');
  root.replaceChildren();
  for (const t of THREADS) {
    const list = el('ol', { class: 'timeline' });
    const title = el('h3', {}, t.title);
    const status = el('span', { class: 'state' });
    const range = el('span', { class: 'range' });
    const parent = t.parent ? el('span', { class: 'parent' }, `↳ in ${THREADS.find((p) => p.id === t.parent).title}`) : '';
    const card = el('article', { class: 'thread', 'data-thread': t.id }, el('header', {}, el('div', { class: 'titles' }, title, parent), range, status), list);
    root.append(card);
    columns.set(t.id, { card, list, title, status, range, timeline: new Timeline(list, person) });
  }
}

function buildCards() {
  const root = $('clients');
  root.replaceChildren();
  for (const p of CAST) {
    const stat = (name) => el('span', { class: `stat ${name}` }, '0');
    const fields = { state: el('span', { class: 'state' }), received: stat('received'), missed: stat('missed'), duplicates: stat('duplicates'), sync: el('div', { class: 'sync' }) };
    const button = (act, label) => el('button', { class: 'small', 'data-act': act, 'data-client': p.id }, label);
    fields.pause = button('pause', 'Pause');
    const card = el(
      'div',
      { class: 'client', 'data-client': p.id },
      el('div', { class: 'who' }, el('div', { class: 'avatar', 'data-kind': p.kind }, p.name[0]), el('div', {}, el('b', {}, p.name), el('small', {}, p.role)), fields.state),
      el('div', { class: 'stats' },
        el('label', {}, fields.received, 'received'),
        el('label', {}, fields.missed, 'missed'),
        el('label', {}, fields.duplicates, 'duplicates')),
      fields.sync,
      el('div', { class: 'actions' }, fields.pause, button('drop', 'Drop'), button('reconnect', 'Reconnect')),
    );
    root.append(card);
    cards.set(p.id, fields);
  }
  root.onclick = (e) => {
    const b = e.target.closest('button[data-act]');
    if (!b || !world) return;
    const id = b.dataset.client;
    if (b.dataset.act === 'pause') world.togglePause(id);
    if (b.dataset.act === 'drop') world.drop(id);
    if (b.dataset.act === 'reconnect') world.connect(id);
    refresh();
  };
}

function renderViewer() {
  const client = world.client(viewer);
  for (const t of THREADS) {
    const col = columns.get(t.id);
    col.timeline.reset();
    const view = client.threads.threads.get(t.id);
    col.card.classList.toggle('hidden-thread', !view);
    if (!view) continue;
    for (const event of view.events) col.timeline.add(event, markFor(view, event.seq));
  }
  refresh();
}

function markFor(view, seq) {
  return view.marks.find((m) => m.beforeSeq === seq)?.label;
}

function onChange(change) {
  if (change.kind === 'reset') return renderViewer();
  if (change.kind === 'event' && change.client === viewer) {
    const view = world.client(viewer).threads.threads.get(change.threadId);
    const col = columns.get(change.threadId);
    col.timeline.add(change.event, markFor(view, change.event.seq));
    col.list.scrollTop = col.list.scrollHeight;
  }
  return undefined;
}

function clientState(client) {
  if (!client.socket?.open) return client.closeReason ?? 'offline';
  if (client.socket.paused) return `paused · ${client.socket.queued} waiting`;
  return 'connected';
}

function refresh() {
  if (!world) return;
  const me = world.client(viewer);
  for (const t of THREADS) {
    const col = columns.get(t.id);
    const view = me.threads.threads.get(t.id);
    const head = world.head(t.id);
    col.title.textContent = world.title(t.id) ?? t.title;
    col.card.dataset.head = String(head);
    if (!view) {
      col.status.textContent = `${me.person.name} is not in this thread`;
      col.status.dataset.state = 'none';
      col.range.textContent = '';
      continue;
    }
    const have = view.nextSeq - 1;
    col.range.textContent = have === head ? `${head} events` : `${have} of ${head} events`;
    col.status.textContent = view.status;
    col.status.dataset.state = view.status.split(' ')[0];
  }
  for (const c of world.clients) {
    const f = cards.get(c.person.id);
    const state = clientState(c);
    f.state.textContent = state;
    f.state.dataset.state = !c.socket?.open ? 'offline' : c.socket.paused ? 'paused' : 'live';
    f.received.textContent = c.threads.stats.received;
    f.missed.textContent = c.threads.stats.missed;
    f.duplicates.textContent = c.threads.stats.duplicates;
    f.missed.classList.toggle('bad', c.threads.stats.missed > 0);
    f.duplicates.classList.toggle('bad', c.threads.stats.duplicates > 0);
    const behind = [...c.threads.threads].reduce((n, [id, v]) => n + world.head(id) - (v.nextSeq - 1), 0);
    const n = c.threads.threads.size;
    f.sync.textContent = behind === 0 ? `✓ complete on ${n} thread${n === 1 ? '' : 's'}` : `${behind} events behind`;
    f.sync.dataset.state = behind === 0 ? 'ok' : 'behind';
    f.pause.textContent = c.socket?.paused ? 'Resume' : 'Pause';
  }
  renderPresence(me);
  $('clock').textContent = new Date(world.clock.now).toISOString().slice(11, 19);
  $('fingerprint').textContent = world.fingerprint();
}

function renderPresence(me) {
  $('presence-note').textContent = me.presenceLive
    ? `As seen by ${me.person.name}'s socket: ${me.presence.size} online`
    : `${me.person.name}'s socket is not subscribed; the list is rebuilt from a fresh snapshot on reconnect.`;
  $('presence').replaceChildren(
    ...CAST.map((p) => {
      const online = me.presenceLive && me.presence.has(p.id);
      return el('li', { class: online ? 'online' : 'away', 'data-member': p.id },
        el('div', { class: 'avatar', 'data-kind': p.kind }, p.name[0]),
        el('span', {}, p.name),
        p.kind === 'agent' ? el('span', { class: 'tag' }, 'agent') : '',
        el('span', { class: 'dot' }, online ? 'online' : 'away'));
    }),
  );
}

function restart() {
  const seed = $('seed').value.trim() || '42';
  world = new World(wasm, seed);
  world.subscribe(onChange);
  world.setup();
  renderViewer();
}

function frame(t) {
  if (playing && world) {
    const dt = Math.min(250, t - (lastFrame || t));
    world.advance(dt);
    refresh();
  }
  lastFrame = t;
  requestAnimationFrame(frame);
}

function setPlaying(on) {
  playing = on;
  $('play').textContent = on ? 'Pause' : 'Play';
}

function switchMode(mode) {
  for (const b of document.querySelectorAll('.modes button')) b.setAttribute('aria-selected', String(b.dataset.mode === mode));
  $('sim').hidden = mode !== 'sim';
  $('live').hidden = mode !== 'live';
  if (mode !== 'sim') setPlaying(false);
}

async function main() {
  await init();
  $('engine-state').textContent = 'engine: WebAssembly';
  $('engine-state').dataset.ready = 'true';
  buildColumns();
  buildCards();
  $('viewer').replaceChildren(...CAST.filter((p) => p.kind === 'person').map((p) => el('option', { value: p.id }, p.name)));
  $('viewer').onchange = (e) => {
    viewer = e.target.value;
    renderViewer();
  };
  $('restart').onclick = () => {
    setPlaying(false);
    restart();
  };
  $('seed').onkeydown = (e) => e.key === 'Enter' && $('restart').click();
  $('play').onclick = () => setPlaying(!playing);
  $('forward').onclick = () => {
    world.advance(30_000);
    world.settle();
    refresh();
  };
  for (const b of document.querySelectorAll('.modes button')) b.onclick = () => switchMode(b.dataset.mode);
  startLive();
  mountFaultSimulator(wasm, document.querySelector('#sim .side'), $('seed'));
  restart();
  setPlaying(true);
  document.body.dataset.ready = 'true';
  requestAnimationFrame(frame);
}

main().catch((err) => {
  $('engine-state').textContent = `engine failed to load: ${err.message}`;
  $('engine-state').dataset.ready = 'error';
  throw err;
});
