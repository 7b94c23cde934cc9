/**
 * Fan-in: many concurrent agent streams on one gateway process, each
 * heartbeating every 5 s. Measured on the gateway (a child process, from
 * /proc): CPU and RSS per stream at steady state, events written per
 * heartbeat (0: a heartbeat that changes nothing is not an event), the
 * delivery latency of commands from the append of a ReconcilePass to the
 * agents over paced passes of a few commands (steady operation), and how
 * long one pass of 2,000 commands takes to reach its last agent (a burst:
 * throughput, not latency). The raw reference is a bare Connect bidi server (same HTTP/2
 * setup, same streams and heartbeats, pushing the same number of messages).
 *
 * The gateway's agents are the real node agent (`NodeAgent`, the code a GPU
 * machine runs) on simulated GPUs and engines: `SimFleet`s in child
 * processes (one per 2,500 agents; bench/support/node-agents.ts), so this
 * process holds only the measurement; 100 agents connect at once in all,
 * the next as soon as one registered. A command's delivery is timed to the agent's answer to
 * it (a drain of a shard it does not run, refused at once). The bare
 * server's agents are light clients (bench/support/agents.ts: the same bytes
 * on the wire, nothing else), since the reference is the transport's limit.
 * Both over mTLS as in production: one TLS connection and one client
 * certificate per agent (its CN is its node id), issued in this process by
 * the CA `llmgw certs` creates; the bare server verifies the same
 * certificates. Each stream is a file descriptor on both sides: the run
 * checks the limit first (`llmgw bench` raises its soft limit to the hard
 * one).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { openFileLimit } from "../../src/connection-guard/fd-limit.js";
import { EventSchema, Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import { type Log, openLog } from "../../src/log/index.js";
import { createCerts } from "../../src/sim/certs/create.js";
import { certsLayout } from "../../src/sim/certs/layout.js";
import { startServer, uniqueStream } from "../../test/harness/nats.js";
import { type Child, sleep, until } from "../../test/harness/proc.js";
import { type AgentTls, ConnectionPool, LightAgent } from "../support/agents.js";
import { startBareConnectServer } from "../support/bare-connect.js";
import { type BenchGateway, type GatewayTlsFiles, startGatewayProcess } from "../support/gateway.js";
import { type NodeAgentChildren, startNodeAgentChildren } from "../support/node-agents.js";
import { issueNodeCerts } from "../support/node-certs.js";
import { describeGc, gcTotals, slowestPass, watchOwnEventLoop } from "../support/pauses.js";
import { cpuCores, type ProcSample, sampleProc } from "../support/proc-sample.js";
import { type Figure, figure, percentile, type Scenario } from "../support/result.js";

const HEARTBEAT_MS = 5_000;
/** Plaintext only: over mTLS each agent has its own connection. */
const STREAMS_PER_CONNECTION = 250;
/** Agents connected (and TLS handshakes started) at once, before waiting for their registrations. */
const CONNECT_BATCH = 100;
/** Descriptors the benchmark process needs besides one per stream. */
const SPARE_FDS = 512;
/** Commands in the burst pass (and messages pushed at once by the raw server). */
const MAX_COMMANDS = 2_000;
/**
 * Paced passes: what a reconciler does in steady operation (a few commands
 * per pass, passes a fraction of a second apart). The delivery latency goal
 * is about these; the burst measures how long a pass of 2,000 commands takes
 * to reach its last agent, which is throughput, not latency.
 */
const PACED_PASSES = 40;
const PACED_PASSES_QUICK = 4;
const PACED_COMMANDS = 10;
const PACED_GAP_MS = 200;

interface Measured {
  cpuCoresPerStream: number;
  rssKbPerStream: number;
  rssMb: number;
  eventsPerHeartbeat: number;
  latencyP50: number;
  latencyP99: number;
  /** From the append of the burst pass (or the raw push) to its last command delivered. */
  burstLastMs: number;
  /**
   * Commands never delivered: an agent that re-registered under load holds
   * a newer session than the one the bench read, and a command for an old
   * session is dropped by rule.
   */
  lost: number;
  /** Of the nodes of lost commands, how many registered again after the sessions were read. */
  lostExplained: number;
  commands: number;
  connectS: number;
  /** The node agents' side (gateway only): the benchmark process's RSS with them all registered. */
  agentsRssMb?: number;
  /** What explains the tail of the paced passes (gateway only). */
  tail?: string;
}

