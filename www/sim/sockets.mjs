// In-page WebSockets between a simulated client and the in-page host, on
// simulated time. A paused client stops reading: frames wait in its inbox,
// it answers no Ping, and the host sees its queue grow (and may close it as
// a slow consumer). A dropped connection vanishes without a close frame.

const LATENCY_MS = 4;

/**
 * Opens a socket of `kind` ('threads' | 'channels') and returns its client
 * end. `handlers.frame(obj)` gets each server frame, `handlers.close(code)`
 * the end of the connection. The upgrade request goes through the host's
 * edge like a browser's would: `/v1/ws?access_token=…` or
 * `/socket?appKey=…&protocol=2`.
 */
export function openSocket(clock, host, kind, options, handlers) {
  const state = { open: true, paused: false, inbox: [], waiters: [] };
  let conn = null;

  const finish = (code) => {
    if (!state.open) return;
    state.open = false;
    state.inbox = [];
    conn.closed();
    handlers.close(code);
  };
  const deliver = (text) => {
    if (!state.open) return;
    if (state.paused) state.inbox.push(text);
    else handlers.frame(JSON.parse(text));
  };

  const serverEnd = {
    send: (text) => clock.after(LATENCY_MS, () => deliver(text)),
    ping: () =>
      clock.after(LATENCY_MS, () => {
        if (state.open && !state.paused) conn.pong();
      }),
    // No code: the host drops the connection, which the client sees as 1006.
    close: (code) => clock.after(LATENCY_MS, () => finish(code ?? 1006)),
    queued: () => state.inbox.length,
    flushed: (callback) => (state.paused ? state.waiters.push(callback) : clock.after(LATENCY_MS, callback)),
  };
  const [path, query] =
    kind === 'threads'
      ? ['/v1/ws', { access_token: options.token }]
      : ['/socket', { appKey: options.appKey, protocol: '2' }];
  const route = host.route({ method: 'GET', path, query: new URLSearchParams(query).toString(), headers: { upgrade: 'websocket' } });
  const upgrade = host.upgrade(route);
  if (!upgrade?.open) throw new Error(`the in-page host refused ${path}: ${upgrade?.refused?.body ?? route.kind}`);
  conn = upgrade.open(serverEnd);

  return {
    get open() {
      return state.open;
    },
    get paused() {
      return state.paused;
    },
    get queued() {
      return state.inbox.length;
    },
    send(frame) {
      const text = JSON.stringify(frame);
      clock.after(LATENCY_MS, () => state.open && conn.text(text));
    },
    drop() {
      finish(1006);
    },
    pause() {
      state.paused = true;
    },
    resume() {
      state.paused = false;
      for (const text of state.inbox.splice(0)) deliver(text);
      for (const callback of state.waiters.splice(0)) clock.after(LATENCY_MS, callback);
    },
  };
}
