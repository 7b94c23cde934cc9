/**
 * The router's HTTP server: the OpenAI API (`POST /v1/chat/completions`,
 * `/v1/completions`, `/v1/embeddings`, `GET /v1/models`), `/healthz` and
 * `/metrics`. Plain node:http rather than fastify: the router parses no
 * body (it reads only as far as `model`) and passes bytes through as they
 * come, both ways, which a framework's body handling would get in the way of.
 */
import {
  Agent,
  type ClientRequest,
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { Logger } from "pino";
import { type ApiKey, ApiKeys } from "./api-keys.js";
import { scanModel } from "./body-model.js";
import { BodyRelay } from "./body-relay.js";
import type { RouterConfig } from "./config.js";
import type { RouterMetrics } from "./metrics.js";
import { sendError } from "./openai-errors.js";
import { affinityKey, type Candidate, pickReplica } from "./picker.js";
import type { ReplicaBook } from "./replicas.js";
import type { RoutingTable } from "./table.js";

export interface TableStatus {
  readonly loaded: boolean;
  readonly stale: boolean;
  readonly staleSince: number;
}

export interface RouterServerOptions {
  host: string;
  port: number;
  table: RoutingTable;
  status: TableStatus;
  book: ReplicaBook;
  config: RouterConfig;
  metrics: RouterMetrics;
  logger: Logger;
  apiKeys?: ApiKeys;
  /** Random numbers for the picker (tests may fix them). */
  random?: () => number;
}

export interface RouterServer {
  url: string;
  server: Server;
  close(): Promise<void>;
}

const INFERENCE = new Set(["/v1/chat/completions", "/v1/completions", "/v1/embeddings"]);
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
]);

export async function startRouterServer(o: RouterServerOptions): Promise<RouterServer> {
  const router = new Router(o);
  const server = createServer(
    // Node's request and header deadlines stay (a slow sender is cut off); keep-alive outlasts a typical LB's 60 s.
    { maxHeaderSize: o.config.maxHeaderBytes, keepAliveTimeout: 65_000 },
    (req, res) => router.handle(req, res),
  );
  server.maxHeadersCount = 100;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, o.host, () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : o.port;
  const host = o.host === "0.0.0.0" || o.host === "::" ? "127.0.0.1" : o.host;
  return {
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        router.close();
      }),
  };
}

class Router {
  readonly #agent = new Agent({ keepAlive: true, maxFreeSockets: 1024 });
  readonly #httpsAgent = new HttpsAgent({ keepAlive: true, maxFreeSockets: 1024 });
  readonly #perClient = new Map<string, number>();
  readonly #random: () => number;

  constructor(private readonly o: RouterServerOptions) {
    this.#random = o.random ?? Math.random;
  }

