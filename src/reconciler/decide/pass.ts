/**
 * The pass under construction. Rules add units (decisions with the commands
 * they imply) in priority order; each accepted unit is folded at once into a
 * working copy of the state with the real fold, so later rules of the same
 * pass see its effect exactly as the next pass will (a created replica is
 * pending, a failed one has no shards, an adopted shard holds its GPUs).
 * The working copy is a fork (projections/fork.ts): it shares every record
 * the pass does not change with the input, so a pass costs what it changes.
 * The rules read it as a `FleetView`: only the fold of a unit writes to it.
 *
 * Ids are derived from the state's sequence and counters, never from a
 * clock or randomness: the same input gives the same pass.
 */
import { create } from "@bufbuild/protobuf";
import { compileEncoder } from "../../codec/index.js";
import {
  type Command,
  CommandSchema,
  type Decision,
  DecisionSchema,
  type Event,
  EventSchema,
  type ReconcilePass,
  ReconcilePassSchema,
} from "../../gen/llmgw/v1/events_pb.js";
import {
  type EventMeta,
  evolveFleet,
  type FleetState,
  type FleetView,
  type Fork,
  forkFleet,
  unadoptedNode,
} from "../../projections/index.js";
import type { ReconcilerConfig } from "./config.js";
import type { DecideInput } from "./types.js";

export interface Unit {
  decisions: Decision[];
  commands: Command[];
}

/**
 * A pass's size is measured as the pass event will carry it: each decision
 * and command encoded by the log's own encoder (byte for byte what the
 * append writes), plus its field tag and length prefix in ReconcilePass.
 * Only the length is read; the encoders reuse their memory.
 */
const encodeDecision = compileEncoder(DecisionSchema);
const encodeCommand = compileEncoder(CommandSchema);

/** Bytes of one element of a repeated message field numbered below 16 (decisions = 5, commands = 6). */
function elementBytes(length: number): number {
  let prefix = 1;
  for (let n = length; n >= 0x80; n >>>= 7) prefix++;
  return 1 + prefix + length;
}

/** What a unit adds to the encoded pass: its decisions and commands as ReconcilePass elements. */
function unitBytes(unit: Unit): number {
  let bytes = 0;
  for (const d of unit.decisions) bytes += elementBytes(encodeDecision(d).length);
  for (const c of unit.commands) bytes += elementBytes(encodeCommand(c).length);
  return bytes;
}

export class Pass {
  readonly decisions: Decision[] = [];
  readonly commands: Command[] = [];
  truncated = false;
  /** The encoded bytes of the units `add` took (unitBytes). */
  #bytes = 0;
  /**
   * Units `addAlways` took, not measured yet: the routing table restated
   * after the last rule, which no `add` follows, can hold every endpoint of
   * a model, and encoding it only to count it would cost a one-change pass
   * at 50,000 nodes several times its decide. Measured when a later `add`
   * needs the figure.
   */
  #unmeasured: Unit[] = [];
  /** The state as it will be once this pass is folded (so far). */
  readonly work: FleetView;
  /** The same state, writable: only `#apply`'s fold writes to it. */
  readonly #work: FleetState;
  readonly #fork: Fork;
  readonly config: ReconcilerConfig;
  readonly nowMs: number;
  readonly liveGateways: ReadonlySet<string>;
  /** The input state's sequence: the base of every id made in this pass. */
  readonly seq: number;
  /** Nodes whose registration was not handled when the pass began. */
  readonly unadopted: ReadonlySet<string>;
  #replicas = 0;
  #commands = 0;
  /**
   * What each unit is folded as: one event for the whole pass, whose
   * decisions and commands are the unit's (the fold reads them and keeps
   * neither list). A pass placing 10,000 replicas folds 20,000 units: a
   * new event, pass message and list copies for each would allocate about
   * 15 MB per such pass.
   */
  readonly #unitBody: ReconcilePass;
  readonly #unitEvent: Event;
  readonly #unitMeta: EventMeta;
  readonly #foldUnit = (): void => {
    evolveFleet(this.#work, this.#unitEvent, this.#unitMeta);
  };

  constructor(input: DecideInput) {
    this.#fork = forkFleet(input.state);
    this.#work = this.#fork.state;
    this.work = this.#work;
    this.config = input.config;
    this.nowMs = input.nowMs;
    this.liveGateways = input.liveGateways;
    this.seq = input.state.seq;
    this.unadopted = new Set(input.state.inventory.nodes.groupIds(unadoptedNode, ""));
    this.#unitBody = create(ReconcilePassSchema, { nowUnixMs: BigInt(this.nowMs) });
    this.#unitEvent = create(EventSchema, { id: "", body: { case: "reconcilePass", value: this.#unitBody } });
    this.#unitMeta = { seq: this.seq + 1, timeMs: this.nowMs };
  }

  // Ids are joined in one flat string: a template's pieces would stay
  // linked in every decision, command and record that names the id.
  newReplicaId(model: string): string {
    return [model, this.seq, ++this.#replicas].join("-");
  }

  /** A re-placement gets a new shard id: the seq part differs from the old one's. */
  shardId(replicaId: string, rank: number): string {
    return [replicaId, `s${rank}`, this.seq].join("-");
  }

  newCommandId(): string {
    return `c-${this.seq}-${++this.#commands}`;
  }

  /**
   * Adds a unit if it fits in maxDecisionsPerPass and in maxPassBytes (the
   * log's NATS server refuses a message over its max_payload: a pass too
   * large to append would be decided again and again). Once one unit does
   * not fit, every later one is refused too, so what is left over is always
   * a suffix of the priority order. A unit alone in an empty pass is always
   * accepted, so that a pass makes progress even with a tiny limit.
   */
  add(unit: Unit): boolean {
    if (unit.decisions.length === 0 && unit.commands.length === 0) return true;
    if (this.truncated) return false;
    const size = this.decisions.length + unit.decisions.length;
    if (size > this.config.maxDecisionsPerPass && this.decisions.length > 0) {
      this.truncated = true;
      return false;
    }
    const bytes = unitBytes(unit);
    const empty = this.decisions.length === 0 && this.commands.length === 0;
    if (this.bytes + bytes > this.config.maxPassBytes && !empty) {
      this.truncated = true;
      return false;
    }
    this.#bytes += bytes;
    this.#apply(unit);
    return true;
  }

  /**
   * Adds a unit whatever the limit: for decisions that restate what the
   * pass's own units already did (the routing table after a drain starts)
   * and must land in the same pass. The caller keeps such units small. Its
   * bytes count toward the pass's (a later `add` sees less room) but never
   * refuse it: maxPassBytes's default leaves room below the server's limit.
   */
  addAlways(unit: Unit): void {
    if (unit.decisions.length === 0 && unit.commands.length === 0) return;
    this.#unmeasured.push(unit);
    this.#apply(unit);
  }

  /** The encoded bytes of `decisions` and `commands` so far, as the pass event carries them. */
  get bytes(): number {
    for (const unit of this.#unmeasured) this.#bytes += unitBytes(unit);
    this.#unmeasured = [];
    return this.#bytes;
  }

  #apply(unit: Unit): void {
    for (const d of unit.decisions) this.decisions.push(d);
    for (const c of unit.commands) this.commands.push(c);
    this.#unitBody.decisions = unit.decisions;
    this.#unitBody.commands = unit.commands;
    this.#foldUnit();
  }

  /**
   * Gives the input state back what the pass's folds changed (the fork
   * shares its big containers: projections/fork.ts). Call once, when the
   * pass is done; `work` must not be used after.
   */
  end(): void {
    this.#fork.release();
  }
}
