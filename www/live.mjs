// Live mode: the same timeline and the same resume logic, over a real
// WebSocket to a running server.

import { ThreadsClient } from './threads-client.mjs';
import { Timeline } from './timeline.mjs';

const $ = (id) => document.getElementById(id);

export function startLive() {
  $('live-url').value = location.protocol.startsWith('http') ? location.origin : 'http://127.0.0.1:3000';
  let socket = null;
  let client = null;
  let timeline = null;
  let settings = null;
  let runs = 0;

  const setState = (state, text = state) => {
    $('live-state').dataset.state = state;
    $('live-state').textContent = text;
    const open = state === 'live';
    $('live-drop').disabled = !open;
    $('live-reconnect').disabled = open || !client;
    $('live-text').disabled = !open;
    $('live-compose').querySelector('button').disabled = !open;
  };

  const showStats = () => {
    const s = client.stats;
    $('live-stats').textContent = `${s.received} received · ${s.missed} missed · ${s.duplicates} duplicates`;
  };

  const open = () => {
    const wsUrl = new URL('/v1/ws', settings.url.replace(/^http/, 'ws'));
    wsUrl.searchParams.set('access_token', settings.token);
    socket = new WebSocket(wsUrl);
    setState('connecting');
    socket.onopen = () => {
      setState('live');
      for (const frame of client.subscribeFrames()) socket.send(JSON.stringify(frame));
    };
    socket.onmessage = (msg) => client.handle(JSON.parse(msg.data));
    socket.onclose = (e) => {
      client.disconnected();
      setState('offline', `offline (${e.code})`);
    };
  };

  $('live-form').onsubmit = async (e) => {
    e.preventDefault();
    socket?.close();
    settings = { url: $('live-url').value.trim(), token: $('live-token').value.trim(), thread: $('live-thread').value.trim() };
    client = new ThreadsClient();
    client.follow(settings.thread);
    timeline = new Timeline($('live-timeline'), (id) => ({ name: id, kind: /bot|agent/.test(id) ? 'agent' : 'person' }));
    client.onChange = (change) => {
      if (change.kind === 'event') {
        const view = client.threads.get(settings.thread);
        timeline.add(change.event, view.marks.find((m) => m.beforeSeq === change.event.seq)?.label);
        $('live-timeline').scrollTop = $('live-timeline').scrollHeight;
      }
      if (change.kind === 'error') $('live-state').title = `${change.error.code}: ${change.error.message}`;
      showStats();
    };
    $('live-title').textContent = settings.thread;
    try {
      await fetch(new URL('/v1/threads', settings.url), {
        method: 'POST',
        headers: { authorization: `Bearer ${settings.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ threadId: settings.thread }),
      });
    } catch {
      // Another origin without CORS: subscribing still works if the thread exists.
    }
    open();
    showStats();
  };

  $('live-drop').onclick = () => socket?.close(4000, 'dropped from the page');
  $('live-reconnect').onclick = () => {
    client.reconnecting('reconnected');
    open();
  };

  $('live-compose').onsubmit = (e) => {
    e.preventDefault();
    const text = $('live-text').value.trim();
    if (!text || socket?.readyState !== WebSocket.OPEN) return;
    runs += 1;
    const runId = `web-${Date.now().toString(36)}-${runs}`;
    const part = (p) => ({ type: 'message_part', runId, part: p, version: 'ai-sdk-v6' });
    const events = [
      { type: 'run_started', runId },
      part({ type: 'start' }),
      part({ type: 'text-start', id: 'text-1' }),
      part({ type: 'text-delta', id: 'text-1', delta: text }),
      part({ type: 'text-end', id: 'text-1' }),
      part({ type: 'finish' }),
      { type: 'run_finished', runId, status: 'completed' },
    ];
    for (const event of events) socket.send(JSON.stringify({ type: 'thread.append', threadId: settings.thread, event }));
    $('live-text').value = '';
  };
  setState('offline');
}
