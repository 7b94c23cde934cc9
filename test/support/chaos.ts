/**
 * A small production-shaped world for fault tests: a real log (one
 * nats-server or a 3-node cluster), `llmgw gateway` and `llmgw reconciler`
 * child processes (so they can be killed with SIGKILL or paused with
 * SIGSTOP), simulated agents over real Connect streams (in this process, so
 * their record of acknowledged messages is at hand), and a projection of
 * the log that the test waits on. Every scenario ends by checking the whole
 * log with the invariant checker.
 */
import { Kvm } from "@nats-io/kv";
import type { AckedMessage } from "../../src/invariants/index.js";
import { isLogError, type Log, openLog } from "../../src/log/index.js";
import { type FleetState, fleetProjection } from "../../src/projections/index.js";
import { ProjectionRuntime } from "../../src/projections/runtime/index.js";
import { type SimConfigInput, SimFleet } from "../../src/sim/index.js";
import { uniqueStream } from "../harness/nats.js";
import { type Child, spawnLlmgw, waitForPort } from "../harness/proc.js";
import { logFlags } from "./cli.js";
import { eventually } from "./eventually.js";
import { EventFactory } from "./fleet-events.js";
import { rand } from "./gateway.js";
import { assertLogInvariants } from "./invariants.js";
import { type ReconcilerProcess, spawnReconciler } from "./reconciler.js";

const GIB = 1024;

/** Fast timings: a silent stream is closed in 1.5 s, a dead gateway's lease expires in 2 s. */
export const CHAOS_TIMINGS = {
  heartbeatTimeoutMs: 1_500,
  gatewayLeaseTtlMs: 2_000,
  reconcilerLeaseTtlMs: 2_000,
} as const;

/** Reconciler config for fault tests: short expiry, quick re-issues. */
export const CHAOS_RECONCILER_CONFIG = {
  suspectAfterMs: 3_000,
  lostAfterMs: 60_000,
  commandTimeoutMs: 5_000,
  retryBaseMs: 1_000,
  retryMaxMs: 5_000,
};

/** A catalog of `replicas` one-GPU replicas (an 8B model, one shard each). */
export function smallCatalog(replicas: number) {
  return [
    {
      name: "llama-3.1-8b",
      replicas,
      profiles: [
        {
          name: "tp1",
          shards: 1,
          gpusPerShard: 1,
          memoryPerGpuMb: BigInt(20 * GIB),
          gpuProduct: "H100",
          engineArgs: ["--max-model-len", "8192"],
          engineEnv: {},
        },
      ],
    },
  ];
}

export interface GatewayHandle {
  readonly id: string;
  /** Chosen by the gateway at its first start (it listens on port 0), kept for its restarts. */
  url: string;
  port: number;
  child: Child;
  /** NATS URL(s) it connects to (a proxy in the partition test). */
  nats: string;
  /** The `llmgw` it runs: this tree's, or another version's (see `WorldOptions.bin`). */
  bin?: string;
}

export interface WorldOptions {
  /** NATS URL(s) of the log. */
  nats: string;
  gateways?: number;
  reconcilers?: number;
  nodes?: number;
  /** Stream and KV replicas (3 on a cluster). */
  replicas?: number;
  /** NATS URL a given gateway connects to (default: `nats`). */
  gatewayNats?: (index: number) => string;
  sim?: Partial<SimConfigInput>;
  reconcilerConfig?: Record<string, unknown>;
  /** The gateways' heartbeat timeout (default CHAOS_TIMINGS.heartbeatTimeoutMs). */
  heartbeatTimeoutMs?: number;
  /** Added to every reconciler's environment (e.g. the runner's test pause point). */
  reconcilerEnv?: Record<string, string>;
  /**
   * The `llmgw` the world's first gateways and reconcilers run: another
   * version's (test/support/old-release.ts) for the rolling upgrade; this
   * tree's by default.
   */
  bin?: string;
}

export class ChaosWorld {
  readonly stream = uniqueStream("CHAOS");
  readonly tag = rand();
  readonly prefix = `x${this.tag}.evt`;
  readonly gatewaysBucket = `gws_${this.tag}`;
  readonly leaseBucket = `lease_${this.tag}`;
  readonly gateways: GatewayHandle[] = [];
  readonly reconcilers: ReconcilerProcess[] = [];
  readonly fleets: SimFleet[] = [];
  readonly acked: AckedMessage[] = [];
  readonly events = new EventFactory(`chaos-${this.tag}`);
  log!: Log;
  rt!: ProjectionRuntime<FleetState>;
  #reconcilerSeq = 0;
  /** A reconciler ran another version's code: its passes need not be this decide's. */
  #foreignReconciler = false;

