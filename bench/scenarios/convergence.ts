/**
 * Convergence: a fleet of simulated agents (`llmgw sim`, one child process)
 * on two gateways (`llmgw gateway` ×2, each agent starting on one of them),
 * three reconcilers (`llmgw reconciler` ×3, one leads), and the operator API
 * (in this process). Registration first (every agent's session open and
 * adopted), then four measurements, in order:
 *
 * 1. catalog applied through the API (`PUT /v1/catalog`) → every replica
 *    running. Raw reference: the floor, the PUT itself (appended and folded
 *    by the API) plus the simulated engines' start time.
 * 2. gateway kill -9 → every agent it held re-registered on the other
 *    gateway, its running shards adopted, every replica running again, and
 *    no shard restarted (no start or stop command after the kill). Raw
 *    reference of both the re-registration and every replica running
 *    again: the first registration (session open and adopted) of the same
 *    agents, from the sim's start.
 * 3. leader SIGTERM → a standby's first pass (a handover: the leader
 *    deletes its lease key on the way out, the standbys watch the key).
 *    Goal: under 1 s, whatever the TTL.
 * 4. leader kill -9 → the last standby's first pass (a takeover: the key
 *    must expire first). Raw reference: the lease TTL, the least a killed
 *    leader's lease can take to expire; goal: within TTL + 1 s.
 *    In 3 and 4 the catalog asks for one more replica right after the
 *    signal, so there is work for the successor.
 *
 * Progress and every figure come from a projection of the log in this
 * process: what the log says is what happened.
 */
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { type Log, openLog } from "../../src/log/index.js";
import { ApiClient, startApi } from "../../src/operator/index.js";
import { type FleetState, fleetProjection } from "../../src/projections/index.js";
import { ProjectionRuntime } from "../../src/projections/runtime/index.js";
import { startServer, uniqueStream } from "../../test/harness/nats.js";
import { type Child, spawnLlmgw, until } from "../../test/harness/proc.js";
import { type BenchGateway, startGatewayProcess } from "../support/gateway.js";
import { type Figure, figure, fmt, type Scenario } from "../support/result.js";

/** The reconcilers' lease TTL (the floor of a takeover); shorter in --quick, which checks the steps, not the figures. */
const LEASE_TTL_MS = 10_000;
const LEASE_TTL_MS_QUICK = 2_000;
/** How often the scenario looks at its projection: the figures are as fine as this. */
const POLL_MS = 10;
/** The simulated engines' start (starting → running): the sim's default, given explicitly; shorter in --quick. */
const START_DELAY_MS = 5_000;
const START_DELAY_MS_QUICK = 500;

