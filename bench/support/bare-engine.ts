/**
 * The engine of the router scenario, and its raw reference: a bare
 * node:http server answering every POST with the same small chat completion
 * (the body the fake engine answers), or, for `"stream": true`, server-sent
 * events: STREAM_CHUNKS chunks STREAM_GAP_MS apart, then `data: [DONE]`.
 * Prints `listening <port>` once it listens.
 */
import { createServer } from "node:http";

const port = Number(process.argv[2] ?? 0);
const chunks = Number(process.env["STREAM_CHUNKS"] ?? 20);
const gapMs = Number(process.env["STREAM_GAP_MS"] ?? 100);
const ANSWER = JSON.stringify({
  id: "bench-1",
  object: "chat.completion",
  created: 0,
  model: "bench",
  choices: [
    {
      index: 0,
      message: { role: "assistant", content: "Hello from the bench engine." },
      finish_reason: "stop",
    },
  ],
  usage: { prompt_tokens: 1, completion_tokens: 6, total_tokens: 7 },
});

const server = createServer((req, res) => {
  const body: Buffer[] = [];
  req.on("data", (c: Buffer) => body.push(c));
  req.on("end", () => {
    if (!Buffer.concat(body).includes('"stream":true')) {
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(ANSWER) });
      res.end(ANSWER);
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    let n = 0;
    const timer = setInterval(() => {
      if (n++ < chunks) res.write(`data: {"choices":[{"index":0,"delta":{"content":"tok${n} "}}]}\n\n`);
      else {
        clearInterval(timer);
        res.end("data: [DONE]\n\n");
      }
    }, gapMs);
    res.once("close", () => clearInterval(timer));
  });
});
server.keepAliveTimeout = 65_000;
server.listen(port, "127.0.0.1", () => {
  const a = server.address();
  console.log(`listening ${typeof a === "object" && a ? a.port : port}`);
});
