#!/usr/bin/env node
// A stand-in for an inference engine, for trying the node agent without GPUs
// (`llmgw dev --agents real`) and for its tests. It serves /health (503 while
// "loading", then 200), /drain, /metrics (vLLM's names, Prometheus text
// format) and requests under /v1/ (counted as running while they last), and takes:
//   --port N               where to listen (required)
//   --start-delay-ms N     time "loading weights" before /health answers 200
//   --crash-after-ms N     exit on its own N ms after becoming ready ...
//   --exit-code K          ... with this code (default 1)
//   --crash-once FILE      ... only when FILE does not exist yet (it is created): the
//                          first engine crashes, the one started to replace it runs
//   --ignore-sigterm       keep running on SIGTERM (only SIGKILL stops it)
//   --record FILE          write {argv, env, pid} here at start (env: all of it)
//   --waiting N            requests waiting, as /metrics says (default 0)
//   --kv-cache-use X       KV cache in use, 0 to 1, as /metrics says (default 0)
//   --request-ms N         how long a request under /v1/ takes (default 0)
//   --wedge-after-ms N     N ms after becoming ready, /health stops answering (the
//                          request hangs) while the process lives on ...
//   --recover-after-ms N   ... and answers again N ms after that
//   --wedge-once FILE      ... only when FILE does not exist yet (it is created)
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
let wedged = false;
let running = 0;
const waiting = Number(flag("--waiting") ?? 0);
const kvCacheUse = Number(flag("--kv-cache-use") ?? 0);
const requestMs = Number(flag("--request-ms") ?? 0);
const metrics = () =>
  [
    "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
    "# TYPE vllm:num_requests_waiting gauge",
    `vllm:num_requests_waiting{model_name="fake"} ${waiting}`,
    "# HELP vllm:num_requests_running Number of requests in model execution batches.",
    "# TYPE vllm:num_requests_running gauge",
    `vllm:num_requests_running{model_name="fake"} ${running}`,
    "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
    "# TYPE vllm:kv_cache_usage_perc gauge",
    `vllm:kv_cache_usage_perc{model_name="fake"} ${kvCacheUse}`,
    "",
  ].join("\n");
const server = createServer((req, res) => {
  if (req.url === "/health") {
    // Wedged: the process lives, its health never answers.
    if (wedged) return;
    res.writeHead(ready && !draining ? 200 : 503).end(ready ? "ok\n" : "loading\n");
  } else if (req.url === "/metrics") {
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(metrics());
  } else if (req.url?.startsWith("/v1/")) {
    running++;
    setTimeout(() => {
      running--;
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}\n');
    }, requestMs);
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
  const wedgeAfterMs = flag("--wedge-after-ms");
  const wedgeOnce = flag("--wedge-once");
  if (wedgeAfterMs !== undefined && (wedgeOnce === undefined || !existsSync(wedgeOnce))) {
    if (wedgeOnce !== undefined) writeFileSync(wedgeOnce, String(process.pid));
    setTimeout(() => {
      wedged = true;
      console.log("fake-engine: wedged (health no longer answers)");
      const recoverAfterMs = flag("--recover-after-ms");
      if (recoverAfterMs !== undefined)
        setTimeout(() => {
          wedged = false;
          console.log("fake-engine: recovered");
        }, Number(recoverAfterMs));
    }, Number(wedgeAfterMs));
  }
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
