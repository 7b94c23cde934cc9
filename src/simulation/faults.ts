/**
 * The faults of a run, drawn from the seed: for each kind asked for, the
 * times it strikes (about `PER_HOUR` a simulated hour, until `untilMs`)
 * and, when it strikes, what it hits. At `untilMs` every fault heals
 * (crashed processes come back, the network and the log recover, cordons
 * are lifted) and the run checks that the fleet converges.
 */
import { create } from "@bufbuild/protobuf";
import { newEvent } from "../codec/index.js";
import { type Catalog, CatalogSchema, Writer_Kind } from "../gen/llmgw/v1/events_pb.js";
import type { LogAppender } from "../log/append.js";
import { type CatalogVersion, catalogVersionOf, undoCatalog } from "../operator/catalog/undo.js";
import type { Rng } from "../sim/rng.js";
import { catalogEvent } from "./catalog.js";
import type { FaultKind } from "./options.js";
import type { World } from "./world.js";

/** How often each kind strikes, per simulated hour. */
const PER_HOUR: Record<FaultKind, number> = {
  "gateway-crash": 3,
  "leader-loss": 4,
  "agent-crash": 12,
  "stream-reset": 30,
  network: 8,
  log: 6,
  // Engine and GPU faults are drawn per start and per node (src/sim/fault-plan.ts); these strike besides.
  engine: 0,
  gpu: 0,
  operator: 8,
  "clock-skew": 4,
};

export function scheduleFaults(world: World, untilMs: number): void {
  const s = world.scheduler;
  const rng = world.rng.faults;
  const from = s.now + 60_000;
  const hours = Math.max(0, untilMs - from) / 3_600_000;
  const operator = new Operator(world, rng);
  for (const kind of world.options.faults) {
    const n = poisson(rng, PER_HOUR[kind] * hours);
    for (let i = 0; i < n; i++) {
      const at = from + Math.floor(rng() * (untilMs - from));
      s.after(at - s.now, () => strike(world, kind, rng, operator));
    }
  }
  s.after(untilMs - s.now, () => heal(world, operator));
}

function strike(world: World, kind: FaultKind, rng: Rng, operator: Operator): void {
  const s = world.scheduler;
  const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(rng() * xs.length)];
  switch (kind) {
    case "gateway-crash": {
      const up = [...world.gateways.values()].filter((g) => g.up);
      // One gateway stays: with none the agents have nowhere to go (that is an outage, not a fault to survive).
      if (up.length < 2) return;
      const g = pick(up)!;
      g.crash();
      world.gatewayDownSince.set(g.id, s.now);
      s.after(5_000 + rng() * 85_000, () => restartGateway(world, g.id));
      return;
    }
    case "leader-loss": {
      const leader = world.reconcilers.find((r) => r.leading && r.up);
      if (!leader) return;
      const how = rng();
      if (how < 0.4) {
        // Frozen between deciding and appending, past its lease: its pass must be fenced.
        leader.pauseBeforeAppendMs = world.lease.ttlMs + 5_000;
      } else if (how < 0.7) {
        leader.pausedUntil = s.now + world.lease.ttlMs + rng() * 20_000;
      } else {
        leader.crash();
        s.after(10_000 + rng() * 50_000, () => {
          if (!leader.up) leader.restart();
        });
      }
      return;
    }
    case "agent-crash": {
      const node = pick(world.nodes)!;
      // Mostly the agent process alone (its engines live on: adoption); sometimes the whole machine.
      node.restart({ keepShards: rng() < 0.8 });
      return;
    }
    case "stream-reset": {
      const node = pick(world.nodes)!;
      const stream = world.network.streams.get(node.nodeId);
      if (!stream || stream.isReset) return;
      // Half the time the gateway learns of it late (a half-open connection): the agent is already elsewhere.
      stream.reset("stream reset by the network", rng() < 0.5 ? 0 : rng() * 20_000);
      return;
    }
    case "network": {
      world.network.slowdown = 10 + rng() * 190;
      s.after(5_000 + rng() * 55_000, () => {
        world.network.slowdown = 1;
      });
      return;
    }
    case "log": {
      const c = world.log.conditions;
      if (rng() < 0.5) {
        // Up to 45 s: a third of the outages outlast the gateway's 30 s limit, which closes its streams.
        c.unavailable = true;
        s.after(1_000 + rng() * 44_000, () => {
          c.unavailable = false;
        });
      } else {
        // Publish timeouts: stored, but the publisher never hears so.
        c.ackLoss = 0.3;
        s.after(10_000 + rng() * 20_000, () => {
          c.ackLoss = 0;
        });
      }
      return;
    }
    case "engine":
    case "gpu":
      return;
    case "operator":
      operator.act();
      return;
    case "clock-skew": {
      const g = pick([...world.gateways.values()])!;
      g.skewMs = Math.round((rng() * 2 - 1) * 3_000);
      return;
    }
    default: {
      const never: never = kind;
      throw new Error(`unknown fault ${String(never)}`);
    }
  }
}

function restartGateway(world: World, id: string): void {
  const g = world.gateways.get(id);
  if (!g || g.up) return;
  g.start();
  world.gatewayDownSince.delete(id);
}

/** Faults stop: everything down comes back, the network and log recover, the operator lifts its cordons. */
function heal(world: World, operator: Operator): void {
  for (const g of world.gateways.values()) restartGateway(world, g.id);
  for (const r of world.reconcilers) {
    r.pausedUntil = 0;
    if (!r.up) r.restart();
  }
  world.network.slowdown = 1;
  world.log.conditions.unavailable = false;
  world.log.conditions.ackLoss = 0;
  world.faultsOver = true;
  operator.uncordonAll();
}