export const convergence: Scenario = {
  name: "convergence",
  describe:
    "catalog → every replica running; gateway kill → agents re-registered and adopted; leader kill → new leader's first pass",
  async run(ctx) {
    // LLMGW_BENCH_CONVERGENCE_NODES=200: a smaller fleet at the default TTL and start delay
    // (the failover figures do not depend on the fleet's size; a busy machine cannot keep 1,000 simulated agents heartbeating).
    const nodes = nodesFrom(process.env.LLMGW_BENCH_CONVERGENCE_NODES) ?? (ctx.quick ? 10 : 1_000);
    // Two 4-GPU replicas fit a node of 8: half the fleet's nodes' worth of replicas fills a quarter.
    const replicas = Math.max(1, Math.floor(nodes / 2));
    const waitMs = ctx.quick ? 60_000 : 300_000;
    const leaseTtlMs = ctx.quick ? LEASE_TTL_MS_QUICK : LEASE_TTL_MS;
    const startDelayMs = ctx.quick ? START_DELAY_MS_QUICK : START_DELAY_MS;
    const server = await startServer();
    const stream = uniqueStream("CONVERGE");
    const log = await openLog({ url: server.url, clientName: "bench-convergence", name: stream });
    const children: Child[] = [];
    const gateways: BenchGateway[] = [];
    const rt = new ProjectionRuntime<FleetState>(log, fleetProjection);
    const api = await startApi({
      log,
      host: "127.0.0.1",
      port: 0,
      auth: { kind: "dev" },
      instanceId: "bench",
    });
    try {
      for (const id of ["gw-bench-a", "gw-bench-b"]) {
        const gw = await startGatewayProcess({ nats: server.url, stream, id });
        gateways.push(gw);
        children.push(gw.child);
      }
      const reconcilers = new Map<string, Child>();
      for (const id of ["rec-bench-1", "rec-bench-2", "rec-bench-3"]) {
        const rec = spawnLlmgw([
          "reconciler",
          ...["--nats", server.url, "--stream", stream, "--id", id],
          ...["--lease-ttl-ms", String(leaseTtlMs)],
          // Info: its "leading: lease acquired" line says what woke it (a release or its poll).
          ...["--log-level", "info"],
        ]);
        reconcilers.set(id, rec);
        children.push(rec);
      }
      const sim = spawnLlmgw([
        "sim",
        ...["--gateway", gateways.map((g) => g.url).join(",")],
        "--insecure-dev",
        ...["--nodes", String(nodes), "--summary-ms", "0"],
        ...["--start-delay-ms", String(startDelayMs)],
      ]);
      children.push(sim);
      await rt.start();

      // --- registration ---------------------------------------------------
      // A node counts once its session is open and the reconciler adopted it (handled its
      // registration): the catalog then lands on a fleet the control plane has taken in.
      ctx.progress(`waiting for ${nodes} nodes`);
      const t0 = performance.now();
      const adoptedAt = new Map<string, number>();
      await until(
        () => {
          const now = performance.now() - t0;
          for (const n of adoptedIds(rt.state)) if (!adoptedAt.has(n)) adoptedAt.set(n, now);
          const n = adoptedNodes(rt.state);
          ctx.progress(`${n}/${nodes} nodes registered and adopted`);
          return n >= nodes ? true : undefined;
        },
        waitMs,
        `${nodes} nodes registered and adopted`,
        POLL_MS,
      );
      const registerMs = performance.now() - t0;

      // --- 1. catalog through the API → every replica running --------------
      const client = new ApiClient({ url: api.url });
      const catalogFromSeq = (await log.lastSeq()) + 1;
      const t1Wall = Date.now();
      const t1 = performance.now();
      await client.send((c) => c.PUT("/v1/catalog", { body: catalog(replicas) }));
      const putMs = performance.now() - t1;
      ctx.progress(`catalog applied: ${replicas} replicas`);
      await untilRunning(ctx, rt, replicas, waitMs);
      const convergeMs = performance.now() - t1;
      const convergeSteps = await stepsAfter(log, catalogFromSeq, t1Wall);

      // --- 2. gateway kill ----------------------------------------------------
      const victim = gateways[0]!;
      const survivor = gateways[1]!;
      const moved = nodesOn(rt.state, victim.id);
      const shardsOnMoved = shardsOn(rt.state, new Set(moved));
      const killSeq = await log.lastSeq();
      // The floor of a gateway kill: the same agents' first registration and adoption, from the sim's start.
      const movedRegisteredMs = Math.max(...moved.map((id) => adoptedAt.get(id) ?? registerMs));
      ctx.progress(`kill -9 gateway ${victim.id} (${moved.length} agents, ${shardsOnMoved} shards)`);
      const t2 = performance.now();
      victim.child.proc.kill("SIGKILL");
      await victim.child.exited;
      let reregisteredMs = 0;
      await until(
        () => {
          const back = moved.filter((id) => onGatewayAdopted(rt.state, id, survivor.id, killSeq)).length;
          if (back === moved.length && reregisteredMs === 0) reregisteredMs = performance.now() - t2;
          const run = running(rt.state);
          ctx.progress(
            `${back}/${moved.length} agents re-registered and adopted; ${run}/${replicas} running`,
          );
          return back === moved.length && run >= replicas ? true : undefined;
        },
        waitMs,
        `the agents of ${victim.id} re-registered and adopted`,
        POLL_MS,
      );
      const recoveredMs = performance.now() - t2;
      const afterGatewayKill = await commandsAfter(log, killSeq);

      // --- 3. leader SIGTERM (handover), 4. leader kill -9 (takeover) --------
      const handover = await replaceLeader(ctx, rt, reconcilers, "SIGTERM", waitMs, () =>
        client.send((c) => c.PUT("/v1/catalog", { body: catalog(replicas + 1) })),
      );
      await untilRunning(ctx, rt, replicas + 1, waitMs);
      const takeover = await replaceLeader(ctx, rt, reconcilers, "SIGKILL", waitMs, () =>
        client.send((c) => c.PUT("/v1/catalog", { body: catalog(replicas + 2) })),
      );
      await untilRunning(ctx, rt, replicas + 2, waitMs);
      const extraRunningMs = performance.now() - takeover.t0;

      const sameAgentsFloor = {
        name: `the floor: first registration and adoption of the same ${moved.length} agents`,
        value: movedRegisteredMs,
      };
      const figures: Figure[] = [
        figure(`catalog (API) → ${replicas} replicas running (${nodes} agents)`, convergeMs, "ms", {
          raw: {
            name: `the floor: the catalog PUT + the engines' ${startDelayMs} ms start`,
            value: putMs + startDelayMs,
          },
          higherIsBetter: false,
        }),
        figure(`${nodes} agents registered and adopted (from the sim's start)`, registerMs, "ms", {}),
        figure(`gateway kill → ${moved.length} agents re-registered and adopted`, reregisteredMs, "ms", {
          raw: sameAgentsFloor,
          higherIsBetter: false,
        }),
        figure(`gateway kill → every replica running again`, recoveredMs, "ms", {
          raw: sameAgentsFloor,
          higherIsBetter: false,
        }),
        figure(
          "gateway kill: shards restarted (start or stop commands)",
          afterGatewayKill.start + afterGatewayKill.stop,
          "commands",
          { goal: "0", met: afterGatewayKill.start + afterGatewayKill.stop === 0 },
        ),
        figure("leader SIGTERM → a standby's first pass (handover)", handover.ms, "ms", {
          goal: "< 1000 ms",
          met: handover.ms < 1000,
        }),
        figure("leader kill -9 → the last standby's first pass (takeover)", takeover.ms, "ms", {
          raw: { name: "lease TTL (the floor: the lease must expire)", value: leaseTtlMs },
          higherIsBetter: false,
          goal: `≤ TTL + 1 s (${leaseTtlMs + 1000} ms)`,
          met: takeover.ms <= leaseTtlMs + 1000,
        }),
        figure("leader kill -9 → the extra replica running", extraRunningMs, "ms", {}),
      ];
      return {
        params: {
          nodes,
          replicas,
          profile: "1 shard × 4 GPUs",
          gateways: 2,
          reconcilers: 3,
          leaseTtlMs,
          startDelayMs,
        },
        figures,
        notes: [
          `catalog → running, where the ${fmt(convergeMs)} ms went (the log's own times from the PUT): ${convergeSteps}`,
          `gateway kill: ${moved.length} agents with ${shardsOnMoved} shards moved from ${victim.id} to ${survivor.id}; after the kill the log holds ${afterGatewayKill.passes} passes, ${afterGatewayKill.start} start, ${afterGatewayKill.stop} stop commands`,
          `leader SIGTERM: ${handover.leader} stopped, ${handover.successor} took the lease (${handover.acquiredAfter}) and passed; leader kill -9: ${takeover.leader} killed, ${takeover.successor} took the lease (${takeover.acquiredAfter}) and passed`,
        ],
      };
    } finally {
      await rt.stop();
      await api.close().catch(() => {});
      for (const c of children.reverse()) await c.stop("SIGTERM", 10_000);
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
      await server.close();
    }
  },
};

