// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the callers' assertions
/**
 * The control plane as integration tests drive it: on a running nats-server,
 * a fresh stream, a gateway, a `llmgw reconciler` process and the operator
 * API, with the small helpers every such test needs (calling the API, the
 * flags that point the CLI at the log, what to print when a wait times
 * out). `close()` stops whatever was started, also after a failed start.
 */
import type { Gateway } from "../../src/gateway/index.js";
import { type Log, openLog } from "../../src/log/index.js";
import { type ApiServer, startApi } from "../../src/operator/index.js";
import { type SimConfigInput, SimFleet } from "../../src/sim/index.js";
import { uniqueStream } from "../harness/nats.js";
import { logFlags } from "./cli.js";
import { eventually } from "./eventually.js";
import { rand, startTestGateway, type TestGatewayOptions } from "./gateway.js";
import { assertRedecided } from "./invariants.js";
import { killAll, type ReconcilerProcess, spawnReconciler } from "./reconciler.js";

/**
 * A simulated fleet's timings against a stack: quick, yet slow enough that
 * the gateway, the reconciler and the agents keep up on two shared cores.
 */
export const STACK_FLEET_TIMINGS = {
  heartbeatMs: 500,
  startDelayMs: 300,
  drainMs: 300,
  reconnectMinMs: 50,
  reconnectMaxMs: 500,
} as const satisfies SimConfigInput;

/** A simulated fleet over h2c to one gateway, at STACK_FLEET_TIMINGS unless `o` says otherwise. Not started. */
export function stackFleet(gatewayUrl: string, o: SimConfigInput): SimFleet {
  return new SimFleet({ gateways: [gatewayUrl], insecureDev: true, ...STACK_FLEET_TIMINGS, ...o });
}

/**
 * Runs `fn` with a simulated fleet of `o.nodes` nodes on the stack's
 * gateway, once the API lists every one connected; stops the fleet after.
 */
export async function withConnectedFleet(
  stack: Stack,
  o: SimConfigInput & { nodes: number },
  fn: (fleet: SimFleet) => Promise<void>,
): Promise<void> {
  const fleet = stackFleet(stack.gw.url, o);
  try {
    await fleet.start();
    await eventually(
      async () =>
        (await stack.call("GET", "/v1/nodes")).nodes.filter(
          (n: { liveness: string }) => n.liveness === "connected",
        ).length === o.nodes,
      { what: `${o.nodes} connected nodes in the API` },
    );
    await fn(fleet);
  } finally {
    await fleet.stop();
  }
}

/** A catalog profile, in the API's form: one shard of `gpusPerShard` 64 GiB H100s. */
export function h100Profile(name: string, gpusPerShard: number) {
  return { name, gpusPerShard, memoryPerGpu: "64GiB", gpuProduct: "H100" };
}

export interface StackOptions {
  /** A short tag: the stream's and the processes' names start with it. */
  name: string;
  /** Gateway options beyond the log's (e.g. TLS, heartbeat timeout). */
  gateway?: Partial<TestGatewayOptions>;
  /** The reconciler's config file (see ReconcilerConfig). */
  reconciler?: Record<string, unknown>;
  /** More `llmgw reconciler` flags (e.g. `--endpoints-bucket`), for every reconciler of the stack. */
  reconcilerArgs?: string[];
  /** Added to every reconciler's environment (e.g. NODE_OPTIONS for a test's module hook). */
  reconcilerEnv?: Record<string, string>;
}

export interface Stack {
  stream: string;
  prefix: string;
  /** The gateways' lease bucket: another gateway on this log joins it. */
  gatewaysBucket: string;
  log: Log;
  gw: Gateway;
  rec: ReconcilerProcess;
  /** Starts another reconciler on the same lease: it follows, and leads once `rec` is gone. */
  standby(id: string): Promise<ReconcilerProcess>;
  api: ApiServer;
  /** `--nats … --stream … --subject-prefix …`: what a CLI command needs to read this log. */
  logFlags: string[];
  /** Calls the API; a non-2xx answer throws with its status and body. */
  call(method: string, path: string, body?: unknown): Promise<any>;
  /** Calls the API and returns the status with the body, whatever the status. */
  request(path: string, init?: RequestInit): Promise<{ status: number; body: any }>;
  /** Every pass in the log is what decide makes again with the stack's reconciler config (`check-log --redecide`). */
  assertRedecided(what?: string): Promise<{ passes: number }>;
  /** The replicas as the API sees them and the reconciler's output: what a timed-out wait should print. */
  why(): Promise<string>;
  close(): Promise<void>;
}

export async function startStack(natsUrl: string, o: StackOptions): Promise<Stack> {
  const stream = uniqueStream(o.name.toUpperCase());
  const prefix = `${o.name.toLowerCase()}${rand()}.evt`;
  const gatewaysBucket = `gwl_${rand()}`;
  const leaseBucket = `rl_${rand()}`;
  const reconciler = (id: string) =>
    spawnReconciler({
      id,
      nats: natsUrl,
      stream,
      prefix,
      leaseBucket,
      gatewaysBucket,
      ...(o.reconciler ? { config: o.reconciler } : {}),
      ...(o.reconcilerArgs ? { args: o.reconcilerArgs } : {}),
      ...(o.reconcilerEnv ? { env: o.reconcilerEnv } : {}),
    });
  const log = await openLog({ url: natsUrl, clientName: "test", name: stream, prefix });
  let gw: Gateway | undefined;
  let rec: ReconcilerProcess | undefined;
  const standbys: ReconcilerProcess[] = [];
  let api: ApiServer | undefined;
  const close = async () => {
    await api?.close().catch(() => {});
    await killAll([rec, ...standbys]);
    await gw?.drain("test over").catch(() => {});
    await log.jsm.streams.delete(stream).catch(() => {});
    await log.close();
  };
  try {
    gw = await startTestGateway({
      nats: natsUrl,
      stream,
      prefix,
      leaseBucket: gatewaysBucket,
      heartbeatTimeoutMs: 5000,
      ...o.gateway,
    });
    rec = await reconciler(`rec-${o.name}`);
    api = await startApi({
      log,
      host: "127.0.0.1",
      port: 0,
      auth: { kind: "dev" },
      instanceId: `api-${o.name}`,
    });
  } catch (err) {
    await close();
    throw err;
  }
  const apiUrl = api.url;
  const request = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${apiUrl}${path}`, init);
    return { status: res.status, body: (await res.json()) as any };
  };
  const call = async (method: string, path: string, body?: unknown) => {
    const r = await request(path, {
      method,
      ...(body === undefined
        ? {}
        : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
    });
    if (r.status < 200 || r.status > 299)
      throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  const leader = rec;
  return {
    stream,
    prefix,
    gatewaysBucket,
    log,
    gw,
    rec,
    async standby(id) {
      const r = await reconciler(id);
      standbys.push(r);
      return r;
    },
    api,
    logFlags: logFlags(natsUrl, stream, prefix),
    call,
    request,
    assertRedecided: (what) => assertRedecided(log, o.reconciler ?? {}, what),
    why: async () => {
      const replicas = ((await call("GET", "/v1/replicas").catch(() => ({ replicas: [] }))).replicas ??
        []) as any[];
      const rows = replicas.map((r) => [
        r.replicaId,
        r.phase,
        r.nodeIds,
        r.pendingReason,
        r.lastFailure?.reason,
      ]);
      const output = [leader, ...standbys].map((r) => `${r.id}:\n${r.output()}`).join("\n");
      return `\nreplicas: ${JSON.stringify(rows)}\nreconciler:\n${output}`;
    },
    close,
  };
}
