#!/usr/bin/env node
// A stand-in for an inference engine, for trying the node agent without GPUs
// (`llmgw dev --agents real`) and for its tests. It serves /health (503 while
// "loading", then 200), /drain and, like vLLM, the OpenAI API: POST
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
//   --record FILE          write {argv, env, pid} here at start
//   --model NAME           the model it serves (GET /v1/models; default "fake")
//   --replica ID, --shard ID  named in its answers (the agent's {replica_id}, {shard_id})
//   --delay-ms N           hold every OpenAI request N ms before answering (streams: N ms
//                          spread over their chunks), so that tests can keep requests in flight
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
if (record) {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => k === "CUDA_VISIBLE_DEVICES" || k.startsWith("FAKE_ENGINE_")),
  );
  writeFileSync(record, JSON.stringify({ argv: process.argv.slice(1), env, pid: process.pid }));
}
const model = flag("--model") ?? "fake";
const replica = flag("--replica") ?? "";
const shard = flag("--shard") ?? "";
const delayMs = Number(flag("--delay-ms") ?? 0);
let ready = false;
let draining = false;
let served = 0;
let closing = false;
const server = createServer((req, res) => {
  // Stopping: each connection ends with its answer.
  if (closing) res.setHeader("connection", "close");
  const path = (req.url ?? "/").split("?")[0];
  if (path === "/health") {
    res.writeHead(ready && !draining ? 200 : 503).end(ready ? "ok\n" : "loading\n");
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
    readBody(req).then((text) => answer(path, text, res));
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
    body = JSON.parse(text);
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