  close(): void {
    this.#agent.destroy();
    this.#httpsAgent.destroy();
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? "/").split("?")[0] as string;
    if (INFERENCE.has(path)) {
      if (req.method !== "POST") this.#methodNotAllowed(res, "POST");
      else void this.#inference(req, res, path);
      return;
    }
    switch (path) {
      case "/healthz":
        this.#healthz(res);
        return;
      case "/metrics":
        void this.#metrics(res);
        return;
      case "/v1/models":
        if (req.method !== "GET") this.#methodNotAllowed(res, "GET");
        else this.#models(req, res);
        return;
      default:
        sendError(
          res,
          404,
          "invalid_request_error",
          "not_found",
          `no route ${req.method} ${path}: the router serves POST /v1/chat/completions, /v1/completions, /v1/embeddings and GET /v1/models`,
        );
    }
  }

  #methodNotAllowed(res: ServerResponse, allow: string): void {
    sendError(res, 405, "invalid_request_error", "method_not_allowed", `use ${allow}`, { allow });
  }

  #healthz(res: ServerResponse): void {
    const s = this.o.status;
    const status = !s.loaded ? "loading" : s.stale ? "stale" : "ok";
    const body = JSON.stringify({
      status,
      table: {
        loaded: s.loaded,
        stale: s.stale,
        ...(s.stale ? { staleSinceMs: s.staleSince } : {}),
        changes: this.o.table.changes,
        // What this router routes to now: model → replica ids.
        endpoints: Object.fromEntries(
          Object.entries(this.o.table.snapshot()).map(([m, l]) => [m, l.map((e) => e.replicaId)]),
        ),
      },
      ...(status === "stale"
        ? { message: "NATS is unreachable: routing on the last table read; changes since are not seen" }
        : {}),
    });
    // Stale still serves: a load balancer must keep sending to it.
    res.writeHead(s.loaded ? 200 : 503, { "content-type": "application/json" }).end(body);
  }

  async #metrics(res: ServerResponse): Promise<void> {
    const r = this.o.metrics.registry;
    try {
      const text = await r.metrics();
      res.writeHead(200, { "content-type": r.contentType }).end(text);
    } catch (err) {
      res.writeHead(500, { "content-type": "text/plain" }).end(`${(err as Error).message}\n`);
    }
  }

  #authenticate(req: IncomingMessage, res: ServerResponse): { key?: ApiKey } | undefined {
    const keys = this.o.apiKeys;
    if (!keys) return {};
    const check = keys.identify(req.headers.authorization);
    if (check.ok) return { key: check.key };
    sendError(res, check.status, "authentication_error", "invalid_api_key", check.message);
    return undefined;
  }

  #models(req: IncomingMessage, res: ServerResponse): void {
    const auth = this.#authenticate(req, res);
    if (!auth) return;
    const data = this.o.table
      .servedModels()
      .filter((m) => ApiKeys.allows(auth.key, m))
      .map((id) => ({ id, object: "model", created: 0, owned_by: "llmgw" }));
    const body = JSON.stringify({ object: "list", data });
    res.writeHead(200, { "content-type": "application/json" }).end(body);
  }

  async #inference(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const started = performance.now();
    // A client that resets mid-way makes its streams emit errors; the response's close cleans up.
    req.on("error", () => {});
    res.on("error", () => {});
    const m = this.o.metrics;
    const log: Record<string, unknown> = { method: "POST", path };
    let model = "";
    let replica = "";
    const fail = (
      status: number,
      reason: string,
      type: Parameters<typeof sendError>[2],
      message: string,
      headers: Record<string, string> = {},
    ) => {
      m.errors.inc({ model, replica, reason });
      log["error"] = reason;
      sendError(res, status, type, reason, message, headers);
    };
    res.once("close", () => {
      log["status"] = res.statusCode;
      log["ms"] = Math.round((performance.now() - started) * 10) / 10;
      if (!res.writableFinished) log["aborted"] = true;
      m.requests.inc({ model, replica, code: String(res.statusCode) });
      this.o.logger.info(log, "request");
    });

    const auth = this.#authenticate(req, res);
    if (!auth) return;
    const client = auth.key?.name ?? req.socket.remoteAddress ?? "unknown";
    log["client"] = client;
    const held = this.#perClient.get(client) ?? 0;
    if (held >= this.o.config.maxConcurrentPerClient) {
      return fail(
        429,
        "too_many_concurrent",
        "rate_limit_error",
        `${held} requests of this client are in flight already; at most ${this.o.config.maxConcurrentPerClient} at once`,
        { "retry-after": "1" },
      );
    }
    this.#perClient.set(client, held + 1);
    res.once("close", () => {
      const n = (this.#perClient.get(client) ?? 1) - 1;
      if (n <= 0) this.#perClient.delete(client);
      else this.#perClient.set(client, n);
    });

    const max = this.o.config.maxBodyBytes;
    const declared = Number(req.headers["content-length"] ?? Number.NaN);
    if (declared > max) {
      res.setHeader("connection", "close");
      return fail(413, "body_too_large", "invalid_request_error", tooLarge(max));
    }
    const affinity = this.o.config.affinity === "prefix";
    const first = await readModel(req, max, affinity, Number.isFinite(declared) ? declared : -1);
    if (first.kind === "gone") return;
    if (first.kind === "too_large") {
      res.setHeader("connection", "close");
      return fail(413, "body_too_large", "invalid_request_error", tooLarge(max));
    }
    if (first.kind === "invalid") return fail(400, "bad_request", "invalid_request_error", first.message);
    log["model"] = first.model.slice(0, 200);
    // A key's own limits first: which models exist is not told to a key that may not use them.
    if (auth.key) {
      const admit = this.o.apiKeys!.admit(auth.key, first.model, Date.now());
      if (!admit.ok) {
        return fail(
          admit.status,
          admit.status === 429 ? "rate_limited" : "model_not_allowed",
          admit.status === 429 ? "rate_limit_error" : "permission_error",
          admit.message.slice(0, 300),
          admit.retryAfterSeconds ? { "retry-after": String(admit.retryAfterSeconds) } : {},
        );
      }
    }
    const list = this.o.table.endpoints(first.model);
    if (list === undefined) {
      // The metrics' model label stays "": a client's made-up names must not become series.
      return fail(
        404,
        "model_not_found",
        "invalid_request_error",
        `The model '${first.model.slice(0, 200)}' does not exist: the routing table has never listed it (GET /v1/models lists the models served)`,
      );
    }
    model = first.model;
    if (list.length === 0) {
      const after = String(this.o.config.retryAfterSeconds);
      return fail(
        503,
        "no_ready_replica",
        "server_error",
        `The model '${model}' has no ready replica now (scaled to 0, starting or draining); try again later`,
        { "retry-after": after },
      );
    }
    let key: string | undefined;
    if (affinity && first.ended) {
      try {
        key = affinityKey(
          JSON.parse(Buffer.concat(first.chunks).toString("utf8")),
          this.o.config.affinityChars,
        );
      } catch {
        // The engine answers a malformed body itself.
      }
    }

    let tooLargeLate = false;
    const relay = new BodyRelay(req, first, this.o.config, () => {
      tooLargeLate = true;
      current?.destroy();
      fail(413, "body_too_large", "invalid_request_error", tooLarge(max));
    });
    let current: ClientRequest | undefined;
    let clientGone = false;
    res.once("close", () => {
      if (!res.writableFinished) {
        clientGone = true;
        current?.destroy();
      }
    });

    const tried = new Set<string>();
    const retries: string[] = [];
    // Every replica tried said it is overloaded (503): the client is told the same, with Retry-After.
    let allBusy = true;
    const gaveUp = (why: string) =>
      allBusy
        ? fail(
            503,
            "upstream_unavailable",
            "server_error",
            `every replica tried answered 503 (${why}); try again later`,
            {
              "retry-after": String(this.o.config.retryAfterSeconds),
            },
          )
        : fail(502, "upstream_failed", "upstream_error", why);
    for (let attemptNo = 0; ; attemptNo++) {
      // The table as it is now: a replica that left it since the last attempt is not tried.
      const now = this.o.table.endpoints(model) ?? [];
      const pick = pickReplica({
        candidates: this.o.book.candidates(now, Date.now()),
        exclude: tried,
        ...(key !== undefined ? { affinity: key } : {}),
        random: this.#random,
      });
      if (!pick) {
        if (now.length === 0) {
          return fail(
            503,
            "no_ready_replica",
            "server_error",
            `The model '${model}' has no ready replica now; try again later`,
            { "retry-after": String(this.o.config.retryAfterSeconds) },
          );
        }
        return gaveUp(`every replica tried failed before answering (${retries.join("; ")})`);
      }
      replica = pick.replicaId;
      tried.add(pick.replicaId);
      log["replica"] = replica;
      const outcome = await this.#attempt(req, res, pick, model, path, relay, auth.key !== undefined, (r) => {
        current = r;
      });
      if (clientGone || tooLargeLate) return;
      if (outcome.kind === "answered") {
        m.ttfb.observe({ model }, (outcome.headAtMs - started) / 1000);
        if (retries.length > 0) log["retries"] = retries;
        res.once("finish", () => m.duration.observe({ model }, (performance.now() - started) / 1000));
        return;
      }
      retries.push(`${pick.replicaId}: ${outcome.reason}`);
      if (outcome.code !== "upstream_503") allBusy = false;
      if (outcome.eject) {
        this.o.book.eject(pick.replicaId, Date.now() + this.o.config.ejectMs);
        m.ejections.inc({ model, replica: pick.replicaId });
      }
      if (attemptNo >= this.o.config.retries || !relay.replayable) {
        log["retries"] = retries;
        return gaveUp(
          `the replica failed before answering and the request was not retried further (${retries.join("; ")})`,
        );
      }
      m.retries.inc({ model, replica: pick.replicaId, reason: outcome.code });
    }
  }

  /** One try on one replica: its answer relayed to the client, or why it failed before answering. */
  #attempt(
    req: IncomingMessage,
    res: ServerResponse,
    pick: Candidate,
    model: string,
    path: string,
    relay: BodyRelay,
    dropAuthorization: boolean,
    setCurrent: (r: ClientRequest) => void,
  ): Promise<
    { kind: "answered"; headAtMs: number } | { kind: "failed"; reason: string; code: string; eject: boolean }
  > {
    const m = this.o.metrics;
    const book = this.o.book;
    const url = parsedUrl(pick.url);
    const https = url.protocol === "https:";
    const base = url.pathname.replace(/\/$/, "");
    const query = (req.url ?? "").slice(path.length);
    book.started(pick.replicaId);
    m.inFlight.inc({ model, replica: pick.replicaId });
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      book.finished(pick.replicaId);
      m.inFlight.dec({ model, replica: pick.replicaId });
    };
    return new Promise((resolve) => {
      const up = (https ? httpsRequest : httpRequest)({
        protocol: url.protocol,
        host: url.hostname,
        port: url.port || (https ? 443 : 80),
        method: "POST",
        path: `${base}${path}${query}`,
        headers: upstreamHeaders(req, url.host, dropAuthorization),
        agent: https ? this.#httpsAgent : this.#agent,
      });
      setCurrent(up);
      let answered = false;
      // Once this attempt has failed, nothing it still emits may touch the next one.
      let gaveUp = false;
      up.once("response", (ur) => {
        if (ur.statusCode === 503 && relay.replayable) {
          gaveUp = true;
          ur.resume();
          ur.on("error", () => {});
          relay.detach();
          up.destroy();
          finish();
          resolve({ kind: "failed", reason: "answered 503", code: "upstream_503", eject: true });
          return;
        }
        answered = true;
        relay.release();
        res.writeHead(ur.statusCode ?? 502, downstreamHeaders(ur.headers, pick.replicaId));
        // SSE: each chunk leaves as it comes.
        if (String(ur.headers["content-type"] ?? "").startsWith("text/event-stream")) res.flushHeaders();
        ur.pipe(res);
        ur.on("error", () => res.destroy());
        ur.once("aborted", () => res.destroy());
        res.once("close", () => {
          if (!ur.complete) up.destroy();
          finish();
        });
        ur.once("end", finish);
        resolve({ kind: "answered", headAtMs: performance.now() });
      });
      // `on`, not `once`: a second error from the same request must not go unhandled.
      up.on("error", (err: NodeJS.ErrnoException) => {
        if (gaveUp) return;
        if (answered) {
          res.destroy();
          finish();
          return;
        }
        gaveUp = true;
        relay.detach();
        finish();
        const code = err.code ?? "error";
        // A kept-alive socket the engine had just closed: the engine is fine.
        const stale = up.reusedSocket && (code === "ECONNRESET" || code === "EPIPE");
        resolve({ kind: "failed", reason: `${code} ${err.message}`, code, eject: !stale });
      });
      relay.attach(up);
    });
  }
}

