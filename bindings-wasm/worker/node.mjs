// A small Node host for the worker module: node:http for requests and the
// `ws` package for the two WebSocket endpoints; each request is routed by
// the core's edge (through the host) from its raw path and query. Pass ws's
// WebSocketServer in, so this file needs no dependency of its own:
//
//   import { WebSocketServer } from 'ws';
//   import { createBubble } from './index.mjs';
//   import { listen } from './node.mjs';
//   const bubble = await createBubble({ config });
//   const { url } = await listen(bubble, { WebSocketServer, port: 3000 });

import { STATUS_CODES, createServer } from 'node:http';

import { answerParts } from './host.mjs';

/** Serves `bubble` on `hostname:port` (port 0: ephemeral); resolves to {server, url, close}. */
export async function listen(bubble, { WebSocketServer, hostname = '127.0.0.1', port = 0 }) {
  const { host } = bubble;
  // The engine decides oversized frames (close 1009); ws only bounds memory.
  const maxPayload = 2 * Math.max(host.limits.max_ws_frame_bytes, host.limits.max_channel_message_bytes);
  const wss = new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false });

  const server = createServer((req, res) => {
    serveHttp(host, req, res).catch((err) => {
      console.error('bubble:', err);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('Internal error.');
    });
  });

  server.on('upgrade', (req, socket, head) => {
    const parts = requestParts(req);
    const route = host.route(parts);
    const upgrade = host.upgrade(route);
    if (upgrade?.refused) {
      writeRaw(socket, upgrade.refused);
    } else if (upgrade) {
      wss.handleUpgrade(req, socket, head, (ws) => attach(ws, upgrade.open));
    } else {
      // Not a socket endpoint: answered as the plain request it also is.
      Promise.resolve(host.answer(route, { ...parts, body: new Uint8Array() })).then(
        (answer) => writeRaw(socket, answer),
        () => socket.destroy(),
      );
    }
  });

  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, hostname, resolve);
  });
  const address = server.address();
  return {
    server,
    url: `http://${address.address}:${address.port}`,
    close: () =>
      new Promise((resolve) => {
        host.shutdown();
        for (const ws of wss.clients) ws.terminate();
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

// The method, raw path and raw query of a request as it arrived, and its
// headers: the core's edge reads them, so no URL parser rewrites the path
// first (an absolute-form target is the only one parsed here).
function requestParts(req) {
  let target = req.url ?? '';
  if (!target.startsWith('/')) {
    try {
      const url = new URL(target);
      target = url.pathname + url.search;
    } catch {
      // `*` and the like: left as they are for the edge to refuse.
    }
  }
  const mark = target.indexOf('?');
  return {
    method: req.method,
    path: mark < 0 ? target : target.slice(0, mark),
    query: mark < 0 ? '' : target.slice(mark + 1),
    headers: req.headers,
  };
}

async function serveHttp(host, req, res) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const parts = requestParts(req);
  const answer = await host.answer(host.route(parts), { ...parts, body: new Uint8Array(Buffer.concat(chunks)) });
  const { status, headers, body } = answerParts(answer);
  res.writeHead(status, headers);
  res.end(body ?? undefined);
}

// Answers on a raw socket (an upgrade request that is not upgraded).
function writeRaw(socket, answer) {
  const { status, headers, body } = answerParts(answer);
  const bytes = Buffer.from(body ?? '');
  const head = [`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`];
  for (const [name, value] of Object.entries(headers)) head.push(`${name}: ${value}`);
  head.push(`Content-Length: ${bytes.length}`, 'Connection: close', '', '');
  socket.end(Buffer.concat([Buffer.from(head.join('\r\n')), bytes]));
}

// Wires one ws socket to the host: frames in, sends out, with a count of
// frames not yet written so the host can spot a slow reader.
function attach(ws, open) {
  let queued = 0;
  let waiting = [];
  const written = () => {
    queued -= 1;
    if (queued === 0) for (const callback of waiting.splice(0)) callback();
  };
  const conn = open({
    send: (text) => {
      queued += 1;
      ws.send(text, written);
    },
    ping: () => ws.ping(),
    close: (code) => (code === undefined ? ws.terminate() : ws.close(code)),
    queued: () => queued,
    flushed: (callback) => (queued === 0 ? callback() : waiting.push(callback)),
  });
  ws.on('message', (data, isBinary) => (isBinary ? conn.binary(new Uint8Array(data)) : conn.text(data.toString())));
  ws.on('pong', () => conn.pong());
  ws.on('close', () => {
    waiting = [];
    conn.closed();
  });
  ws.on('error', () => ws.terminate());
}
