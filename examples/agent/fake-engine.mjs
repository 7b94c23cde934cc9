#!/usr/bin/env node
// A stand-in for an inference engine, for trying the node agent without GPUs
// (`llmgw dev --agents real`) and for its tests. It serves /health (503 while
// "loading", then 200), /drain, /metrics (vLLM's names, Prometheus text
// format) and, like vLLM, the OpenAI API: POST
// /v1/chat/completions, /v1/completions (a text naming the replica, shard and
// port; `"stream": true` answers server-sent events, a few chunks ending with
// `data: [DONE]`), /v1/embeddings and GET /v1/models. On SIGTERM it stops
// taking connections, finishes the requests it holds, then exits. It takes:
//   --port N               where to listen (required)
//   --start-delay-ms N     time "loading weights" before /health answers 200
//   --crash-after-ms N     exit on its own N ms after becoming ready ...
//   --exit-code K          ... with this code (default 1)
//   --crash-once FILE      ... only when FILE does not exist yet (it is created): the
//                          first engine crashes, the one started to replace it runs
//   --ignore-sigterm       keep running on SIGTERM (only SIGKILL stops it)
//   --record FILE          write {argv, env, pid} here at start (env: all of it)
//   --model NAME           the model it serves (GET /v1/models; default "fake")
//   --replica ID, --shard ID  named in its answers (the agent's {replica_id}, {shard_id})
//   --delay-ms N           hold every OpenAI request N ms before answering (streams: N ms
//                          spread over their chunks), so that tests can keep requests in flight
//   --request-ms N         the same as --delay-ms
//   --waiting N            requests waiting, as /metrics says (default 0); the requests
//                          being answered are its vllm:num_requests_running
//   --kv-cache-use X       KV cache in use, 0 to 1, as /metrics says (default 0)
//   --wedge-after-ms N     N ms after becoming ready, /health stops answering (the
//                          request hangs) while the process lives on ...
//   --recover-after-ms N   ... and answers again N ms after that
//   --wedge-once FILE      ... only when FILE does not exist yet (it is created)
//   --port-taken-once FILE the first engine (FILE does not exist yet; it is created)
//                          finds its port taken, as when another program binds it
//                          between the agent's check and the engine's bind: it dies
//                          with EADDRINUSE
//   --chatter-ms N         once ready, print a numbered line every N ms ("fake-engine: step 1 …"),
//   --chatter-bytes B      ... each about B bytes long (default 100): a chatty engine for log rotation
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
const model = flag("--model") ?? "fake";
const replica = flag("--replica") ?? "";
const shard = flag("--shard") ?? "";
const delayMs = Number(flag("--delay-ms") ?? flag("--request-ms") ?? 0);
let ready = false;
let draining = false;
let served = 0;
let closing = false;
let wedged = false;
let running = 0;
const waiting = Number(flag("--waiting") ?? 0);
const kvCacheUse = Number(flag("--kv-cache-use") ?? 0);
const metrics = () =>
  [
    "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
    "# TYPE vllm:num_requests_waiting gauge",
    `vllm:num_requests_waiting{model_name="${model}"} ${waiting}`,
    "# HELP vllm:num_requests_running Number of requests in model execution batches.",
    "# TYPE vllm:num_requests_running gauge",
    `vllm:num_requests_running{model_name="${model}"} ${running}`,
    "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
    "# TYPE vllm:kv_cache_usage_perc gauge",
    `vllm:kv_cache_usage_perc{model_name="${model}"} ${kvCacheUse}`,
    "",
  ].join("\n");
const server = createServer((req, res) => {
  // Stopping: each connection ends with its answer.
  if (closing) res.setHeader("connection", "close");
  const path = (req.url ?? "/").split("?")[0];
  if (path === "/health") {
    // Wedged: the process lives, its health never answers.
    if (wedged) return;
    res.writeHead(ready && !draining ? 200 : 503).end(ready ? "ok\n" : "loading\n");
  } else if (path === "/metrics") {
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(metrics());
  } else if (path === "/drain") {
    draining = true;
    console.log("fake-engine: draining");
    res.writeHead(200).end("draining\n");
  } else if (path === "/v1/models" && req.method === "GET") {
    json(res, 200, {
      object: "list",
      data: [{ id: model, object: "model", created: 0, owned_by: "fake-engine" }],
    });
  } else if (
    req.method === "POST" &&
    (path === "/v1/chat/completions" || path === "/v1/completions" || path === "/v1/embeddings")
  ) {
    running++;
    readBody(req)
      .then((text) => answer(path, text, res))
      .finally(() => running--);
  } else json(res, 404, apiError(`no route ${req.method} ${path}`));
});

