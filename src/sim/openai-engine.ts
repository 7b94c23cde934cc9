/**
 * A simulated engine's HTTP face: what a router or a newcomer's `curl` sees
 * of a replica the simulator runs. It answers the parts of the OpenAI API an
 * inference engine serves (chat and text completions, embeddings, models;
 * `"stream": true` as server-sent events ending with `data: [DONE]`), the
 * health probe an agent polls, and the vLLM metric names a node agent reads
 * for serving load. Its answers name the replica, shard and node that served
 * them, so spreading, draining and moving replicas can be watched from the
 * client side.
 *
 * It never computes anything: the text is fixed, streamed a word per chunk
 * with `chunkMs` between chunks, so a test can hold requests in flight.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface SimEngineIdentity {
  nodeId: string;
  replicaId: string;
  shardId: string;
  model: string;
}

export interface SimEngineOptions extends SimEngineIdentity {
  /** Time between two streamed chunks (and the length of a whole answer's wait, per chunk). */
  chunkMs: number;
}

/** The largest request body read; bigger ones get 413, as a real engine's limit would. */
const MAX_BODY_BYTES = 1 << 20;
/** Embedding vectors are short: the shape is what matters. */
const EMBEDDING_DIMS = 8;

type Kind = "chat" | "completion" | "embedding";

const ROUTES: Record<string, Kind> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "completion",
  "/v1/embeddings": "embedding",
};

/** An OpenAI-shaped error answer. */
function fail(res: ServerResponse, status: number, message: string, type = "invalid_request_error"): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ error: { message, type, code: status } }));
}

export class SimEngineServer {
  readonly #opts: SimEngineOptions;
  readonly #server: Server;
  #draining = false;
  #running = 0;
  #served = 0;

  constructor(opts: SimEngineOptions) {
    this.#opts = opts;
    this.#server = createServer((req, res) => this.#handle(req, res));
    // An engine's keep-alive outlives a short client; don't hold the process for it.
    this.#server.keepAliveTimeout = 5_000;
  }

  /** Listens on `host` at `port` (0: one the OS picks); resolves with the port. */
  listen(host: string, port = 0): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#server.once("error", reject);
      this.#server.listen(port, host, () => {
        this.#server.off("error", reject);
        resolve((this.#server.address() as AddressInfo).port);
      });
    });
  }

  /** Requests being answered now. */
  get running(): number {
    return this.#running;
  }

  /** Requests answered since start. */
  get served(): number {
    return this.#served;
  }

  /** Health turns 503, as a draining engine's does; requests are still answered. */
  drain(): void {
    this.#draining = true;
  }

  /** The engine process is gone: nothing more is accepted and what was in flight is cut. */
  close(): void {
    this.#server.close();
    this.#server.closeAllConnections();
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? "/").split("?")[0] as string;
    if (req.method === "GET" && path === "/health") {
      res.writeHead(this.#draining ? 503 : 200).end(this.#draining ? "draining\n" : "ok\n");
      return;
    }
    if (req.method === "GET" && path === "/metrics") {
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(this.#metrics());
      return;
    }
    if (req.method === "GET" && path === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          object: "list",
          data: [{ id: this.#opts.model, object: "model", created: 0, owned_by: "llmgw-sim" }],
        }),
      );
      return;
    }
    const kind = ROUTES[path];
    if (kind === undefined) fail(res, 404, `no route ${req.method} ${path}`, "not_found_error");
    else if (req.method !== "POST") fail(res, 405, `${path} takes POST`);
    else this.#readBody(req, res, (body) => this.#answer(kind, body, res));
  }

  #readBody(req: IncomingMessage, res: ServerResponse, then: (body: Record<string, unknown>) => void): void {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        fail(res, 413, `request body over ${MAX_BODY_BYTES} bytes`);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => {
      if (size > MAX_BODY_BYTES) return;
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        return fail(res, 400, "the body is not JSON");
      }
      if (typeof body !== "object" || body === null || Array.isArray(body))
        return fail(res, 400, "the body must be a JSON object");
      then(body as Record<string, unknown>);
    });
    req.on("error", () => res.destroy());
  }

  #answer(kind: Kind, body: Record<string, unknown>, res: ServerResponse): void {
    const { model, replicaId, shardId, nodeId } = this.#opts;
    if (body.model !== undefined && body.model !== model) {
      fail(res, 404, `the model ${JSON.stringify(body.model)} does not exist (this engine serves ${model})`);
      return;
    }
    this.#running++;
    // Closed: answered, or the client went away (then nothing more is written).
    let done = false;
    res.on("close", () => {
      done = true;
      this.#running--;
    });
    const id = `${kind}-${replicaId}-${++this.#served}`;
    if (kind === "embedding") {
      const vector = Array.from({ length: EMBEDDING_DIMS }, (_, i) => ((this.#served + i) % 10) / 10);
      res.writeHead(200, { "content-type": "application/json", "x-llmgw-replica": replicaId });
      res.end(
        JSON.stringify({
          object: "list",
          model,
          data: [{ object: "embedding", index: 0, embedding: vector }],
          usage: { prompt_tokens: 1, total_tokens: 1 },
        }),
      );
      return;
    }
    const words = `Hello from ${replicaId} (shard ${shardId} on ${nodeId}).`.split(" ");
    const created = 0;
    const object = kind === "chat" ? "chat.completion" : "text_completion";
    const usage = { prompt_tokens: 1, completion_tokens: words.length, total_tokens: words.length + 1 };
    if (body.stream === true) {
      res.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "x-llmgw-replica": replicaId,
      });
      let i = 0;
      const next = () => {
        if (done) return;
        if (i === words.length) {
          res.end("data: [DONE]\n\n");
          return;
        }
        const text = (i === 0 ? "" : " ") + words[i];
        const choice =
          kind === "chat"
            ? { index: 0, delta: i === 0 ? { role: "assistant", content: text } : { content: text } }
            : { index: 0, text };
        i++;
        const last = i === words.length;
        const chunk = {
          id,
          object: kind === "chat" ? "chat.completion.chunk" : "text_completion",
          created,
          model,
          choices: [{ ...choice, finish_reason: last ? "stop" : null }],
        };
        res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        setTimeout(next, this.#opts.chunkMs);
      };
      next();
      return;
    }
    setTimeout(() => {
      if (done) return;
      const text = words.join(" ");
      const choice =
        kind === "chat"
          ? { index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }
          : { index: 0, text, finish_reason: "stop" };
      res.writeHead(200, { "content-type": "application/json", "x-llmgw-replica": replicaId });
      res.end(JSON.stringify({ id, object, created, model, choices: [choice], usage }));
    }, this.#opts.chunkMs * words.length);
  }

  /** vLLM's metric names, so a node agent reading serving load finds them. */
  #metrics(): string {
    const labels = `model_name="${this.#opts.model}"`;
    return [
      "# TYPE vllm:num_requests_running gauge",
      `vllm:num_requests_running{${labels}} ${this.#running}`,
      "# TYPE vllm:num_requests_waiting gauge",
      `vllm:num_requests_waiting{${labels}} 0`,
      "# TYPE vllm:kv_cache_usage_perc gauge",
      `vllm:kv_cache_usage_perc{${labels}} ${Math.min(1, this.#running / 64)}`,
      "",
    ].join("\n");
  }
}
