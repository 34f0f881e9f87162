// Runs @fluent-org/logger's FluentServer for fluentcore's interop tests.
//
// Usage: node server.js '<json config>'
//
//   {
//     "security": {"serverHostname": "...", "sharedKey": "...",
//                  "authorize": false, "userDict": {"user": "password"}},   // optional
//     "tls": {"certFile": "...", "keyFile": "...",
//             "minVersion": "TLSv1.2", "maxVersion": "TLSv1.3"}           // optional
//   }
//
// It listens on 127.0.0.1 at a port the kernel picks and prints JSON lines on stdout:
//
//   {"listening":"127.0.0.1:PORT"}                  once, when ready
//   {"tag":"...","time":T,"record":{...}}           per entry received
//
// T is {"sec":S,"nsec":N} for an EventTime and a number for an integer time. In records,
// msgpack bin values are printed as {"$bin":"<base64>"} and 64-bit integers that
// @msgpack/msgpack decodes as BigInt as {"$bigint":"<decimal>"}; everything else is the
// JSON of what the server decoded. Connection-level errors the server reports go to stderr.
//
// It exits when stdin reaches EOF, so it never outlives the test that started it.
"use strict";

const fs = require("fs");
const {FluentServer, EventTime} = require("@fluent-org/logger");

const config = JSON.parse(process.argv[2] || "{}");

const options = {listenOptions: {host: "127.0.0.1", port: 0}};
if (config.security) {
  options.security = {
    serverHostname: config.security.serverHostname,
    sharedKey: config.security.sharedKey,
    authorize: !!config.security.authorize,
    userDict: config.security.userDict || {},
  };
}
if (config.tls) {
  options.tlsOptions = {
    cert: fs.readFileSync(config.tls.certFile),
    key: fs.readFileSync(config.tls.keyFile),
  };
  if (config.tls.minVersion) options.tlsOptions.minVersion = config.tls.minVersion;
  if (config.tls.maxVersion) options.tlsOptions.maxVersion = config.tls.maxVersion;
}

// toJSON turns what the server decoded into plain JSON, keeping bin and times apart.
function toJSON(v) {
  if (v instanceof EventTime) return {sec: v.epoch, nsec: v.nano};
  if (v instanceof Uint8Array) return {$bin: Buffer.from(v).toString("base64")};
  if (typeof v === "bigint") return {$bigint: v.toString()};
  if (Array.isArray(v)) return v.map(toJSON);
  if (v !== null && typeof v === "object") {
    const out = {};
    for (const [k, e] of Object.entries(v)) out[k] = toJSON(e);
    return out;
  }
  return v;
}

function print(obj) {
  // Stdout is a pipe: on Linux, Node writes pipes synchronously, so a line is out before
  // the next entry (or the process exit) is handled.
  process.stdout.write(JSON.stringify(obj) + "\n");
}

const server = new FluentServer(options);
server.on("entry", (tag, time, record) => {
  print({tag, time: toJSON(time), record: toJSON(record)});
});

// FluentServer keeps its net/tls server private; reach it only to report TLS failures,
// which it would otherwise swallow.
if (server.server && typeof server.server.on === "function") {
  server.server.on("tlsClientError", err => {
    process.stderr.write(`tls client error: ${err.message}\n`);
  });
}

server.listen().then(() => {
  print({listening: `127.0.0.1:${server.port}`});
});

process.stdin.on("data", () => {});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