function json(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function apiError(message) {
  return { error: { message, type: "invalid_request_error", param: null, code: null } };
}

function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", () => resolve(""));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function answer(path, text, res) {
  let body;
  try {
    // No body: no parameters.
    body = text === "" ? {} : JSON.parse(text);
  } catch {
    return json(res, 400, apiError("the body is not valid JSON"));
  }
  if (!ready) return json(res, 503, apiError("the engine is loading"));
  const n = ++served;
  const who = `replica ${replica || "?"} shard ${shard || "?"} port ${port}`;
  const created = Math.floor(Date.now() / 1000);
  const id = `fake-${process.pid}-${n}`;
  if (path === "/v1/embeddings") {
    await sleep(delayMs);
    const inputs = Array.isArray(body.input) ? body.input : [body.input ?? ""];
    return json(res, 200, {
      object: "list",
      model: body.model ?? model,
      data: inputs.map((x, i) => ({ object: "embedding", index: i, embedding: [String(x).length, port, n] })),
      usage: { prompt_tokens: inputs.length, total_tokens: inputs.length },
      replica,
    });
  }
  const chat = path === "/v1/chat/completions";
  const words = `Hello from ${who} (request ${n}).`.split(" ");
  if (body.stream === true) {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const object = chat ? "chat.completion.chunk" : "text_completion";
    for (const [i, w] of words.entries()) {
      const piece = i === 0 ? w : ` ${w}`;
      const choice = chat
        ? {
            index: 0,
            delta: i === 0 ? { role: "assistant", content: piece } : { content: piece },
            finish_reason: null,
          }
        : { index: 0, text: piece, finish_reason: null };
      res.write(
        `data: ${JSON.stringify({ id, object, created, model: body.model ?? model, choices: [choice] })}\n\n`,
      );
      await sleep(delayMs / words.length);
    }
    const last = chat
      ? { index: 0, delta: {}, finish_reason: "stop" }
      : { index: 0, text: "", finish_reason: "stop" };
    res.write(
      `data: ${JSON.stringify({ id, object, created, model: body.model ?? model, choices: [last] })}\n\n`,
    );
    res.end("data: [DONE]\n\n");
    return;
  }
  await sleep(delayMs);
  const content = words.join(" ");
  json(res, 200, {
    id,
    object: chat ? "chat.completion" : "text_completion",
    created,
    model: body.model ?? model,
    choices: [
      chat
        ? { index: 0, message: { role: "assistant", content }, finish_reason: "stop" }
        : { index: 0, text: content, finish_reason: "stop" },
    ],
    usage: { prompt_tokens: 1, completion_tokens: words.length, total_tokens: words.length + 1 },
  });
}
server.listen(port, "0.0.0.0", () => console.log(`fake-engine: loading on port ${port}`));
setTimeout(() => {
  ready = true;
  console.log("fake-engine: ready");
  const chatterMs = flag("--chatter-ms");
  if (chatterMs !== undefined) {
    const bytes = Number(flag("--chatter-bytes") ?? 100);
    let step = 0;
    setInterval(() => {
      const line = `fake-engine: step ${++step} `;
      process.stdout.write(`${line.padEnd(Math.max(line.length, bytes - 1), "x")}\n`);
    }, Number(chatterMs));
  }
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
  console.log("fake-engine: SIGTERM, finishing the requests it holds, then exiting");
  // No new connection; the requests in flight finish; idle keep-alive connections close.
  closing = true;
  server.close(() => process.exit(0));
  server.closeIdleConnections();
  setTimeout(() => process.exit(0), 30_000).unref();
});
