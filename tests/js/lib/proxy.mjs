// A TCP proxy in front of a server, for tests that cut a client's
// connection: `cut()` kills every connection, `down` refuses new ones,
// `target` can point at a restarted server.

import { createServer, connect as tcpConnect } from 'node:net';

/** A TCP proxy to the current server: `cut()` kills every connection, `down` refuses new ones. */
export async function startProxy(target) {
  const pairs = new Set();
  const proxy = {
    target,
    down: false,
    cut() {
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      pairs.clear();
    },
  };
  const server = createServer((client) => {
    if (proxy.down) {
      client.destroy();
      return;
    }
    const upstream = tcpConnect(proxy.target.port, proxy.target.hostname);
    const pair = [client, upstream];
    pairs.add(pair);
    const close = () => {
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${server.address().port}`;
  proxy.close = () => {
    proxy.cut();
    return new Promise((resolve) => server.close(resolve));
  };
  return proxy;
}
