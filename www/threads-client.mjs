// The client side of /v1/ws, shared by the offline simulation and the live
// mode: it keeps each thread's events in seq order, resubscribes from the
// next unseen seq after a reconnect, and counts what a careful client must
// never see: missed seqs (gaps) and duplicates.

export class ThreadsClient {
  constructor() {
    /** threadId -> { events: event[], nextSeq, throughSeq, status, marks: [{beforeSeq, label}] } */
    this.threads = new Map();
    this.stats = { received: 0, missed: 0, duplicates: 0, reconnects: 0 };
    this.lastError = null;
    this.onChange = () => {};
  }

  /** Starts following `threadId` (subscribed on the next `subscribeFrames`). */
  follow(threadId) {
    if (!this.threads.has(threadId)) {
      this.threads.set(threadId, { events: [], nextSeq: 1, throughSeq: null, status: 'offline', marks: [] });
    }
  }

  /** The frames that (re)open every followed thread from its next unseen seq. */
  subscribeFrames() {
    return [...this.threads].map(([threadId, t]) => {
      t.status = 'opening';
      return { type: 'thread.subscribe', threadId, fromSeq: t.nextSeq };
    });
  }

  /** The connection is gone: every subscription with it. */
  disconnected() {
    for (const t of this.threads.values()) t.status = 'offline';
    this.onChange({ kind: 'status' });
  }

  /** A reconnect is starting: remember where each timeline resumes. */
  reconnecting(label) {
    this.stats.reconnects += 1;
    for (const t of this.threads.values()) t.marks.push({ beforeSeq: t.nextSeq, label: `${label} · resumed from #${t.nextSeq}` });
  }

  /** One server frame. */
  handle(frame) {
    const t = this.threads.get(frame.threadId);
    switch (frame.type) {
      case 'thread.subscription_opened':
        if (!t) return;
        t.status = 'live';
        t.throughSeq = frame.throughSeq;
        this.onChange({ kind: 'status', threadId: frame.threadId });
        return;
      case 'thread.event': {
        if (!t) return;
        const { seq } = frame.event;
        if (seq < t.nextSeq) {
          this.stats.duplicates += 1;
          this.onChange({ kind: 'stats' });
          return;
        }
        if (seq > t.nextSeq) this.stats.missed += seq - t.nextSeq;
        t.nextSeq = seq + 1;
        t.events.push(frame.event);
        this.stats.received += 1;
        this.onChange({ kind: 'event', threadId: frame.threadId, event: frame.event });
        return;
      }
      case 'thread.subscription_closed':
        if (t) t.status = `closed (${frame.reason})`;
        this.onChange({ kind: 'status', threadId: frame.threadId });
        return;
      case 'error':
        this.lastError = frame;
        this.onChange({ kind: 'error', error: frame });
        return;
      default:
    }
  }
}
