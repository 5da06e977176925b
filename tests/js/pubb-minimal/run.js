// Runs the pubb seed's "minimal browser example" (example.js, verbatim)
// under Node: the `ws` package provides the global WebSocket and the
// example's URL is pointed at the server given as the first argument,
// e.g. `node run.js ws://127.0.0.1:3000/socket`.
"use strict";

const fs = require("fs");
const path = require("path");
const vm = require("vm");

const serverUrl = process.argv[2];
if (!serverUrl) {
  console.error("usage: node run.js ws://HOST:PORT/socket");
  process.exit(2);
}

globalThis.WebSocket = require("ws");

const example = fs.readFileSync(path.join(__dirname, "example.js"), "utf8");
const seedUrl = '"wss://ws.pubb.io/socket"';
if (!example.includes(seedUrl)) {
  console.error("example.js no longer contains the seed's URL");
  process.exit(2);
}
vm.runInThisContext(example.replace(seedUrl, JSON.stringify(serverUrl)), {
  filename: "example.js",
});