  constructor(readonly opts: WorldOptions) {}

  /** The log, its projection, the gateways and the reconcilers (no agents yet). */
  async start(): Promise<this> {
    const o = this.opts;
    // A cluster that just elected its meta leader may not know all its peers yet: R3 placement waits for them.
    await eventually(
      async () => {
        this.log = await openLog({
          url: o.nats,
          clientName: "chaos-test",
          name: this.stream,
          prefix: this.prefix,
          replicas: o.replicas ?? 1,
        });
        return true;
      },
      { what: `the stream ${this.stream} created`, everyMs: 500, timeoutMs: 60_000 },
    );
    // Created here with the right replicas, so every process finds them.
    const kvm = new Kvm(this.log.js);
    await kvm.create(this.gatewaysBucket, {
      ttl: CHAOS_TIMINGS.gatewayLeaseTtlMs,
      history: 1,
      replicas: o.replicas ?? 1,
    });
    await kvm.create(this.leaseBucket, {
      ttl: CHAOS_TIMINGS.reconcilerLeaseTtlMs,
      history: 1,
      replicas: o.replicas ?? 1,
    });
    this.rt = new ProjectionRuntime(this.log, fleetProjection);
    await this.rt.start();
    await Promise.all(
      Array.from({ length: o.gateways ?? 2 }, async (_, i) => {
        const gw: GatewayHandle = {
          id: `gw-${this.tag}-${i + 1}`,
          url: "",
          port: 0,
          nats: o.gatewayNats?.(i) ?? o.nats,
          child: undefined as unknown as Child,
          ...(o.bin === undefined ? {} : { bin: o.bin }),
        };
        this.gateways[i] = gw;
        await this.#spawnGateway(gw);
      }),
    );
    await Promise.all(
      Array.from({ length: o.reconcilers ?? 2 }, () =>
        this.addReconciler(o.bin === undefined ? {} : { bin: o.bin }),
      ),
    );
    return this;
  }

