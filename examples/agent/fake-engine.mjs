#!/usr/bin/env node
// A stand-in for an inference engine, for trying the node agent without GPUs
// (`llmgw dev --agents real`) and for its tests. It serves /health (503 while
// "loading", then 200) and /drain, and takes:
//   --port N               where to listen (required)
//   --start-delay-ms N     time "loading weights" before /health answers 200
//   --crash-after-ms N     exit on its own N ms after becoming ready ...
//   --exit-code K          ... with this code (default 1)
//   --crash-once FILE      ... only when FILE does not exist yet (it is created): the
//                          first engine crashes, the one started to replace it runs
//   --ignore-sigterm       keep running on SIGTERM (only SIGKILL stops it)
//   --record FILE          write {argv, env, pid} here at start (env: all of it)
//   --port-taken-once FILE the first engine (FILE does not exist yet; it is created)
//                          finds its port taken, as when another program binds it
//                          between the agent's check and the engine's bind: it dies
//                          with EADDRINUSE
import { existsSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";

const args = process.argv.slice(2);
const flag = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const port = Number(flag("--port"));
if (!Number.isInteger(port) || port <= 0) {
  console.error("fake-engine: --port N is required");
  process.exit(2);
}
const startDelayMs = Number(flag("--start-delay-ms") ?? 0);
const crashAfterMs = flag("--crash-after-ms");
const exitCode = Number(flag("--exit-code") ?? 1);
const record = flag("--record");
const crashOnce = flag("--crash-once");
if (record)
  writeFileSync(record, JSON.stringify({ argv: process.argv.slice(1), env: process.env, pid: process.pid }));
const portTakenOnce = flag("--port-taken-once");
if (portTakenOnce !== undefined && !existsSync(portTakenOnce)) {
  writeFileSync(portTakenOnce, String(process.pid));
  // Held (and never closed) before the real listen below: that one fails as a real bind would.
  createServer().listen(port, "0.0.0.0");
}
let ready = false;
let draining = false;
const server = createServer((req, res) => {
  if (req.url === "/health") {
    res.writeHead(ready && !draining ? 200 : 503).end(ready ? "ok\n" : "loading\n");
  } else if (req.url === "/drain") {
    draining = true;
    console.log("fake-engine: draining");
    res.writeHead(200).end("draining\n");
  } else res.writeHead(404).end();
});
server.listen(port, "0.0.0.0", () => console.log(`fake-engine: loading on port ${port}`));
setTimeout(() => {
  ready = true;
  console.log("fake-engine: ready");
  const crash = crashOnce === undefined || !existsSync(crashOnce);
  if (crashAfterMs !== undefined && crash) {
    if (crashOnce !== undefined) writeFileSync(crashOnce, String(process.pid));
    setTimeout(() => {
      console.log(`fake-engine: CUDA error: an illegal memory access was encountered (exiting ${exitCode})`);
      process.exit(exitCode);
    }, Number(crashAfterMs));
  }
}, startDelayMs);
process.on("SIGTERM", () => {
  if (args.includes("--ignore-sigterm")) {
    console.log("fake-engine: ignoring SIGTERM");
    return;
  }
  console.log("fake-engine: SIGTERM, exiting");
  process.exit(0);
});