/**
 * Signals the leader the last pass names, makes work for a successor
 * (`afterSignal`, not awaited by the clock), and times the signal to the
 * first pass of another reconciler. The successor's log says whether the
 * key's deletion woke it ("release") or its poll found the key expired.
 */
async function replaceLeader(
  ctx: { progress(m: string): void },
  rt: ProjectionRuntime<FleetState>,
  reconcilers: Map<string, Child>,
  signal: "SIGTERM" | "SIGKILL",
  waitMs: number,
  afterSignal: () => Promise<unknown>,
): Promise<{ ms: number; t0: number; leader: string; successor: string; acquiredAfter: string }> {
  const leader = rt.state.replicas.lastPass?.leaderId ?? "";
  const leaderChild = reconcilers.get(leader);
  if (!leaderChild)
    throw new Error(`the last pass names leader "${leader}", not one of this run's live reconcilers`);
  reconcilers.delete(leader);
  ctx.progress(`${signal} to reconciler leader ${leader}`);
  const passesBefore = rt.state.replicas.passes;
  const t0 = performance.now();
  leaderChild.proc.kill(signal);
  await afterSignal();
  await until(
    () => {
      ctx.progress(`waiting for a standby's first pass (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
      const p = rt.state.replicas.lastPass;
      return p && reconcilers.has(p.leaderId) && rt.state.replicas.passes > passesBefore ? true : undefined;
    },
    waitMs,
    `a standby's first pass after ${signal} to ${leader}`,
    5,
  );
  const ms = performance.now() - t0;
  const successor = rt.state.replicas.lastPass?.leaderId ?? "";
  const exit = await leaderChild.exited;
  if (signal === "SIGTERM" && exit !== 0)
    throw new Error(`${leader} exited ${exit} after SIGTERM:\n${leaderChild.output()}`);
  const acquired = reconcilers
    .get(successor)
    ?.output()
    .split("\n")
    .findLast((l) => l.includes('"leading: lease acquired"'));
  const acquiredAfter = acquired ? (/"after":"(\w+)"/.exec(acquired)?.[1] ?? "?") : "?";
  return { ms, t0, leader, successor, acquiredAfter };
}

function nodesFrom(env: string | undefined): number | undefined {
  if (!env) return undefined;
  const n = Number(env);
  if (!Number.isInteger(n) || n < 4)
    throw new Error(`LLMGW_BENCH_CONVERGENCE_NODES: expected a whole number of nodes ≥ 4, got ${env}`);
  return n;
}

function catalog(replicas: number) {
  return {
    models: [
      {
        name: "llama-3.3-70b",
        replicas,
        profiles: [{ name: "tp4", gpusPerShard: 4, memoryPerGpu: "40GiB", gpuProduct: "H100" }],
      },
    ],
  };
}

async function untilRunning(
  ctx: { progress(m: string): void },
  rt: ProjectionRuntime<FleetState>,
  want: number,
  timeoutMs: number,
) {
  await until(
    () => {
      const n = running(rt.state);
      ctx.progress(`${n}/${want} replicas running`);
      return n >= want ? true : undefined;
    },
    timeoutMs,
    `${want} replicas running`,
    POLL_MS,
  );
}

/** Nodes with an open session whose registration the reconciler handled (adopted). */
function adoptedIds(s: FleetState): string[] {
  return s.inventory.nodes
    .values()
    .filter((n) => n.session !== null && n.session.adoptionSeq > 0)
    .map((n) => n.nodeId);
}

function adoptedNodes(s: FleetState): number {
  return s.inventory.nodes.values().filter((n) => n.session !== null && n.session.adoptionSeq > 0).length;
}

function running(s: FleetState): number {
  return s.replicas.replicas.values().filter((r) => r.phase === "running").length;
}

function nodesOn(s: FleetState, gatewayId: string): string[] {
  return s.inventory.nodes
    .values()
    .filter((n) => n.session?.gatewayId === gatewayId)
    .map((n) => n.nodeId);
}

function shardsOn(s: FleetState, nodes: Set<string>): number {
  let n = 0;
  for (const r of s.replicas.replicas.values()) {
    for (const sh of r.shards) if (nodes.has(sh.nodeId)) n++;
  }
  return n;
}

/** A session on `gatewayId`, opened after `afterSeq`, whose running shards were adopted. */
function onGatewayAdopted(s: FleetState, nodeId: string, gatewayId: string, afterSeq: number): boolean {
  const sess = s.inventory.nodes.get(nodeId)?.session;
  return !!sess && sess.gatewayId === gatewayId && sess.openedSeq > afterSeq && sess.adoptionSeq > 0;
}

/**
 * Where the time from the catalog PUT (wall clock `t0Wall`) to every
 * replica running went, from the times the log stored each step: the
 * catalog, each pass carrying start commands, the agents' starting reports
 * (the commands relayed and taken) and their running reports.
 */
async function stepsAfter(log: Log, fromSeq: number, t0Wall: number): Promise<string> {
  const at = (ms: number) => `+${Math.round(ms - t0Wall)}`;
  const passes: string[] = [];
  // Per shard: when the pass carrying its start, its starting and its running report were stored.
  const commandAt = new Map<string, number>();
  const startingAt = new Map<string, number>();
  const runningAt = new Map<string, number>();
  const others = new Map<string, number>();
  let catalogAt = 0;
  const untilSeq = await log.lastSeq();
  for await (const r of log.read({ fromSeq, untilSeq })) {
    const b = r.event.body;
    if (b.case === "catalogChanged") catalogAt = r.timeMs;
    else if (b.case === "reconcilePass") {
      let starts = 0;
      for (const c of b.value.commands) {
        if (c.action.case !== "start") continue;
        starts++;
        if (!commandAt.has(c.action.value.shardId)) commandAt.set(c.action.value.shardId, r.timeMs);
      }
      if (b.value.decisions.length > 0) {
        const kinds = new Map<string, number>();
        for (const d of b.value.decisions)
          kinds.set(d.kind.case ?? "?", (kinds.get(d.kind.case ?? "?") ?? 0) + 1);
        const listed = [...kinds].map(([k, n]) => `${n} ${k}`).join(", ");
        passes.push(
          `${at(r.timeMs)} (${b.value.trigger}: ${listed}; ${starts} starts${b.value.truncated ? "; truncated" : ""})`,
        );
      }
    } else if (b.case === "shardStatus") {
      const st = b.value.status?.state;
      const shard = b.value.status?.shardId ?? "";
      if (st === ShardStatus_State.STARTING && !startingAt.has(shard)) startingAt.set(shard, r.timeMs);
      else if (st === ShardStatus_State.RUNNING && !runningAt.has(shard)) runningAt.set(shard, r.timeMs);
    } else others.set(b.case ?? "?", (others.get(b.case ?? "?") ?? 0) + 1);
  }
  const span = (xs: number[]) =>
    xs.length === 0 ? "none" : `${at(Math.min(...xs))} … ${at(Math.max(...xs))}`;
  /** Per shard, from one step to the next: median and max. */
  const gap = (from: Map<string, number>, to: Map<string, number>) => {
    const d = [...to]
      .flatMap(([shard, t]) => {
        const f = from.get(shard);
        return f === undefined ? [] : [t - f];
      })
      .sort((a, b) => a - b);
    return d.length === 0
      ? "none"
      : `median ${Math.round(d[Math.floor(d.length / 2)]!)}, max ${Math.round(d.at(-1)!)} ms`;
  };
  return [
    `catalog stored ${at(catalogAt)} ms`,
    `passes ${passes.slice(0, 6).join(", ")}${passes.length > 6 ? `, … (${passes.length})` : ""}`,
    `${startingAt.size} starting reports ${span([...startingAt.values()])} (after their start's pass: ${gap(commandAt, startingAt)})`,
    `${runningAt.size} running reports ${span([...runningAt.values()])} (after their starting report: ${gap(startingAt, runningAt)})`,
    `other events: ${[...others].map(([k, n]) => `${n} ${k}`).join(", ") || "none"}`,
  ].join("; ");
}

/** Start and stop commands in the passes after `afterSeq`. */
async function commandsAfter(log: Log, afterSeq: number) {
  const out = { passes: 0, start: 0, stop: 0 };
  for await (const r of log.read({ fromSeq: afterSeq + 1, subjects: [log.subjects.reconciler] })) {
    if (r.event.body.case !== "reconcilePass") continue;
    out.passes++;
    for (const c of r.event.body.value.commands) {
      if (c.action.case === "start") out.start++;
      else if (c.action.case === "stop" || c.action.case === "drain") out.stop++;
    }
  }
  return out;
}
