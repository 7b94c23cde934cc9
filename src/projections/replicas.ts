/**
 * The replicas fold: the desired catalog, the replicas the reconciler created
 * and placed, their shards' reported states, commands in flight, failure
 * counts and cooldowns. Pure: no I/O, no clock.
 *
 * The fold records facts and decisions; it decides nothing. What to do about
 * a failed shard, a lost node or an expired command is the reconciler's next
 * pass, which reads this state.
 */
import type { Event, ReconcilePass } from "../gen/llmgw/v1/events_pb.js";
import { modelFrom, shardStateName } from "./convert.js";
import { isCurrentSession } from "./inventory.js";
import type { EventMeta } from "./projection.js";
import { forgetShards, recordShards, shardOwner } from "./shard-owners.js";
import {
  type CommandKind,
  cooldownKey,
  type InventoryState,
  type ReplicaState,
  type ReplicasState,
  type ShardState,
} from "./state.js";

export function initialReplicas(): ReplicasState {
  return {
    catalog: { models: [], seq: 0, appliedBy: "" },
    replicas: {},
    commands: {},
    failures: {},
    cooldowns: {},
    lastPass: null,
    passes: 0,
  };
}

function newReplica(replicaId: string, model: string, seq: number): ReplicaState {
  return {
    replicaId,
    model,
    profile: "",
    phase: "pending",
    createdSeq: seq,
    shards: [],
    replaces: "",
    replacedBy: "",
    pendingReason: "",
    drainReason: "",
    drainStartedMs: 0,
    restarts: 0,
    backoffUntilMs: 0,
    lastChangeSeq: seq,
  };
}

function replicaFor(state: ReplicasState, replicaId: string, model: string, seq: number): ReplicaState {
  let r = state.replicas[replicaId];
  if (!r) {
    r = newReplica(replicaId, model, seq);
    state.replicas[replicaId] = r;
  }
  return r;
}

/** A placed replica whose every shard reports running is running. */
function refreshPhase(r: ReplicaState): void {
  if (r.phase === "draining" || r.phase === "pending") return;
  r.phase = r.shards.length > 0 && r.shards.every((s) => s.state === "running") ? "running" : "placed";
}

export function evolveReplicas(
  state: ReplicasState,
  event: Event,
  meta: EventMeta,
  inventory: InventoryState,
): ReplicasState {
  const body = event.body;
  switch (body.case) {
    case "catalogChanged":
      state.catalog = {
        models: (body.value.catalog?.models ?? []).map(modelFrom),
        seq: meta.seq,
        appliedBy: body.value.appliedBy,
      };
      return state;
    case "shardStatus": {
      const v = body.value;
      const st = v.status;
      if (!st || !isCurrentSession(inventory, v.nodeId, v.sessionId)) return state;
      const r = state.replicas[st.replicaId];
      const shard = r?.shards.find((s) => s.shardId === st.shardId && s.nodeId === v.nodeId);
      if (!r || !shard) return state;
      shard.state = shardStateName(st.state);
      shard.lastChangeSeq = meta.seq;
      if (shard.state === "failed") {
        shard.lastError = st.error;
        shard.exitCode = st.exitCode;
        const key = cooldownKey(r.model, v.nodeId);
        state.failures[key] = (state.failures[key] ?? 0) + 1;
      }
      r.lastChangeSeq = meta.seq;
      refreshPhase(r);
      return state;
    }
    case "commandResult": {
      const v = body.value;
      const res = v.result;
      if (!res || !isCurrentSession(inventory, v.nodeId, v.sessionId)) return state;
      const cmd = state.commands[res.commandId];
      if (!cmd) return state;
      delete state.commands[res.commandId];
      if (!res.ok) {
        const shard = state.replicas[cmd.replicaId]?.shards.find((s) => s.shardId === cmd.shardId);
        if (shard) {
          shard.lastError = res.error;
          shard.lastChangeSeq = meta.seq;
        }
      }
      return state;
    }
    case "reconcilePass":
      foldPass(state, body.value, meta);
      return state;
    case "sessionOpened":
      // The node's earlier sessions are superseded: their commands can no
      // longer be answered (results from them are ignored) nor re-issued.
      forgetCommands(state, body.value.nodeId, (session) => session !== body.value.sessionId);
      return state;
    case "sessionClosed":
      forgetCommands(state, body.value.nodeId, (session) => session === body.value.sessionId);
      return state;
    case "hardwareChanged":
    case "usageChanged":
    case "gatewayStarted":
    case "gatewayDraining":
    case "gatewayStopped":
    case "nodeCordoned":
    case "nodeUncordoned":
    case "nodeDrainRequested":
    case "gpuProblemsCleared":
    case "gpuCordoned":
    case "gpuUncordoned":
      // Inventory facts; the reconciler combines them with replica state.
      return state;
    case undefined:
      return state;
    default: {
      const never: never = body;
      return never;
    }
  }
}