/** The operator: scale, roll out, undo, cordon, drain and uncordon, as the operator API writes them. */
class Operator {
  #revision = 0;
  /** The model this operator rolled out last: what it undoes. */
  #rolled: string | undefined;
  readonly #cordoned = new Set<string>();
  /** The operator API's own connection to the log. */
  readonly #conn: LogAppender;

  constructor(
    private readonly world: World,
    private readonly rng: Rng,
  ) {
    this.#conn = world.log.connection().appender;
  }

  act(): void {
    const r = this.rng();
    if (r < 0.25) this.#changeCatalog("scale");
    else if (r < 0.45) this.#changeCatalog("rollout");
    else if (r < 0.55) this.#undo();
    else if (r < 0.75) this.#node("cordon");
    else if (r < 0.9) this.#node("drain");
    else this.#node("uncordon");
  }

  uncordonAll(): void {
    for (const nodeId of [...this.#cordoned]) this.#nodeEvent("uncordon", nodeId);
  }

  /** The catalog in force, as the log has it. */
  #current(): { catalog: Catalog; seq: number } | undefined {
    const w = this.world;
    const seq = w.log.lastSubjectSeq(w.log.appender.subjects.catalog);
    const r = w.log.records[seq - 1];
    if (r?.event.body.case !== "catalogChanged" || !r.event.body.value.catalog) return undefined;
    return { catalog: r.event.body.value.catalog, seq };
  }

  #apply(catalog: Catalog, expectSeq: number): void {
    const w = this.world;
    this.#conn.appendWith(
      catalogEvent(`catalog-${w.newId()}`, catalog, w.scheduler.now),
      { expectLastSubjectSeq: expectSeq },
      { appended() {}, failed() {} },
    );
  }

  #changeCatalog(how: "scale" | "rollout"): void {
    const cur = this.#current();
    if (!cur) return;
    const next = create(CatalogSchema, cur.catalog);
    const model = next.models[Math.floor(this.rng() * next.models.length)];
    if (!model) return;
    const nodes = this.world.options.nodes;
    if (how === "scale") {
      const cap =
        model.name === "chat-small"
          ? nodes
          : model.name === "chat-mid"
            ? Math.ceil(nodes / 2)
            : Math.ceil(nodes / 8);
      const delta = Math.round((this.rng() * 2 - 1) * Math.max(1, cap / 5));
      model.replicas = Math.min(cap, Math.max(1, model.replicas + delta));
    } else {
      const p = model.profiles[0];
      if (!p) return;
      p.engineArgs = [`--sim-revision=${++this.#revision}`];
      this.#rolled = model.name;
    }
    this.#apply(next, cur.seq);
  }

  /**
   * `llmgw rollout undo` of the model it rolled last, as the API does it:
   * `undoCatalog` over the catalog's history in the log, fenced on the
   * newest version. Nothing to undo (the API's 409) writes nothing.
   */
  #undo(): void {
    if (this.#rolled === undefined) return;
    const history = this.#catalogHistory();
    const undo = undoCatalog(history, this.#rolled);
    const base = history.at(-1);
    if (!undo.ok || !base) return;
    this.#apply(undo.catalog, base.seq);
  }

  /** Every catalog applied, oldest first, as the API reads it from the log's catalog subject. */
  #catalogHistory(): CatalogVersion[] {
    const log = this.world.log;
    const subject = log.appender.subjects.catalog;
    const out: CatalogVersion[] = [];
    for (const r of log.records) {
      if (r.subject !== subject) continue;
      const v = catalogVersionOf(r);
      if (v) out.push(v);
    }
    return out;
  }

  #node(action: "cordon" | "drain" | "uncordon"): void {
    const nodes = this.world.nodes;
    if (action === "uncordon") {
      const nodeId = [...this.#cordoned][Math.floor(this.rng() * this.#cordoned.size)];
      if (nodeId !== undefined) this.#nodeEvent("uncordon", nodeId);
      return;
    }
    // At most a tenth of the fleet out at once: the catalog asks for about half of it.
    if (this.#cordoned.size >= Math.max(1, Math.floor(nodes.length / 10))) return;
    const node = nodes[Math.floor(this.rng() * nodes.length)];
    if (!node || this.#cordoned.has(node.nodeId)) return;
    this.#nodeEvent(action, node.nodeId);
  }

  #nodeEvent(action: "cordon" | "drain" | "uncordon", nodeId: string): void {
    const w = this.world;
    if (action === "uncordon") this.#cordoned.delete(nodeId);
    else this.#cordoned.add(nodeId);
    const operator = "sim-operator";
    const reason = `simulated ${action}`;
    const body =
      action === "cordon"
        ? { case: "nodeCordoned" as const, value: { nodeId, reason, operator } }
        : action === "drain"
          ? { case: "nodeDrainRequested" as const, value: { nodeId, reason, operator } }
          : { case: "nodeUncordoned" as const, value: { nodeId, operator } };
    this.#conn.appendWith(
      newEvent({
        id: `${action}-${w.newId()}`,
        timeUnixMs: BigInt(w.scheduler.now),
        writer: { kind: Writer_Kind.OPERATOR, id: operator },
        body,
      }),
      {},
      { appended() {}, failed() {} },
    );
  }
}

/** A Poisson draw with mean `mean` (Knuth's, fine for the small means here). */
function poisson(rng: Rng, mean: number): number {
  if (mean <= 0) return 0;
  if (mean > 50) return Math.max(0, Math.round(mean + Math.sqrt(mean) * (rng() + rng() + rng() - 1.5) * 2));
  const l = Math.exp(-mean);
  let k = 0;
  let p = 1;
  do {
    k++;
    p *= rng();
  } while (p > l);
  return k - 1;
}
