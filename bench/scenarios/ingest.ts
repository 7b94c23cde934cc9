/**
 * Ingest: shard-status events from agents through a gateway (a child
 * process) into the log, against raw pipelined JetStream publishes of
 * same-sized messages from one client, on the same nats-server.
 *
 * The gateway runs twice: with `--stream-window 1` (one event in flight per
 * stream, how the gateway worked before its publishes were pipelined) and
 * with the default window, so the before/after of that change is measured
 * in every run. The figures compared with each other (raw publish, the log's
 * publisher, the bare server, the default gateway) are medians of
 * TIMED_RUNS runs each.
 */
import { randomUUID } from "node:crypto";
import os from "node:os";
import { create } from "@bufbuild/protobuf";
import { jetstream } from "@nats-io/jetstream";
import { encodeEvent } from "../../src/codec/index.js";
import { DEFAULT_PUBLISH_WINDOW } from "../../src/gateway/index.js";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { EventSchema, Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import { AckedPublisher } from "../../src/log/acked-publish.js";
import { connectNats, type Log, openLog } from "../../src/log/index.js";
import { startServer, uniqueStream } from "../../test/harness/nats.js";
import { sleep } from "../../test/harness/proc.js";
import { ConnectionPool, LightAgent } from "../support/agents.js";
import { startBareConnectServer } from "../support/bare-connect.js";
import { type BenchGateway, startGatewayProcess } from "../support/gateway.js";
import { sampleProc } from "../support/proc-sample.js";
import { figure, type Scenario } from "../support/result.js";

/** Messages an agent sends ahead of its acks (more than the gateway's stream window). */
const AGENT_AHEAD = 64;
/** Publishes in flight from the log's publisher: the gateway's default window. */
const PUBLISH_DEPTH = DEFAULT_PUBLISH_WINDOW;
/** Publishes in flight tried for the raw js.publish reference (the faster is taken). */
const RAW_DEPTHS = [...new Set([256, PUBLISH_DEPTH])];
/**
 * Untimed events before a part is first timed (the raw publishers, the bare
 * server, each gateway process), the same for every part. The figures are
 * a long-running process's: a gateway's CPU per event still fell from its
 * first to its fifth 40,000 events (its code optimised, its heap sized:
 * 46–58 µs, then 18–26 µs from there on), and 40,000 measured part of that.
 */
const WARM_UP = 200_000;
/** Untimed events before a later run on a process already warmed up (new agents, new sessions). */
const WARM_AGAIN = 2_000;
/** Untimed events before each part in --quick, which checks the steps, not the figures. */
const WARM_AGAIN_QUICK = 500;
/** Agents of the latency-bound variant. */
const FEW = 4;
/**
 * Timed runs of each part the gateway is compared with, and of the gateway
 * itself; each figure is their median. On two cores shared by the agents,
 * the part and nats-server, one run's CPU per event depends on how the
 * three happen to take turns (how many messages each read finds): single
 * runs of the same code measured 23 and 33 µs.
 */
const TIMED_RUNS = 5;

export const ingest: Scenario = {
  name: "ingest",
  describe: "agent shard-status events through a gateway into the log vs raw JetStream publish",
  async run(ctx) {
    const events = ctx.quick ? 500 : 40_000;
    const warmUp = ctx.quick ? WARM_AGAIN_QUICK : WARM_UP;
    const agents = ctx.quick ? 10 : 50;
    const server = await startServer();
    try {
      ctx.progress("raw pipelined publish");
      const runs = ctx.quick ? 1 : TIMED_RUNS;
      // The raw reference at its best: js.publish is timed at each depth and
      // the faster is the reference (at 1,024 in flight it measured slower
      // than at 256 in some runs: a request and its timer per publish).
      const rawAt: Array<Awaited<ReturnType<typeof rawPublish>> & { depth: number }> = [];
      for (const depth of RAW_DEPTHS) {
        ctx.progress(`raw pipelined publish, ${depth} in flight`);
        rawAt.push({
          depth,
          ...(await rawPublish(server.url, server.pid, events, warmUp, "js.publish", runs, depth)),
        });
      }
      const raw = rawAt.reduce((best, r) => (r.rate > best.rate ? r : best));
      ctx.progress("the log's publish path alone");
      const logPath = await rawPublish(server.url, server.pid, events, warmUp, "log", runs, PUBLISH_DEPTH);
      const bare = await throughBareConnect(agents, events, warmUp, runs, (m) =>
        ctx.progress(`bare Connect server: ${m}`),
      );
      // Runs with the same gateway flags share the gateway processes (a
      // spawn costs seconds); each run's agents are other nodes.
      const fewEvents = ctx.quick ? 250 : 5_000;
      const window1 = await GatewaysOnLog.open(server.url, 1, warmUp, ["--stream-window", "1"]);
      let before: Through;
      let fewBefore: Through;
      try {
        before = await throughGateway(window1, server.pid, agents, events, "a", (m) =>
          ctx.progress(`gateway, stream window 1: ${m}`),
        );
        // Few agents: what one event in flight per stream cost (a round trip per event).
        fewBefore = await throughGateway(window1, server.pid, FEW, fewEvents, "b", (m) =>
          ctx.progress(`${FEW} agents, stream window 1: ${m}`),
        );
      } finally {
        await window1.close();
      }
      const one = await GatewaysOnLog.open(server.url, 1, warmUp, []);
      let perMessageAcks: Through;
      let after: Through;
      let fewAfter: Through;
      try {
        after = await throughGateway(
          one,
          server.pid,
          agents,
          events,
          "c",
          (m) => ctx.progress(`gateway, stream window 32: ${m}`),
          { runs },
        );
        perMessageAcks = await throughGateway(
          one,
          server.pid,
          agents,
          events,
          "d",
          (m) => ctx.progress(`gateway, one ack per message: ${m}`),
          { cumulativeAcks: false },
        );
        fewAfter = await throughGateway(one, server.pid, FEW, fewEvents, "e", (m) =>
          ctx.progress(`${FEW} agents, stream window 32: ${m}`),
        );
      } finally {
        await one.close();
      }
      const pair = await GatewaysOnLog.open(server.url, 2, warmUp, []);
      let two: Through;
      try {
        two = await throughGateway(pair, server.pid, agents, events, "f", (m) =>
          ctx.progress(`two gateways on one log: ${m}`),
        );
      } finally {
        await pair.close();
      }
      // Every stream through Connect's handler, as before the gateway framed binary streams itself.
      const connectOnly = await GatewaysOnLog.open(server.url, 1, warmUp, ["--connect-handler-only"]);
      let viaConnect: Through;
      try {
        viaConnect = await throughGateway(connectOnly, server.pid, agents, events, "g", (m) =>
          ctx.progress(`gateway, Connect's handler only: ${m}`),
        );
      } finally {
        await connectOnly.close();
      }
      const rawRef = {
        name: `pipelined js.publish, one client, ${raw.depth} in flight`,
        value: raw.rate,
      };
      // The sum of the gateway's parts: what a bare Connect server that acks
      // spends per event plus what the log's publish path spends per event.
      const partsUs = bare.cpu.server + logPath.cpu.client;
      return {
        params: { events, agents, agentAhead: AGENT_AHEAD, eventBytes: raw.bytes },
        figures: [
          figure("events/s through the gateway", after.rate, "events/s", {
            raw: rawRef,
            goal: "ratio ≥ 0.6",
            met: after.rate / raw.rate >= 0.6,
          }),
          figure("gateway CPU per event", after.cpu.gateway, "µs", {
            raw: {
              name: `the sum of its parts: bare Connect server that acks ${bare.cpu.server} + the log's publisher ${logPath.cpu.client}`,
              value: partsUs,
            },
            higherIsBetter: false,
            goal: "ratio ≥ 0.85",
            met: partsUs / after.cpu.gateway >= 0.85,
          }),
          figure(
            "before: every stream through Connect's handler (--connect-handler-only)",
            viaConnect.cpu.gateway,
            "µs",
            {
              raw: {
                name: `the sum of its parts: bare Connect server that acks ${bare.cpu.server} + the log's publisher ${logPath.cpu.client}`,
                value: partsUs,
              },
              higherIsBetter: false,
            },
          ),
          figure("two gateways on one log (the same agents dealt out)", two.rate, "events/s", {
            raw: { name: "one gateway, same run", value: after.rate },
          }),
          figure(
            "before: one ack per message (agents without cumulative_acks)",
            perMessageAcks.rate,
            "events/s",
            {
              raw: rawRef,
            },
          ),
          figure(
            "the transport alone: the same agents, a bare Connect server, no log",
            bare.rate,
            "events/s",
            {
              raw: rawRef,
            },
          ),
          figure("before: one event in flight per stream", before.rate, "events/s", { raw: rawRef }),
          figure(`${FEW} agents through the gateway`, fewAfter.rate, "events/s", { raw: rawRef }),
          figure(`${FEW} agents, before: one event in flight per stream`, fewBefore.rate, "events/s", {
            raw: rawRef,
          }),
        ],
        notes: [
          `raw js.publish by depth: ${rawAt.map((r) => `${r.depth} in flight ${Math.round(r.rate).toLocaleString("en")} events/s, client ${r.cpu.client} µs CPU per event`).join("; ")} (the faster is the reference)`,
          `CPU per event (µs): raw: client ${raw.cpu.client}, nats-server ${raw.cpu.nats}; through the gateway: gateway ${after.cpu.gateway}, agents ${after.cpu.agents}, nats-server ${after.cpu.nats}; with one ack per message: gateway ${perMessageAcks.cpu.gateway}, agents ${perMessageAcks.cpu.agents}`,
          `the log's own publish path from one client (AckedPublisher, as the gateway publishes, ${PUBLISH_DEPTH} in flight): ${Math.round(logPath.rate).toLocaleString("en")} events/s, client ${logPath.cpu.client} µs CPU per event; the gateway's ratio against it ${(after.rate / logPath.rate).toFixed(2)}`,
          `the transport alone (a bare Connect server that acks as the gateway does and stores nothing), CPU per event: server ${bare.cpu.server} µs, agents ${bare.cpu.agents} µs; the gateway's ratio against it ${(after.rate / bare.rate).toFixed(2)}`,
          `two gateways on one log: ${Math.round(two.rate).toLocaleString("en")} events/s against ${Math.round(after.rate).toLocaleString("en")} with one (scaling ratio ${(two.rate / after.rate).toFixed(2)}; ${os.availableParallelism()} cores shared by both gateways, the agents and nats-server); CPU per event: gateways ${two.cpu.gateway} µs together, agents ${two.cpu.agents}, nats-server ${two.cpu.nats}`,
          `every stream through Connect's handler (--connect-handler-only): ${Math.round(viaConnect.rate).toLocaleString("en")} events/s, gateway ${viaConnect.cpu.gateway} µs CPU per event, against ${after.cpu.gateway} framed directly`,
          `median of ${runs} timed runs of ${events.toLocaleString("en")} events for raw publish, the log's publisher, the bare server and the gateway (the others one run); CPU per event over those runs (µs): gateway ${after.gatewayRange}, bare server ${bare.serverRange}, the log's publisher ${logPath.clientRange}`,
          `warm-up: ${warmUp.toLocaleString("en")} untimed events before each part (raw publish, the log's publisher, the bare server, each gateway process) is first timed, ${WARM_AGAIN.toLocaleString("en")} before a later run on a warm process`,
          `acks written per event: ${after.acksPerEvent.toFixed(2)} (cumulative), ${perMessageAcks.acksPerEvent.toFixed(2)} (one per message)`,
          `${agents} agents on h2c (--insecure-dev), ${events} events of ${raw.bytes} bytes; each agent keeps ${AGENT_AHEAD} messages ahead of its acks`,
        ],
      };
    } finally {
      await server.close();
    }
  },
};

function sampleEvent(i: number) {
  return create(EventSchema, {
    id: `${randomUUID()}-${i}`,
    timeUnixMs: BigInt(Date.now()),
    writer: { kind: Writer_Kind.GATEWAY, id: "gw-bench" },
    body: {
      case: "shardStatus",
      value: {
        nodeId: "gpu-00001",
        sessionId: randomUUID(),
        sessionSeq: BigInt(i),
        status: { replicaId: "r-0001", shardId: "r-0001.0", state: ShardStatus_State.RUNNING },
      },
    },
  });
}

/**
 * Pipelined publishes from one client: with the NATS client's `js.publish`
 * (the raw reference), or with the log's own publish path (one reply
 * subscription for every ack, what the gateway uses), to show what that path
 * gains before any gateway work.
 */
async function rawPublish(
  url: string,
  natsPid: number,
  n: number,
  warmUp: number,
  via: "js.publish" | "log",
  runs: number,
  depth: number,
): Promise<{ rate: number; bytes: number; cpu: { client: number; nats: number }; clientRange: string }> {
  const log = await openLog({ url, clientName: "bench-raw", name: uniqueStream("RAW") });
  const nc = await connectNats({ url, name: "bench-raw-publisher" });
  try {
    const js = jetstream(nc);
    const published = new AckedPublisher(nc);
    const data = Array.from({ length: n }, (_, i) => ({
      id: `raw-${i}`,
      bytes: encodeEvent(sampleEvent(i)),
    }));
    const subject = log.subjects.node("gpu-00001");
    const send = (d: { id: string; bytes: Uint8Array }) =>
      via === "js.publish"
        ? js.publish(subject, d.bytes, { msgID: d.id, expect: { streamName: log.stream } })
        : published.publish(subject, d.bytes, d.id, { stream: log.stream }, 5000);
    // `depth` in flight, counted (a race over the promises in flight cost
    // the reference a reaction per publish in flight, for every publish).
    const pipelined = async (items: Array<{ id: string; bytes: Uint8Array }>) => {
      let inFlight = 0;
      let failure: unknown;
      let wake: (() => void) | undefined;
      const settled = () => {
        inFlight--;
        const w = wake;
        wake = undefined;
        w?.();
      };
      const until = async (ok: () => boolean) => {
        while (!ok()) await new Promise<void>((r) => (wake = r));
      };
      for (const d of items) {
        await until(() => inFlight < depth);
        inFlight++;
        send(d).then(settled, (err: unknown) => {
          failure ??= err;
          settled();
        });
      }
      await until(() => inFlight === 0);
      if (failure !== undefined) throw failure;
    };
    // Warmed up first, as every part is: a cold client measured its JIT
    // compiler too, and the reference varied by half between runs.
    for (let done = 0; done < warmUp; done += data.length) {
      await pipelined(data.slice(0, warmUp - done).map((d) => ({ ...d, id: `warm-${done}-${d.id}` })));
    }
    const timed: Array<{ rate: number; cpu: { client: number; nats: number } }> = [];
    for (let run = 0; run < runs; run++) {
      const items = run === 0 ? data : data.map((d) => ({ ...d, id: `run-${run}-${d.id}` }));
      const cpu0 = process.cpuUsage();
      const nats0 = sampleProc(natsPid);
      const t = performance.now();
      await pipelined(items);
      const s = (performance.now() - t) / 1000;
      timed.push({
        rate: n / s,
        cpu: {
          client: perEventUs(cpuSince(cpu0), n),
          nats: perEventUs(sampleProc(natsPid).cpuS - nats0.cpuS, n),
        },
      });
    }
    await log.jsm.streams.delete(log.stream).catch(() => {});
    return {
      rate: median(timed.map((r) => r.rate)),
      bytes: data[0]!.bytes.length,
      cpu: { client: median(timed.map((r) => r.cpu.client)), nats: median(timed.map((r) => r.cpu.nats)) },
      clientRange: range(timed.map((r) => r.cpu.client)),
    };
  } finally {
    await nc.close();
    await log.close();
  }
}

type Through = {
  rate: number;
  acksPerEvent: number;
  cpu: { gateway: number; agents: number; nats: number };
  /** The gateway's CPU per event over the timed runs, "min–max" (one value for one run). */
  gatewayRange: string;
};

/** Gateway processes (one or several) on one log of their own. */
class GatewaysOnLog {
  #warmed = false;

  private constructor(
    readonly log: Log,
    readonly gateways: BenchGateway[],
    readonly warmUp: number,
  ) {}

  /** Untimed events before the next run: the whole warm-up before the first. */
  takeWarmUp(): number {
    const n = this.#warmed ? Math.min(WARM_AGAIN, this.warmUp) : this.warmUp;
    this.#warmed = true;
    return n;
  }

  static async open(url: string, count: number, warmUp: number, args: string[]): Promise<GatewaysOnLog> {
    const stream = uniqueStream("INGEST");
    const log = await openLog({ url, clientName: "bench-ingest", name: stream });
    const g = new GatewaysOnLog(log, [], warmUp);
    try {
      for (let i = 0; i < count; i++) {
        const gw = await startGatewayProcess({
          nats: url,
          stream,
          extraArgs: [
            "--heartbeat-timeout",
            "120000",
            // Each bench agent writes ~1,000 events in seconds: far over a real
            // node's budget, which stays on (its cost is part of the figure).
            ...["--event-budget", "1000000000", "--event-budget-burst", "1000000000"],
            ...args,
          ],
        });
        g.gateways.push(gw);
      }
      return g;
    } catch (err) {
      await g.close();
      throw err;
    }
  }

  async close(): Promise<void> {
    for (const gw of this.gateways) await gw.child.stop();
    await this.log.jsm.streams.delete(this.log.stream).catch(() => {});
    await this.log.close();
  }
}

/** `agentCount` agents (nodes `gpu<tag>-…`), dealt out between the gateways, send `n` events. */
async function throughGateway(
  g: GatewaysOnLog,
  natsPid: number,
  agentCount: number,
  n: number,
  tag: string,
  progress: (m: string) => void,
  opts: { cumulativeAcks?: boolean; runs?: number } = {},
): Promise<Through> {
  const gws = g.gateways;
  const pools = gws.map((gw) => new ConnectionPool(gw.url, 100));
  const agents: LightAgent[] = [];
  try {
    progress("registering");
    const agentOpts = opts.cumulativeAcks === undefined ? {} : { cumulativeAcks: opts.cumulativeAcks };
    for (let i = 0; i < agentCount; i++) {
      const id = nodeName(i, tag);
      agents.push(new LightAgent(pools[i % pools.length]!.next(id), id, agentOpts));
    }
    await Promise.all(agents.map((a) => a.registered));
    const stored0 = (await g.log.jsm.streams.info(g.log.stream)).state.messages;
    // Warmed up first, as the publisher of the raw references is.
    progress("warming up");
    const warm = g.takeWarmUp();
    await drive(agents, Math.ceil(warm / agentCount), warm, () => {});
    const per = Math.ceil(n / agentCount);
    const total = per * agentCount;
    const acks0 = agents.reduce((sum, a) => sum + a.ackMessages, 0);
    const runs = opts.runs ?? 1;
    const timed = await timedDrives(agents, per, n, runs, progress, {
      gateway: () => gws.reduce((sum, gw) => sum + sampleProc(gw.child.pid).cpuS, 0),
      agents: ownCpu,
      nats: () => sampleProc(natsPid).cpuS,
    });
    // Every acked event is in the log (a cheap check that nothing was skipped).
    const stored = (await g.log.jsm.streams.info(g.log.stream)).state.messages - stored0;
    if (stored < total * runs) {
      throw new Error(`only ${stored} messages in the log for ${total * runs} acked events`);
    }
    const ackMessages = agents.reduce((sum, a) => sum + a.ackMessages, 0) - acks0;
    return {
      rate: median(timed.map((r) => r.rate)),
      acksPerEvent: ackMessages / (total * runs),
      cpu: {
        gateway: median(timed.map((r) => r.cpu.gateway)),
        agents: median(timed.map((r) => r.cpu.agents)),
        nats: median(timed.map((r) => r.cpu.nats)),
      },
      gatewayRange: range(timed.map((r) => r.cpu.gateway)),
    };
  } finally {
    // The gateway stays for the next run: its sessions end as agents do, not with it.
    for (const a of agents) a.close();
    await Promise.race([Promise.all(agents.map((a) => a.ended)), sleep(10_000)]);
    for (const a of agents) a.abort();
    for (const p of pools) p.close();
  }
}

/**
 * Each agent sends `per` shard statuses, keeping AGENT_AHEAD ahead of its
 * acks, until all are acked; returns the seconds it took.
 */
async function drive(
  agents: LightAgent[],
  per: number,
  n: number,
  progress: (m: string) => void,
): Promise<number> {
  let done = 0;
  const ticker = setInterval(
    () => progress(`${done.toLocaleString("en")}/${n.toLocaleString("en")} acked`),
    500,
  );
  const t = performance.now();
  try {
    await Promise.all(
      agents.map(async (a) => {
        let sent = 0;
        const base = a.acks;
        while (a.acks - base < per) {
          while (sent < per && sent - (a.acks - base) < AGENT_AHEAD) {
            a.send({
              msg: {
                case: "shard",
                value: { replicaId: "r-0001", shardId: `r-0001.${sent}`, state: ShardStatus_State.RUNNING },
              },
            });
            sent++;
          }
          const before = a.acks;
          await a.nextAck();
          done += a.acks - before;
        }
      }),
    );
    return (performance.now() - t) / 1000;
  } finally {
    clearInterval(ticker);
  }
}

/**
 * The same agents against a bare Connect server that acks as the gateway does
 * but stores nothing: what the agents and the transport cost on these cores
 * before the gateway does any work of its own.
 */
async function throughBareConnect(
  agentCount: number,
  n: number,
  warmUp: number,
  runs: number,
  progress: (m: string) => void,
): Promise<{ rate: number; cpu: { server: number; agents: number }; serverRange: string }> {
  const server = await startBareConnectServer();
  const child = server.child;
  const agents: LightAgent[] = [];
  let pool: ConnectionPool | undefined;
  try {
    pool = new ConnectionPool(server.url, 100);
    progress("registering");
    for (let i = 0; i < agentCount; i++) agents.push(new LightAgent(pool.next(nodeName(i)), nodeName(i)));
    await Promise.all(agents.map((a) => a.registered));
    progress("warming up");
    await drive(agents, Math.ceil(warmUp / agentCount), warmUp, () => {});
    const per = Math.ceil(n / agentCount);
    const timed = await timedDrives(agents, per, n, runs, progress, {
      server: () => sampleProc(child.pid).cpuS,
      agents: ownCpu,
    });
    return {
      rate: median(timed.map((r) => r.rate)),
      cpu: { server: median(timed.map((r) => r.cpu.server)), agents: median(timed.map((r) => r.cpu.agents)) },
      serverRange: range(timed.map((r) => r.cpu.server)),
    };
  } finally {
    for (const a of agents) a.close();
    for (const a of agents) a.abort();
    pool?.close();
    await child.stop();
  }
}

/**
 * `runs` timed drives of `per` events from each agent (`n` in all): each
 * run's rate, and its CPU per event for every process `cpu` reads (seconds
 * of CPU so far).
 */
async function timedDrives<K extends string>(
  agents: LightAgent[],
  per: number,
  n: number,
  runs: number,
  progress: (m: string) => void,
  cpu: Record<K, () => number>,
): Promise<Array<{ rate: number; cpu: Record<K, number> }>> {
  const total = per * agents.length;
  const names = Object.keys(cpu) as K[];
  const timed: Array<{ rate: number; cpu: Record<K, number> }> = [];
  for (let run = 0; run < runs; run++) {
    const before = names.map((k) => cpu[k]());
    const s = await drive(
      agents,
      per,
      n,
      runs === 1 ? progress : (m) => progress(`run ${run + 1}/${runs}: ${m}`),
    );
    const used = {} as Record<K, number>;
    names.forEach((k, i) => {
      used[k] = perEventUs(cpu[k]() - before[i]!, total);
    });
    timed.push({ rate: total / s, cpu: used });
  }
  return timed;
}

function nodeName(i: number, tag = ""): string {
  return `gpu${tag}-${String(i).padStart(5, "0")}`;
}

function cpuSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1e6;
}

/** This process's CPU seconds so far (the agents live in it). */
function ownCpu(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** µs per event, to a tenth. */
function perEventUs(cpuS: number, n: number): number {
  return Math.round((cpuS / n) * 1e7) / 10;
}

/** The middle value (the upper one of an even count). */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** "min–max" of the values, or the one value. */
function range(values: number[]): string {
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  return lo === hi ? String(lo) : `${lo}–${hi}`;
}