function foldPass(state: ReplicasState, pass: ReconcilePass, meta: EventMeta): void {
  state.passes++;
  state.lastPass = {
    seq: meta.seq,
    leaderId: pass.leaderId,
    observedSeq: Number(pass.observedSeq),
    nowMs: Number(pass.nowUnixMs),
  };

  // A pass that removes or fails a replica stops its shards in the same pass:
  // remember whose shards the stop/drain commands name before the decisions
  // forget them.
  const ownerBefore = new Map<string, string>();
  for (const c of pass.commands) {
    if (c.action.case !== "stop" && c.action.case !== "drain") continue;
    const owner = replicaOfShard(state, c.nodeId, c.action.value.shardId);
    if (owner) ownerBefore.set(`${c.nodeId}/${c.action.value.shardId}`, owner);
  }

  // Decisions first: a pass creates and places a replica, then its commands refer to it.
  for (const d of pass.decisions) {
    const k = d.kind;
    switch (k.case) {
      case "replicaCreated": {
        const v = k.value;
        const r = replicaFor(state, v.replicaId, v.model, meta.seq);
        r.replaces = v.replaces;
        const old = v.replaces ? state.replicas[v.replaces] : undefined;
        if (old) old.replacedBy = v.replicaId;
        break;
      }
      case "replicaPlaced": {
        const v = k.value;
        const r = replicaFor(state, v.replicaId, v.model, meta.seq);
        r.profile = v.profile;
        r.phase = "placed";
        r.pendingReason = "";
        forgetShards(state.replicas, r);
        r.shards = v.shards.map(
          (s): ShardState => ({
            shardId: s.shardId,
            rank: s.rank,
            nodeId: s.nodeId,
            sessionId: s.sessionId,
            gpuIndices: [...s.gpuIndices],
            state: "pending",
            desired: "running",
            adopted: false,
            lastError: "",
            exitCode: 0,
            lastChangeSeq: meta.seq,
          }),
        );
        recordShards(state.replicas, r);
        r.lastChangeSeq = meta.seq;
        break;
      }
      case "replicaPending": {
        const r = replicaFor(state, k.value.replicaId, k.value.model, meta.seq);
        r.pendingReason = d.explanation;
        r.lastChangeSeq = meta.seq;
        break;
      }
      case "shardsAdopted": {
        const v = k.value;
        for (const a of v.shards) {
          const r = replicaFor(state, a.replicaId, a.model, meta.seq);
          if (r.profile === "") r.profile = a.profile;
          if (r.phase === "pending") r.phase = "placed";
          const shard: ShardState = {
            shardId: a.shardId,
            rank: a.rank,
            nodeId: v.nodeId,
            sessionId: v.sessionId,
            gpuIndices: [...a.gpuIndices],
            state: "running",
            desired: "running",
            adopted: true,
            lastError: "",
            exitCode: 0,
            lastChangeSeq: meta.seq,
          };
          forgetShards(state.replicas, r);
          const i = r.shards.findIndex((s) => s.shardId === a.shardId);
          if (i >= 0) r.shards[i] = shard;
          else {
            r.shards.push(shard);
            r.shards.sort((x, y) => x.rank - y.rank || (x.shardId < y.shardId ? -1 : 1));
          }
          recordShards(state.replicas, r);
          r.lastChangeSeq = meta.seq;
          refreshPhase(r);
        }
        break;
      }
      case "replicaRemoved": {
        const r = state.replicas[k.value.replicaId];
        if (r) forgetShards(state.replicas, r);
        delete state.replicas[k.value.replicaId];
        break;
      }
      case "replicaDrainStarted": {
        const r = state.replicas[k.value.replicaId];
        if (!r) break;
        r.phase = "draining";
        r.drainReason = k.value.reason;
        r.drainStartedMs = Number(pass.nowUnixMs);
        if (k.value.replacementId) r.replacedBy = k.value.replacementId;
        for (const s of r.shards) if (s.desired === "running") s.desired = "draining";
        r.lastChangeSeq = meta.seq;
        break;
      }
      case "replicaFailed": {
        // Its shards are gone or being stopped; the replica waits to be placed again.
        const r = state.replicas[k.value.replicaId];
        if (!r) break;
        forgetShards(state.replicas, r);
        r.shards = [];
        r.phase = "pending";
        r.lastChangeSeq = meta.seq;
        break;
      }
      case "shardBackoff": {
        const r = state.replicas[k.value.replicaId];
        if (!r) break;
        r.restarts = k.value.restarts;
        r.backoffUntilMs = Number(k.value.untilUnixMs);
        r.lastChangeSeq = meta.seq;
        break;
      }
      case "cooldownStarted": {
        const v = k.value;
        const key = cooldownKey(v.model, v.nodeId);
        state.cooldowns[key] = {
          model: v.model,
          nodeId: v.nodeId,
          failures: v.failures,
          untilMs: Number(v.untilUnixMs),
        };
        state.failures[key] = 0;
        break;
      }
      case "sessionsExpired":
        for (const ref of k.value.sessions)
          forgetCommands(state, ref.nodeId, (session) => session === ref.sessionId);
        break;
      case "commandReissued":
      case "shardUnclaimed":
      case "nodeLiveness":
      case "duplicateStopped":
        // Inventory facts or pure explanations; the commands below carry the effect.
        break;
      case undefined:
        break;
      default: {
        const never: never = k;
        void never;
      }
    }
  }

  for (const c of pass.commands) {
    const a = c.action;
    if (a.case === undefined) continue;
    const kind: CommandKind = a.case;
    const shardId = a.value.shardId;
    const replicaId =
      a.case === "start"
        ? a.value.replicaId
        : replicaOfShard(state, c.nodeId, shardId) || (ownerBefore.get(`${c.nodeId}/${shardId}`) ?? "");
    state.commands[c.commandId] = {
      commandId: c.commandId,
      kind,
      nodeId: c.nodeId,
      sessionId: c.sessionId,
      shardId,
      replicaId,
      attempt: c.attempt,
      issuedSeq: meta.seq,
      deadlineMs: Number(c.deadlineUnixMs),
    };
    if (kind !== "start") {
      const shard = state.replicas[replicaId]?.shards.find((s) => s.shardId === shardId);
      if (shard) {
        shard.desired = kind === "stop" ? "stopped" : "draining";
        shard.lastChangeSeq = meta.seq;
      }
    }
  }
}

/**
 * Drops the commands sent to a node's sessions that `gone` names. Without
 * this, a command whose session ended before it was answered stayed in the
 * state for ever, and the state (and every pass, which reads the commands)
 * grew with the age of the fleet.
 */
function forgetCommands(state: ReplicasState, nodeId: string, gone: (sessionId: string) => boolean): void {
  for (const [id, c] of Object.entries(state.commands))
    if (c.nodeId === nodeId && gone(c.sessionId)) delete state.commands[id];
}

function replicaOfShard(state: ReplicasState, nodeId: string, shardId: string): string {
  return shardOwner(state.replicas, nodeId, shardId);
}
