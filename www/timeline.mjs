// One thread's timeline as a reader sees it: system events as quiet lines,
// each run as a message bubble that fills in as its text-delta parts arrive.
// Every event is an element with data-seq, in seq order.

const fmtTime = (iso) => iso.slice(11, 19);

export class Timeline {
  /** `people(id)` -> {name, kind} for avatars and labels. */
  constructor(list, people) {
    this.list = list;
    this.people = people;
    this.reset();
  }

  reset() {
    this.list.replaceChildren();
    this.runs = new Map();
    this.count = 0;
  }

  /** Appends `event`; `mark` (optional) is a divider placed just before it. */
  add(event, mark) {
    if (mark) this.list.append(el('li', { class: 'resume' }, mark));
    this.count += 1;
    const seq = String(event.seq);
    switch (event.type) {
      case 'run_started':
        this.#bubble(event).body.append(el('span', { class: 'ev', 'data-seq': seq }));
        return;
      case 'message_part':
      case 'tool_call_approval':
      case 'run_finished': {
        const bubble = this.runs.get(event.runId) ?? this.#bubble(event);
        const span = el('span', { class: 'ev', 'data-seq': seq });
        if (event.type === 'message_part' && event.part?.type === 'text-delta') span.textContent = event.part.delta;
        bubble.body.append(span);
        bubble.last = event.seq;
        bubble.seqs.textContent = `#${bubble.first}–${bubble.last}`;
        if (event.type === 'run_finished') bubble.item.classList.add('done', event.status);
        return;
      }
      default:
        this.list.append(el('li', { class: 'sys', 'data-seq': seq }, this.#describe(event), el('span', { class: 'seq' }, `#${seq}`)));
    }
  }

  #bubble(event) {
    const who = this.people(event.principalId);
    const seqs = el('span', { class: 'seq' }, `#${event.seq}`);
    const body = el('p', { class: 'text' });
    const item = el(
      'li',
      { class: `msg ${who.kind}` },
      el('div', { class: 'avatar', 'data-kind': who.kind }, who.name[0].toUpperCase()),
      el(
        'div',
        { class: 'bubble' },
        el('div', { class: 'meta' }, el('b', {}, who.name), who.kind === 'agent' ? el('span', { class: 'tag' }, 'agent') : '', el('time', {}, fmtTime(event.createdAt)), seqs),
        body,
      ),
    );
    this.list.append(item);
    const bubble = { item, body, seqs, first: event.seq, last: event.seq };
    this.runs.set(event.runId, bubble);
    return bubble;
  }

  #describe(event) {
    const name = (id) => this.people(id).name;
    switch (event.type) {
      case 'participant_joined':
        return `${name(event.principalId)} joined as ${event.role.replace('_', ' ')}`;
      case 'participant_left':
        return `${name(event.principalId)} left`;
      case 'thread_title_updated':
        return event.title === null ? `${name(event.byPrincipalId)} cleared the title` : `${name(event.byPrincipalId)} renamed the thread to “${event.title}”`;
      default:
        return event.type;
    }
  }
}

/** A small element builder. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const child of children) if (child !== '' && child !== null && child !== undefined) node.append(child);
  return node;
}