const urls = new Map<string, URL>();
/** Endpoint URLs parsed once: a table has few, every request uses one. */
function parsedUrl(text: string): URL {
  let u = urls.get(text);
  if (!u) {
    if (urls.size > 10_000) urls.clear();
    u = new URL(text);
    urls.set(text, u);
  }
  return u;
}

type FirstBytes =
  | { kind: "model"; model: string; chunks: Buffer[]; size: number; ended: boolean }
  | { kind: "invalid"; message: string }
  | { kind: "too_large" }
  | { kind: "gone" };

/** Reads the body as far as its `model` (with affinity: to its end, for the prompt). */
function readModel(req: IncomingMessage, max: number, whole: boolean, declared: number): Promise<FirstBytes> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let found: string | undefined;
    const done = (r: FirstBytes) => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onGone);
      req.off("close", onClose);
      req.pause();
      resolve(r);
    };
    const onData = (c: Buffer) => {
      chunks.push(c);
      size += c.length;
      if (size > max) return done({ kind: "too_large" });
      if (found !== undefined) return;
      const scan = scanModel(Buffer.concat(chunks).toString("utf8"), false);
      if (scan.kind === "invalid") return done(scan);
      if (scan.kind === "model") {
        found = scan.model;
        // All the bytes the Content-Length announced: the body is whole, forwarded in one write.
        if (!whole) done({ kind: "model", model: scan.model, chunks, size, ended: size === declared });
      }
    };
    const onEnd = () => {
      if (found !== undefined) return done({ kind: "model", model: found, chunks, size, ended: true });
      const scan = scanModel(Buffer.concat(chunks).toString("utf8"), true);
      if (scan.kind === "model") done({ kind: "model", model: scan.model, chunks, size, ended: true });
      else done(scan.kind === "invalid" ? scan : { kind: "invalid", message: "the body ends too early" });
    };
    const onGone = () => done({ kind: "gone" });
    const onClose = () => {
      if (!req.complete) done({ kind: "gone" });
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onGone);
    req.on("close", onClose);
  });
}

function tooLarge(max: number): string {
  return `the request body is larger than ${max} bytes (the router's --max-body-bytes)`;
}

function upstreamHeaders(
  req: IncomingMessage,
  host: string,
  dropAuthorization: boolean,
): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (HOP_BY_HOP.has(k)) continue;
    if (dropAuthorization && k === "authorization") continue;
    out[k] = v;
  }
  out.host = host;
  const from = req.socket.remoteAddress;
  if (from) {
    const before = req.headers["x-forwarded-for"];
    out["x-forwarded-for"] = before ? `${String(before)}, ${from}` : from;
  }
  return out;
}

function downstreamHeaders(h: IncomingHttpHeaders, replicaId: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined || HOP_BY_HOP.has(k)) continue;
    out[k] = v;
  }
  out["x-llmgw-replica"] = replicaId;
  return out;
}
