// A small Node host for the worker module: node:http for requests (turned
// into standard Request/Response and handed to the same `fetch`) and the
// `ws` package for the two WebSocket endpoints. Pass ws's WebSocketServer in,
// so this file needs no dependency of its own:
//
//   import { WebSocketServer } from 'ws';
//   import { createBubble } from './index.mjs';
//   import { listen } from './node.mjs';
//   const bubble = await createBubble({ config });
//   const { url } = await listen(bubble, { WebSocketServer, port: 3000 });

import { createServer } from 'node:http';

import { bearerToken } from './host.mjs';

/** Serves `bubble` on `hostname:port` (port 0: ephemeral); resolves to {server, url, close}. */
export async function listen(bubble, { WebSocketServer, hostname = '127.0.0.1', port = 0 }) {
  const { host } = bubble;
  // The engine decides oversized frames (close 1009); ws only bounds memory.
  const maxPayload = 2 * Math.max(host.limits.max_ws_frame_bytes, host.limits.max_channel_message_bytes);
  const wss = new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false });

  const server = createServer((req, res) => {
    serveHttp(bubble, req, res).catch((err) => {
      console.error('bubble:', err);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('Internal error.');
    });
  });

  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url, 'http://localhost');
    let open;
    if (url.pathname === host.wsPath) {
      const token = bearerToken(req.headers.authorization) ?? url.searchParams.get('access_token');
      open = (ws) => host.openThreads(ws, token);
    } else if (url.pathname === '/socket') {
      const appKey = url.searchParams.get('appKey');
      const refusal = host.channelHandshake(appKey);
      if (refusal) {
        refuseUpgrade(socket, refusal);
        return;
      }
      open = (ws) => host.openChannels(ws, appKey, url.searchParams.get('protocol') === '2');
    } else {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => attach(ws, open));
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

async function serveHttp(bubble, req, res) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = Buffer.concat(chunks);
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD' && body.length > 0;
  const request = new Request(new URL(req.url, `http://${req.headers.host ?? 'localhost'}`), {
    method: req.method,
    headers,
    body: hasBody ? body : undefined,
  });
  const response = await bubble.fetch(request);
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
}

async function refuseUpgrade(socket, response) {
  const body = Buffer.from(await response.arrayBuffer());
  const head = [`HTTP/1.1 ${response.status} ${response.statusText || 'Error'}`];
  for (const [name, value] of response.headers) head.push(`${name}: ${value}`);
  head.push(`Content-Length: ${body.length}`, 'Connection: close', '', '');
  socket.end(Buffer.concat([Buffer.from(head.join('\r\n')), body]));
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