export const fanIn: Scenario = {
  name: "fan-in",
  describe: "concurrent agent streams on one gateway at a 5 s heartbeat vs a bare Connect server",
  async run(ctx) {
    const scales = scalesFrom(process.env.LLMGW_BENCH_FANIN_STREAMS) ?? (ctx.quick ? [40] : [1_000, 10_000]);
    const windowMs = ctx.quick ? 1_000 : 15_000;
    const paced = ctx.quick ? PACED_PASSES_QUICK : PACED_PASSES;
    const figures: Figure[] = [];
    const notes: string[] = [];
    // LLMGW_BENCH_FANIN_REFERENCE=0: the gateway only (a long run at 10,000 mTLS streams on a busy machine).
    const withReference = process.env.LLMGW_BENCH_FANIN_REFERENCE !== "0";
    const most = Math.max(...scales);
    const fds = openFileLimit();
    if (fds !== undefined && fds < most + SPARE_FDS)
      throw new Error(
        `${most} streams over mTLS need ${most + SPARE_FDS} file descriptors and the limit is ${fds}: raise it (ulimit -n) or set LLMGW_BENCH_FANIN_STREAMS lower`,
      );
    const dir = mkdtempSync(join(tmpdir(), "llmgw-bench-certs-"));
    try {
      ctx.progress(`certificates for ${most} nodes`);
      await createCerts({ out: dir, nodes: [] });
      const files = certsLayout(dir);
      const t = performance.now();
      const ids = Array.from({ length: most }, (_, i) => nodeName(i));
      const tls = {
        files: { cert: files.gatewayCert, key: files.gatewayKey, clientCa: files.ca },
        caFile: files.ca,
        caKeyFile: files.caKey,
        agents: {
          ca: readFileSync(files.ca),
          certs: issueNodeCerts(readFileSync(files.ca), readFileSync(files.caKey), ids),
        },
      };
      notes.push(
        `${most.toLocaleString("en")} client certificates issued in ${((performance.now() - t) / 1000).toFixed(1)} s`,
      );
      for (const n of scales) {
        const gw = await measureGateway(n, windowMs, paced, tls, (m) =>
          ctx.progress(`gateway, ${n} streams: ${m}`),
        );
        const raw = withReference
          ? await measureEcho(n, windowMs, paced, tls, (m) =>
              ctx.progress(`bare Connect server, ${n} streams: ${m}`),
            )
          : undefined;
        const ref = (name: string, value: (m: Measured) => number) =>
          raw ? { raw: { name, value: value(raw) } } : {};
        const at = `${n.toLocaleString("en")} streams`;
        figures.push(
          figure(`${at}: gateway CPU per 1,000 streams`, gw.cpuCoresPerStream * 1e6, "millicores", {
            ...ref("bare Connect server", (r) => r.cpuCoresPerStream * 1e6),
            higherIsBetter: false,
          }),
          figure(`${at}: gateway RSS per stream`, gw.rssKbPerStream, "KiB", {
            ...ref("bare Connect server", (r) => r.rssKbPerStream),
            higherIsBetter: false,
          }),
          figure(`${at}: events written per heartbeat`, gw.eventsPerHeartbeat, "events", {
            goal: "0",
            met: gw.eventsPerHeartbeat === 0,
          }),
          figure(`${at}: command delivery p50`, gw.latencyP50, "ms", {
            ...ref("bare Connect server push", (r) => r.latencyP50),
            higherIsBetter: false,
          }),
          figure(`${at}: command delivery p99`, gw.latencyP99, "ms", {
            ...ref("bare Connect server push", (r) => r.latencyP99),
            higherIsBetter: false,
            ...(n >= 5_000 ? { goal: "< 100 ms", met: gw.latencyP99 < 100 } : {}),
          }),
          figure(
            `${at}: a pass of ${gw.commands.toLocaleString("en")} commands, last delivered`,
            gw.burstLastMs,
            "ms",
            {
              ...ref("bare Connect server push to as many", (r) => r.burstLastMs),
              higherIsBetter: false,
            },
          ),
        );
        if (gw.tail) notes.push(`${at}: ${gw.tail}`);
        notes.push(
          `${at}: connected and registered in ${gw.connectS.toFixed(1)} s (${agentKind() === "node" ? `node agents in ${agentChildren(n)} child process${agentChildren(n) === 1 ? "" : "es"}, ${CONNECT_BATCH} connecting at once in all, the next as soon as one registered` : "light agents"}; the bare server's light agents ${raw ? `${raw.connectS.toFixed(1)} s` : "not run"}); ${agentKind() === "node" ? "the agents' processes' RSS" : "the benchmark process's RSS"} with the agents registered ${gw.agentsRssMb?.toFixed(0)} MiB; gateway RSS ${gw.rssMb.toFixed(0)} MiB (bare ${raw ? `${raw.rssMb.toFixed(0)} MiB` : "not run"}); delivery latency over ${paced} passes of ${PACED_COMMANDS} commands ${PACED_GAP_MS} ms apart${gw.lost > 0 ? `; ${gw.lost} commands not delivered (${gw.lostExplained} of their agents had registered again, so the commands named an old session)` : ""}`,
        );
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    return {
      params: {
        scales,
        heartbeatMs: HEARTBEAT_MS,
        steadyWindowMs: windowMs,
        transport: "mTLS, one connection per agent",
        agents: agentKind() === "node" ? "the real node agent (SimFleet)" : "light clients",
        pacedPasses: paced,
        pacedCommands: PACED_COMMANDS,
        pacedGapMs: PACED_GAP_MS,
        burstCommands: MAX_COMMANDS,
      },
      figures,
      notes,
    };
  },
};

/**
 * Connects n agents in batches; each heartbeats every 5 s from its
 * registration on, at an offset that spreads the fleet over the interval
 * (a connect of 10,000 mTLS streams on a busy machine takes minutes, longer
 * than the gateway lets a stream stay silent).
 */
async function connectAgents(
  url: string,
  n: number,
  tls: AgentTls,
  onCommand: (id: string, atMs: number) => void,
  progress: (m: string) => void,
): Promise<{ agents: LightAgent[]; pool: ConnectionPool; timers: NodeJS.Timeout[] }> {
  const pool = new ConnectionPool(url, STREAMS_PER_CONNECTION, tls);
  const agents: LightAgent[] = [];
  const timers: NodeJS.Timeout[] = [];
  const t0 = performance.now();
  for (let from = 0; from < n; from += CONNECT_BATCH) {
    const batch: LightAgent[] = [];
    for (let i = from; i < Math.min(n, from + CONNECT_BATCH); i++) {
      const a = new LightAgent(pool.next(nodeName(i)), nodeName(i), {
        onMessage: (m) => {
          if (m.msg.case === "drain" || m.msg.case === "start" || m.msg.case === "stop")
            onCommand(m.msg.value.commandId, performance.timeOrigin + performance.now());
        },
      });
      batch.push(a);
      const start = setTimeout(
        () => {
          a.heartbeat();
          timers.push(setInterval(() => a.heartbeat(), HEARTBEAT_MS));
        },
        (i / n) * HEARTBEAT_MS,
      );
      timers.push(start);
    }
    // Registrations go out in batches so the first ones do not time out behind the rest.
    await Promise.all(batch.map((x) => x.registered));
    agents.push(...batch);
    progress(
      `${agents.length}/${n} connected and registered (${((performance.now() - t0) / 1000).toFixed(0)} s)`,
    );
  }
  return { agents, pool, timers };
}

function disconnect(c: { agents: LightAgent[]; pool: ConnectionPool; timers: NodeJS.Timeout[] }): void {
  for (const t of c.timers) clearInterval(t);
  for (const a of c.agents) a.abort();
  c.pool.close();
}

interface FanInTls {
  files: GatewayTlsFiles;
  agents: AgentTls;
  /** The CA's certificate and key files: the node agents' children issue their own certificates from them. */
  caFile: string;
  caKeyFile: string;
}

async function measureGateway(
  n: number,
  windowMs: number,
  paced: number,
  tls: FanInTls,
  progress: (m: string) => void,
): Promise<Measured> {
  const server = await startServer();
  const stream = uniqueStream("FANIN");
  let log: Log | undefined;
  let gw: BenchGateway | undefined;
  const received = new Map<string, number>();
  let fleet: NodeAgentChildren | undefined;
  let light: Awaited<ReturnType<typeof connectAgents>> | undefined;
  try {
    log = await openLog({ url: server.url, clientName: "bench-fanin", name: stream });
    gw = await startGatewayProcess({
      nats: server.url,
      stream,
      extraArgs: [
        ...["--heartbeat-timeout", "30000", "--registration-timeout", "60000"],
        ...["--metrics-listen", "127.0.0.1:0"],
        // A connect of thousands of mTLS streams on a busy machine is not a flood.
        ...["--handshake-timeout", "60000", "--first-stream-timeout", "60000"],
        // One connection per agent, all from loopback.
        ...[
          "--max-connections",
          String(n + SPARE_FDS),
          "--max-connections-per-address",
          String(n + SPARE_FDS),
        ],
      ],
      tls: tls.files,
    });
    const base = sampleProc(gw.child.pid);
    let t = performance.now();
    const onCommand = (id: string, at: number) => received.set(id, at);
    if (agentKind() === "light") light = await connectAgents(gw.url, n, tls.agents, onCommand, progress);
    else
      fleet = await startNodeAgentChildren({
        url: gw.url,
        nodeIds: Array.from({ length: n }, (_, i) => nodeName(i)),
        children: agentChildren(n),
        heartbeatMs: HEARTBEAT_MS,
        window: CONNECT_BATCH,
        caFile: tls.caFile,
        caKeyFile: tls.caKeyFile,
        onCommand,
        progress,
      });
    const connectS = (performance.now() - t) / 1000;
    const agentsRssMb = fleet ? await fleet.rssMb() : process.memoryUsage().rss / 2 ** 20;
    progress("settling");
    await sleep(HEARTBEAT_MS);
    const seq0 = await log.lastSeq();
    const s0 = sampleProc(gw.child.pid);
    progress(`steady state for ${windowMs / 1000} s`);
    await sleep(windowMs);
    const s1 = sampleProc(gw.child.pid);
    const seq1 = await log.lastSeq();

    // The sessions, from the log, and one command per session in one pass.
    const sessions = new Map<string, string>();
    for await (const r of log.read({ untilSeq: seq1 })) {
      const b = r.event.body;
      if (b.case === "sessionOpened") sessions.set(b.value.nodeId, b.value.sessionId);
    }
    const all = [...sessions];
    const passOf = (id: string, cmds: Array<[string, string, string]>) =>
      create(EventSchema, {
        id,
        timeUnixMs: BigInt(Date.now()),
        writer: { kind: Writer_Kind.RECONCILER, id: "bench" },
        body: {
          case: "reconcilePass",
          value: {
            commands: cmds.map(([commandId, nodeId, sessionId]) => ({
              commandId,
              nodeId,
              sessionId,
              attempt: 1,
              action: { case: "drain" as const, value: { commandId, shardId: "s", deadlineUnixMs: 0n } },
            })),
          },
        },
      });
    const sent = new Map<string, number>();
    const nodeOf = new Map<string, string>();

    progress(`${paced} passes of ${PACED_COMMANDS} commands`);
    const metricsUrl = gw.metricsUrl;
    if (!metricsUrl) throw new Error("the gateway did not say where its metrics are");
    const gc0 = await gcTotals(metricsUrl);
    const loop = watchOwnEventLoop();
    for (let p = 0; p < paced; p++) {
      const cmds: Array<[string, string, string]> = [];
      for (let j = 0; j < PACED_COMMANDS; j++) {
        const [nodeId, sessionId] = all[(p * PACED_COMMANDS + j) % all.length] as [string, string];
        cmds.push([`p-${p}-${j}`, nodeId, sessionId]);
        nodeOf.set(`p-${p}-${j}`, nodeId);
      }
      const at = performance.timeOrigin + performance.now();
      for (const [id] of cmds) sent.set(id, at);
      await log.append(passOf(`bench-paced-${n}-${p}`, cmds));
      await sleep(PACED_GAP_MS);
    }
    const pacedLost = await deliveredOrLost([...sent.keys()], received, "paced commands");
    const ownLoop = loop.stop();
    const gc1 = await gcTotals(metricsUrl);
    const passes = Array.from({ length: paced }, (_, p) =>
      Array.from({ length: PACED_COMMANDS }, (_, j) => {
        const id = `p-${p}-${j}`;
        return (received.get(id) ?? Number.NaN) - (sent.get(id) ?? 0);
      }).filter((x) => !Number.isNaN(x)),
    );
    const slow = slowestPass(passes, 20);
    const tail = `slowest paced pass ${slow.ms.toFixed(0)} ms (pass ${slow.index + 1} of ${paced}; ${slow.over} over 20 ms); during the paced passes the gateway made ${describeGc(gc0, gc1)}; the benchmark's own event-loop delay p99 ${ownLoop.p99Ms.toFixed(0)} ms, max ${ownLoop.maxMs.toFixed(0)} ms`;
    const lat = [...sent].flatMap(([id, at]) => {
      const got = received.get(id);
      return got === undefined ? [] : [got - at];
    });

    const targets = all.slice(0, MAX_COMMANDS);
    progress(`a pass with ${targets.length} commands`);
    t = performance.timeOrigin + performance.now();
    await log.append(
      passOf(
        `bench-burst-${n}`,
        targets.map(([nodeId, sessionId], i) => [`c-${i}`, nodeId, sessionId]),
      ),
    );
    const burstIds = targets.map((_, i) => `c-${i}`);
    for (const [i, [nodeId]] of targets.entries()) nodeOf.set(`c-${i}`, nodeId);
    const burstLost = await deliveredOrLost(burstIds, received, "the burst's commands");
    const burstLastMs = Math.max(...burstIds.map((id) => (received.get(id) ?? t) - t));
    // A lost command is explained when its agent registered again after the sessions were read.
    const lostNodes = new Set(
      [...sent.keys(), ...burstIds].filter((id) => !received.has(id)).map((id) => nodeOf.get(id)),
    );
    let explained = 0;
    if (lostNodes.size > 0)
      for await (const r of log.read({ fromSeq: seq1 + 1 })) {
        const b = r.event.body;
        if (b.case === "sessionOpened" && lostNodes.delete(b.value.nodeId)) explained++;
        if (lostNodes.size === 0) break;
      }
    return {
      ...steady(base, s0, s1, n),
      eventsPerHeartbeat: (seq1 - seq0) / (n * (windowMs / HEARTBEAT_MS)),
      latencyP50: percentile(lat, 50),
      latencyP99: percentile(lat, 99),
      burstLastMs,
      lost: pacedLost + burstLost,
      lostExplained: explained,
      commands: targets.length,
      connectS,
      agentsRssMb,
      tail,
    };
  } catch (err) {
    if (!gw) throw err;
    const tail = gw.child.output().split("\n").slice(-40).join("\n");
    const metrics =
      gw.metricsUrl === undefined
        ? "(it did not say where its metrics are)"
        : await fetch(gw.metricsUrl)
            .then((r) => r.text())
            .then((t) =>
              t
                .split("\n")
                .filter((l) => /^llmgw_gateway_(commands|streams|sessions|disconnect)/.test(l))
                .join("\n"),
            )
            .catch((e: unknown) => `(no metrics: ${(e as Error).message})`);
    throw new Error(
      `${(err as Error).message}\nthe gateway's metrics:\n${metrics}\nthe gateway's last lines:\n${tail}`,
      { cause: err },
    );
  } finally {
    await fleet?.stop();
    if (light) disconnect(light);
    await gw?.child.stop("SIGTERM", 15_000);
    await log?.jsm.streams.delete(stream).catch(() => {});
    await log?.close();
    await server.close();
  }
}

async function measureEcho(
  n: number,
  windowMs: number,
  paced: number,
  tls: FanInTls,
  progress: (m: string) => void,
): Promise<Measured> {
  const server = await startBareConnectServer(tls.files);
  const child: Child = server.child;
  const received = new Map<string, number>();
  let conn: Awaited<ReturnType<typeof connectAgents>> | undefined;
  try {
    const base = sampleProc(child.pid);
    let t = performance.now();
    conn = await connectAgents(server.url, n, tls.agents, (id, at) => received.set(id, at), progress);
    const connectS = (performance.now() - t) / 1000;
    await sleep(HEARTBEAT_MS);
    const s0 = sampleProc(child.pid);
    progress(`steady state for ${windowMs / 1000} s`);
    await sleep(windowMs);
    const s1 = sampleProc(child.pid);
    progress(`${paced} pushes to ${PACED_COMMANDS} streams`);
    const sent = new Map<string, number>();
    for (let p = 0; p < paced; p++) {
      const at = performance.timeOrigin + performance.now();
      for (let j = 0; j < PACED_COMMANDS; j++) sent.set(`p${p}-${j}`, at);
      child.proc.send({ broadcast: `p${p}`, count: PACED_COMMANDS, offset: (p * PACED_COMMANDS) % n });
      await sleep(PACED_GAP_MS);
    }
    await until(
      () => ([...sent.keys()].every((id) => received.has(id)) ? true : undefined),
      30_000,
      "every paced push delivered",
    );
    const lat = [...sent].map(([id, at]) => (received.get(id) ?? at) - at);

    const count = Math.min(n, MAX_COMMANDS);
    t = performance.timeOrigin + performance.now();
    child.proc.send({ broadcast: "raw", count });
    await until(
      () => ([...Array(count).keys()].every((j) => received.has(`raw-${j}`)) ? true : undefined),
      30_000,
      "every push delivered",
    );
    const burstLastMs = Math.max(...[...Array(count).keys()].map((j) => (received.get(`raw-${j}`) ?? t) - t));
    return {
      ...steady(base, s0, s1, n),
      eventsPerHeartbeat: 0,
      latencyP50: percentile(lat, 50),
      latencyP99: percentile(lat, 99),
      burstLastMs,
      lost: 0,
      lostExplained: 0,
      commands: count,
      connectS,
    };
  } finally {
    if (conn) disconnect(conn);
    await child.stop();
  }
}

/**
 * The gateway's agents: the real node agent (default), or with
 * LLMGW_BENCH_FANIN_AGENTS=light the light clients, as before the simulator
 * ran the real agent (what the figures were measured with until then).
 */
function agentKind(): "node" | "light" {
  const kind = process.env.LLMGW_BENCH_FANIN_AGENTS ?? "node";
  if (kind !== "node" && kind !== "light")
    throw new Error(`LLMGW_BENCH_FANIN_AGENTS: expected node or light, got ${kind}`);
  return kind;
}

/**
 * Child processes the node agents are split over (LLMGW_BENCH_FANIN_CHILDREN;
 * default one per 2,500 agents, at least one): each holds its share, so no
 * process holds thousands of Connect clients' event loop work alone.
 */
function agentChildren(n: number): number {
  const env = process.env.LLMGW_BENCH_FANIN_CHILDREN;
  if (env === undefined || env === "") return Math.max(1, Math.ceil(n / 2_500));
  const k = Number(env);
  if (!Number.isInteger(k) || k < 1 || k > 64)
    throw new Error(`LLMGW_BENCH_FANIN_CHILDREN: expected a number of processes from 1 to 64, got ${env}`);
  return k;
}

function nodeName(i: number): string {
  return `gpu-${String(i).padStart(5, "0")}`;
}

/** `LLMGW_BENCH_FANIN_STREAMS=5000` or `1000,5000`: other numbers of streams (to look into one). */
function scalesFrom(env: string | undefined): number[] | undefined {
  if (!env) return undefined;
  const scales = env.split(",").map((x) => Number(x.trim()));
  if (scales.some((n) => !Number.isInteger(n) || n < 10))
    throw new Error(
      `LLMGW_BENCH_FANIN_STREAMS: expected numbers of streams ≥ 10 separated by commas, got ${env}`,
    );
  return scales;
}

/**
 * Waits up to 30 s for every id; returns how many never came. More than 1 %
 * lost is a failure of the run, not a figure.
 */
async function deliveredOrLost(ids: string[], received: Map<string, number>, what: string): Promise<number> {
  const end = performance.now() + 30_000;
  let missing = ids.length;
  while (performance.now() < end) {
    missing = ids.reduce((m, id) => m + (received.has(id) ? 0 : 1), 0);
    if (missing === 0) return 0;
    await sleep(50);
  }
  if (missing > ids.length / 100)
    throw new Error(`${missing} of ${ids.length} ${what} not delivered after 30 s`);
  return missing;
}

function steady(base: ProcSample, s0: ProcSample, s1: ProcSample, n: number) {
  return {
    cpuCoresPerStream: cpuCores(s0, s1) / n,
    rssKbPerStream: Math.max(0, s1.rssBytes - base.rssBytes) / 1024 / n,
    rssMb: s1.rssBytes / 2 ** 20,
  };
}