  async #spawnGateway(gw: GatewayHandle): Promise<void> {
    const o = this.opts;
    const before = await this.log.lastSubjectSeq(this.log.subjects.gateway(gw.id));
    gw.child = spawnLlmgw(
      [
        "gateway",
        "--insecure-dev",
        ...["--id", gw.id, "--listen", `127.0.0.1:${gw.port}`],
        ...logFlags(gw.nats, this.stream, this.prefix),
        ...["--stream-replicas", String(o.replicas ?? 1)],
        ...["--lease-bucket", this.gatewaysBucket, "--lease-ttl", String(CHAOS_TIMINGS.gatewayLeaseTtlMs)],
        ...["--heartbeat-timeout", String(o.heartbeatTimeoutMs ?? CHAOS_TIMINGS.heartbeatTimeoutMs)],
        ...["--publish-timeout", "2000", "--log-unavailable-limit", "3000", "--drain-deadline", "3000"],
      ],
      { LLMGW_LOG_LEVEL: "info" },
      gw.bin,
    );
    if (gw.port === 0) {
      // Its first start: it binds port 0 and says where it listens once it serves.
      const line = await gw.child.waitForLine(/"gateway listening"/, 60_000);
      const url = (JSON.parse(line) as { url?: string }).url ?? "";
      gw.port = Number(new URL(url).port);
      gw.url = `http://127.0.0.1:${gw.port}`;
    }
    await waitForPort(gw.port, 60_000, gw.child);
    // It listens before it serves: ready once its GatewayStarted is in the log.
    await eventually(async () => (await this.log.lastSubjectSeq(this.log.subjects.gateway(gw.id))) > before, {
      what: `gateway ${gw.id} to start:\n${gw.child.output()}`,
      timeoutMs: 60_000,
      everyMs: 100,
    });
  }

  /** kill -9 a gateway; resolves once it is gone. */
  async killGateway(gw: GatewayHandle): Promise<void> {
    gw.child.proc.kill("SIGKILL");
    await gw.child.exited;
  }

  /** Starts a killed gateway again with the same id and port. */
  async restartGateway(gw: GatewayHandle): Promise<void> {
    await this.#spawnGateway(gw);
  }

  /**
   * One step of a rolling upgrade: stops a gateway as an operator would
   * (SIGTERM: it drains, its agents go to the other gateways) and starts
   * `bin`'s gateway in its place, same id and port.
   */
  async replaceGateway(gw: GatewayHandle, bin: string | undefined): Promise<void> {
    await gw.child.stop("SIGTERM", 15_000);
    if (bin === undefined) delete gw.bin;
    else gw.bin = bin;
    await this.#spawnGateway(gw);
  }

  /** Another reconciler on the world's lease: `bin` runs another version, `snapshotBucket` turns snapshots on. */
  async addReconciler(opts: { bin?: string; snapshotBucket?: string } = {}): Promise<ReconcilerProcess> {
    const o = this.opts;
    if (opts.bin !== undefined) this.#foreignReconciler = true;
    const r = await spawnReconciler({
      ...opts,
      id: `rec-${this.tag}-${++this.#reconcilerSeq}`,
      nats: o.nats,
      stream: this.stream,
      prefix: this.prefix,
      leaseBucket: this.leaseBucket,
      gatewaysBucket: this.gatewaysBucket,
      leaseTtlMs: CHAOS_TIMINGS.reconcilerLeaseTtlMs,
      config: { ...CHAOS_RECONCILER_CONFIG, ...o.reconcilerConfig },
      // A loaded machine starts node processes slowly.
      startTimeoutMs: 90_000,
      ...(o.reconcilerEnv ? { env: o.reconcilerEnv } : {}),
      args: ["--stream-replicas", String(o.replicas ?? 1), "--tick-ms", "1000", "--log-level", "info"],
    });
    this.reconcilers.push(r);
    return r;
  }

  /** The reconciler that leads now (by its metric), waiting for one. */
  async leader(timeoutMs = 30_000): Promise<ReconcilerProcess> {
    let found: ReconcilerProcess | undefined;
    await eventually(
      async () => {
        const leading: ReconcilerProcess[] = [];
        for (const r of this.reconcilers) if (r.running && (await r.isLeader())) leading.push(r);
        found = leading.length === 1 ? leading[0] : undefined;
        return found !== undefined;
      },
      { what: "exactly one reconciler leading", timeoutMs },
    );
    return found!;
  }

  /** Starts `nodes` simulated agents spread over the gateways; their acks are recorded. */
  async addAgents(nodes: number, nodePrefix: string, sim: Partial<SimConfigInput> = {}): Promise<SimFleet> {
    const fleet = new SimFleet({
      insecureDev: true,
      gateways: this.gateways.map((g) => g.url),
      nodes,
      nodePrefix,
      heartbeatMs: 300,
      startDelayMs: 200,
      drainMs: 100,
      reconnectMinMs: 100,
      reconnectMaxMs: 1_000,
      ackTimeoutMs: 5_000,
      seed: 11,
      ...this.opts.sim,
      ...sim,
    });
    this.fleets.push(fleet);
    fleet.on((e) => {
      if (e.type === "acked")
        this.acked.push({ nodeId: e.nodeId, sessionId: e.sessionId, messageId: e.messageId });
    });
    await fleet.start();
    return fleet;
  }

  /** Starts the world with `nodes` agents (`gpu-1`, …) connected and `replicas` replicas running: where every chaos test begins. */
  async startRunning(nodes: number, replicas: number): Promise<this> {
    await this.start();
    await this.addAgents(nodes, "gpu-");
    await this.waitConnected(nodes);
    await this.catalog(replicas);
    await this.waitRunning(replicas);
    return this;
  }

  /** Appends a catalog asking for `replicas`; retried (same id, stored once) while the cluster elects. */
  async catalog(replicas: number): Promise<number> {
    const event = this.events.catalog(smallCatalog(replicas));
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        return (await this.log.append(event, { timeoutMs: 2_000 })).seq;
      } catch (err) {
        if (!isLogError(err, "unavailable", "internal") || Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  /** Nodes whose session is current (connected). */
  connected(prefix = ""): number {
    return this.rt.state.inventory.nodes
      .values()
      .filter((n) => n.session !== null && n.nodeId.startsWith(prefix)).length;
  }

  /** Replicas whose every shard reports running. */
  running(): number {
    return this.rt.state.replicas.replicas
      .values()
      .filter((r) => r.shards.length > 0 && r.shards.every((s) => s.state === "running")).length;
  }

  async waitConnected(n: number, prefix = "", timeoutMs = 60_000): Promise<void> {
    try {
      await eventually(() => this.connected(prefix) >= n, {
        what: `${n} connected nodes${prefix ? ` (${prefix}*)` : ""}`,
        timeoutMs,
      });
    } catch (err) {
      throw new Error(`${(err as Error).message}; ${this.#agentsReport(prefix)}`, { cause: err });
    }
  }

  /** What the agents and the projection say, for failure messages. */
  #agentsReport(prefix: string): string {
    const agents = this.fleets.flatMap((f) => f.nodes()).filter((a) => a.nodeId.startsWith(prefix));
    const reasons = new Map<string, number>();
    for (const a of agents) {
      if (a.connected) continue;
      const r = a.lastDisconnectReason || "(never connected)";
      reasons.set(r, (reasons.get(r) ?? 0) + 1);
    }
    return (
      `the log shows ${this.connected(prefix)} connected (projection at ${this.rt.lastSeq}, ${this.rt.status}); ` +
      `the agents say ${agents.filter((a) => a.connected).length}/${agents.length} connected; not connected because: ` +
      `${JSON.stringify(Object.fromEntries(reasons))}; gateways:\n` +
      this.gateways.map((g) => `--- ${g.id}\n${g.child.output().split("\n").slice(-8).join("\n")}`).join("\n")
    );
  }

  async waitRunning(n: number, timeoutMs = 60_000): Promise<void> {
    await eventually(() => this.running() >= n, {
      what: `${n} replicas running (have ${this.running()}); leader output:\n${this.reconcilerOutput()}`,
      timeoutMs,
    });
  }

  reconcilerOutput(): string {
    return this.reconcilers
      .map((r) => `--- ${r.id}${r.running ? "" : " (exited)"}\n${r.output()}`)
      .join("\n");
  }

  /**
   * Waits until the reconciler has adopted the current session of every node
   * given (its `shardsAdopted` decision folded): a pass that observed those
   * sessions. Returns the projection's position then.
   */
  async waitAdopted(nodes: readonly string[], timeoutMs = 60_000): Promise<number> {
    const pending = () =>
      nodes.filter((n) => {
        const s = this.rt.state.inventory.nodes.get(n)?.session;
        return !s || s.adoptionSeq === 0;
      });
    try {
      await eventually(() => pending().length === 0, {
        what: `the adoption of the current sessions of ${nodes.length} nodes`,
        timeoutMs,
      });
    } catch (err) {
      throw new Error(
        `${(err as Error).message}; not adopted: ${pending().slice(0, 10).join(", ")}; leader output:\n${this.reconcilerOutput()}`,
        { cause: err },
      );
    }
    return this.rt.lastSeq;
  }

  /** Waits until a gateway's lease key was written at or after `sinceMs` (by its own clock). */
  async waitLeaseRenewed(gw: GatewayHandle, sinceMs: number, timeoutMs = 30_000): Promise<void> {
    const kv = await new Kvm(this.log.js).open(this.gatewaysBucket);
    await eventually(
      async () => {
        const e = await kv.get(gw.id);
        if (e?.operation !== "PUT") return false;
        return (e.json<{ renewedAtMs?: number }>().renewedAtMs ?? 0) >= sinceMs;
      },
      {
        what: `${gw.id} to renew its lease after ${new Date(sinceMs).toISOString()}:\n${gw.child.output()}`,
        timeoutMs,
      },
    );
  }

  /** Start commands appended after `seq` (a shard (re)started). */
  async startsAfter(seq: number): Promise<string[]> {
    const out: string[] = [];
    for await (const r of this.log.read({ fromSeq: seq + 1 })) {
      if (r.event.body.case !== "reconcilePass") continue;
      for (const c of r.event.body.value.commands)
        if (c.action.case === "start") out.push(`${r.seq}:${c.action.value.shardId}@${c.nodeId}`);
    }
    return out;
  }

  /** The whole log keeps every invariant, the agents' acks included. */
  async check(what: string) {
    // Every pass re-decided too, unless another version's code ran in a reconciler.
    const redecide = this.#foreignReconciler
      ? {}
      : { redecide: { ...CHAOS_RECONCILER_CONFIG, ...this.opts.reconcilerConfig } };
    return await assertLogInvariants(this.log, { acked: this.acked, what, ...redecide });
  }

  async close(): Promise<void> {
    await Promise.all(this.fleets.map((f) => f.stop().catch(() => {})));
    await Promise.all(this.reconcilers.map((r) => r.kill()));
    await Promise.all(this.gateways.map((g) => g?.child?.stop("SIGKILL", 1000)));
    await this.rt?.stop().catch(() => {});
    await this.log?.close().catch(() => {});
  }
}
