// biome-ignore-all lint/suspicious/noExplicitAny: response bodies are loosely typed JSON, checked by the assertions
/**
 * An operator API on a unique stream of a real nats-server, for tests, and a
 * small fleet to seed it with (three H100 nodes, a catalog, a reconciler
 * pass that places two replicas and leaves one pending).
 */

import type { Logger } from "pino";
import type { Event } from "../../src/gen/llmgw/v1/events_pb.js";
import { type Log, openLog } from "../../src/log/index.js";
import { type ApiServer, type AuthMode, startApi } from "../../src/operator/index.js";
import { uniqueStream } from "../harness/nats.js";
import { decide, EventFactory, h100Node, llamaCatalog, ShardStatus_State } from "./fleet-events.js";
import { onSuiteServer, type Server } from "./suites.js";

export const TOKEN = "test-token-4f9c2a7e1b8d3c6f0a5e9b2d7c4f1a8e";

export interface ApiFixture {
  api: ApiServer;
  log: Log;
  /** The log's subject prefix. */
  prefix: string;
  /** fetch against the API with the token (unless `token: null`). */
  call(
    path: string,
    init?: { method?: string; body?: string; headers?: Record<string, string>; token?: string | null },
  ): Promise<{ status: number; headers: Headers; body: any }>;
  close(): Promise<void>;
}

export interface ApiSuite {
  readonly server: Server;
  readonly fx: ApiFixture;
  /** The sequence of the last seed event. */
  readonly last: number;
  /** The environment that points the CLI at this API. */
  readonly cliEnv: NodeJS.ProcessEnv;
}

/**
 * For the describe block this is called in: a nats-server and an API over
 * a log of its own, seeded with `seed` (the small fleet unless told) and
 * folded before the first test.
 */
export function apiSuite(opts: { seed?: () => Event[]; uiDir?: string } = {}): ApiSuite {
  const s = onSuiteServer(
    "the suite's API",
    async (server) => {
      const fx = await startApiFixture(server.url, opts.uiDir ? { uiDir: opts.uiDir } : {});
      try {
        const last = await appendAll(fx.log, (opts.seed ?? smallFleet)());
        await fx.api.runtime.waitFor(last);
        return { fx, last };
      } catch (err) {
        await fx.close();
        throw err;
      }
    },
    ({ fx }) => fx.close(),
  );
  return {
    get server() {
      return s().server;
    },
    get fx() {
      return s().value.fx;
    },
    get last() {
      return s().value.last;
    },
    get cliEnv() {
      return { LLMGW_API_URL: s().value.fx.api.url, LLMGW_API_TOKEN: TOKEN };
    },
  };
}

export async function startApiFixture(
  natsUrl: string,
  opts: { auth?: AuthMode; uiDir?: string; logger?: Logger } = {},
): Promise<ApiFixture> {
  const prefix = `t${Math.random().toString(36).slice(2, 8)}.evt`;
  const log = await openLog({ url: natsUrl, clientName: "operator-test", name: uniqueStream("OP"), prefix });
  let api: ApiServer;
  try {
    api = await startApi({
      log,
      host: "127.0.0.1",
      port: 0,
      auth: opts.auth ?? { kind: "token", token: TOKEN },
      instanceId: "api-test",
      ...(opts.uiDir ? { uiDir: opts.uiDir } : {}),
      ...(opts.logger ? { logger: opts.logger } : {}),
    });
  } catch (err) {
    await log.close();
    throw err;
  }
  return {
    api,
    log,
    prefix,
    call: (path, init = {}) => {
      const token = init.token === undefined ? TOKEN : init.token;
      return callApi(api.url, path, { ...init, authorization: token === null ? null : `Bearer ${token}` });
    },
    async close() {
      await api.close().catch(() => {});
      await log.jsm.streams.delete(log.stream).catch(() => {});
      await log.close();
    },
  };
}

/**
 * Three connected nodes (gpu-a1, gpu-a2 in ib-pod-1, gpu-b1 in ib-pod-2), the
 * Llama catalog, and a pass: r-70b-1 placed on gpu-a1 and running, r-405b-1
 * placed on gpu-a1+gpu-a2, r-70b-2 pending.
 */
/** fetch against an API with this Authorization header (null: none); a JSON answer is parsed. */
export async function callApi(
  baseUrl: string,
  path: string,
  init: {
    method?: string;
    body?: string | Buffer;
    headers?: Record<string, string>;
    authorization: string | null;
  },
): Promise<{ status: number; headers: Headers; body: any }> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.authorization !== null) headers["authorization"] = init.authorization;
  const res = await fetch(`${baseUrl}${path}`, {
    method: init.method ?? "GET",
    headers,
    ...(init.body === undefined ? {} : { body: init.body }),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON (metrics, the UI page): the text itself.
  }
  return { status: res.status, headers: res.headers, body };
}

export function smallFleet(): Event[] {
  const f = new EventFactory("seed");
  return [
    f.gatewayStarted("gw-1"),
    f.sessionOpened("gpu-a1", "s-a1", "gw-1", h100Node("gpu-a1", { pod: "ib-pod-1" })),
    f.sessionOpened("gpu-a2", "s-a2", "gw-1", h100Node("gpu-a2", { pod: "ib-pod-1" })),
    f.sessionOpened("gpu-b1", "s-b1", "gw-1", h100Node("gpu-b1", { pod: "ib-pod-2" })),
    f.catalog(llamaCatalog(2, 1)),
    f.pass([
      decide.created("r-70b-1", "llama-3.3-70b"),
      decide.placed("r-70b-1", "llama-3.3-70b", "tp4", [
        { shard: "r-70b-1.0", node: "gpu-b1", session: "s-b1", gpus: [0, 1, 2, 3] },
      ]),
      decide.created("r-405b-1", "llama-3.1-405b"),
      decide.placed("r-405b-1", "llama-3.1-405b", "tp8-pp2", [
        { shard: "r-405b-1.0", node: "gpu-a1", session: "s-a1", gpus: [0, 1, 2, 3, 4, 5, 6, 7] },
        { shard: "r-405b-1.1", node: "gpu-a2", session: "s-a2", gpus: [0, 1, 2, 3, 4, 5, 6, 7] },
      ]),
      decide.created("r-70b-2", "llama-3.3-70b"),
      decide.pending("r-70b-2", "llama-3.3-70b", "0/3 nodes fit: 3 too few free GPUs"),
    ]),
    f.shardStatus("gpu-b1", "s-b1", "r-70b-1", "r-70b-1.0", ShardStatus_State.RUNNING),
  ];
}

export async function appendAll(log: Log, events: Iterable<Event>): Promise<number> {
  let last = 0;
  for (const e of events) last = (await log.append(e)).seq;
  return last;
}

/** Polls until `check` returns a value (not undefined), or fails after the deadline. */
export async function eventually<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
