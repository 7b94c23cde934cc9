/**
 * The replicas fold: the desired catalog, the replicas the reconciler created
 * and placed, their shards' reported states, commands in flight, failure
 * counts and cooldowns. Pure: no I/O, no clock.
 *
 * The fold records facts and decisions; it decides nothing. What to do about
 * a failed shard, a lost node or an expired command is the reconciler's next
 * pass, which reads this state.
 */
import { type Event, type ReconcilePass, ReplicaFailed_Reason } from "../gen/llmgw/v1/events_pb.js";
import { foldAutoscaleDecided, foldCatalogAutoscale, foldShardLoad } from "./autoscale.js";
import { modelFrom, shardStateName } from "./convert.js";
import { REPLICA_INDEXES, shardKey, shardOwners } from "./fleet-indexes.js";
import { isCurrentSession } from "./inventory.js";
import type { EventMeta } from "./projection.js";
import { RecordTable } from "./record-table.js";
import { foldRolloutDecision, foldRolloutIntent, profileRevisionInForce } from "./rollouts.js";
import {
  type CommandKind,
  cooldownKey,
  type InventoryView,
  type ReplicaState,
  type ReplicasState,
  type ShardState,
} from "./state.js";
import { foldUndeliverable } from "./undeliverable.js";

export function initialReplicas(): ReplicasState {
  return {
    catalog: { models: [], seq: 0, appliedBy: "" },
    replicas: new RecordTable(REPLICA_INDEXES),
    commands: {},
    failures: {},
    undeliverable: {},
    cooldowns: {},
    endpoints: {},
    rollouts: {},
    lastPass: null,
    passes: 0,
    autoscale: {},
  };
}

function newReplica(replicaId: string, model: string, seq: number, createdMs: number): ReplicaState {
  return {
    replicaId,
    model,
    profile: "",
    revision: "",
    createdMs,
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
    lastFailure: null,
    lastChangeSeq: seq,
  };
}

/** Where a shard is, as a placement or an adoption says it. */
interface ShardPlace {
  shardId: string;
  rank: number;
  nodeId: string;
  sessionId: string;
  gpuIndices: readonly number[];
}

/**
 * A shard as a pass places or adopts it: no reports, no fault, no start
 * sent yet. Built from the decision's own shard (no object in between: a
 * full placement folds one per replica).
 */
function newShard(
  at: ShardPlace,
  state: ShardState["state"],
  adopted: boolean,
  endpoint: string,
  seq: number,
): ShardState {
  return {
    shardId: at.shardId,
    rank: at.rank,
    nodeId: at.nodeId,
    sessionId: at.sessionId,
    gpuIndices: [...at.gpuIndices],
    state,
    adopted,
    endpoint,
    desired: "running",
    lastError: "",
    exitCode: 0,
    lastOutput: "",
    fault: null,
    startCommandId: "",
    startAttempts: 0,
    startDueMs: 0,
    startingSinceMs: 0,
    lastChangeSeq: seq,
  };
}

const FAILURE_REASONS: Record<ReplicaFailed_Reason, string> = {
  [ReplicaFailed_Reason.UNSPECIFIED]: "unspecified",
  [ReplicaFailed_Reason.SHARD_FAILED]: "shard-failed",
  [ReplicaFailed_Reason.UNREQUESTED_STOP]: "unrequested-stop",
  [ReplicaFailed_Reason.START_REFUSED]: "start-refused",
  [ReplicaFailed_Reason.START_TIMEOUT]: "start-timeout",
  [ReplicaFailed_Reason.READY_TIMEOUT]: "ready-timeout",
  [ReplicaFailed_Reason.INCOMPLETE]: "incomplete",
  [ReplicaFailed_Reason.UNDELIVERABLE]: "undeliverable",
};

/** The reason's name, for state and people; a reason added later reads as "unspecified". */
export function failureReasonName(r: ReplicaFailed_Reason): string {
  return FAILURE_REASONS[r] ?? "unspecified";
}

/**
 * Failures that say something about the model on that node (it would not
 * start, serve or stay up there) count toward the model×node cooldown. A
 * lost node, an incomplete adoption or a session that went away do not.
 */
function countsTowardCooldown(r: ReplicaFailed_Reason): boolean {
  switch (r) {
    case ReplicaFailed_Reason.SHARD_FAILED:
    case ReplicaFailed_Reason.UNREQUESTED_STOP:
    case ReplicaFailed_Reason.START_REFUSED:
    case ReplicaFailed_Reason.START_TIMEOUT:
    case ReplicaFailed_Reason.READY_TIMEOUT:
      return true;
    default:
      return false;
  }
}

function forgetDisruptionWaits(state: ReplicasState, nodeId: string): void {
  for (const r of state.replicas.values()) {
    if (r.disruptionBlocked !== undefined && r.shards.some((s) => s.nodeId === nodeId))
      state.replicas.update(r.replicaId, (w) => {
        delete w.disruptionBlocked;
      });
  }
}

/** Changes replica `replicaId`, created first (pending) if it is new. */
function updateReplica(
  state: ReplicasState,
  replicaId: string,
  model: string,
  seq: number,
  createdMs: number,
  change: (r: ReplicaState) => void,
): void {
  if (!state.replicas.has(replicaId))
    state.replicas.put(replicaId, newReplica(replicaId, model, seq, createdMs));
  state.replicas.update(replicaId, change);
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
  inventory: InventoryView,
): ReplicasState {
  const body = event.body;
  switch (body.case) {
    case "catalogChanged": {
      const before = state.catalog.models;
      state.catalog = {
        models: (body.value.catalog?.models ?? []).map(modelFrom),
        seq: meta.seq,
        appliedBy: body.value.appliedBy,
      };
      foldCatalogAutoscale(state, before);
      return state;
    }
    case "shardStatus": {
      const v = body.value;
      const st = v.status;
      if (!st || !isCurrentSession(inventory, v.nodeId, v.sessionId)) return state;
      const known = state.replicas.get(st.replicaId);
      if (!known?.shards.some((s) => s.shardId === st.shardId && s.nodeId === v.nodeId)) return state;
      state.replicas.update(st.replicaId, (r) => {
        const shard = r.shards.find((s) => s.shardId === st.shardId && s.nodeId === v.nodeId) as ShardState;
        const was = shard.state;
        shard.state = shardStateName(st.state);
        if (st.endpoint !== "") shard.endpoint = st.endpoint;
        shard.lastChangeSeq = meta.seq;
        if (st.lastOutput !== "") shard.lastOutput = st.lastOutput;
        // Any report means the start took: the start deadline no longer applies.
        shard.startDueMs = 0;
        // STARTING again after RUNNING is an engine restarted in place: its ready timeout starts over.
        if (shard.state === "starting" && (shard.startingSinceMs === 0 || was === "running"))
          shard.startingSinceMs = meta.timeMs;
        // Why a running shard went back to STARTING (unhealthy, restarted in place).
        if (shard.state === "starting" && st.error !== "") shard.lastError = st.error;
        if (shard.state === "failed" || shard.state === "stopped") {
          shard.lastError = st.error;
          shard.exitCode = st.exitCode;
          // Wanted running and gone on its own: the next pass fails the replica.
          if (shard.desired === "running" && shard.fault === null) {
            shard.fault =
              shard.state === "failed"
                ? { kind: "failed", message: st.error || `exit code ${st.exitCode}` }
                : {
                    kind: "unrequested-stop",
                    message: `stopped without being asked (exit code ${st.exitCode}${st.error ? `: ${st.error}` : ""})`,
                  };
          }
        }
        r.lastChangeSeq = meta.seq;
        refreshPhase(r);
      });
      return state;
    }
    case "commandResult": {
      const v = body.value;
      const res = v.result;
      if (!res || !isCurrentSession(inventory, v.nodeId, v.sessionId)) return state;
      const cmd = state.commands[res.commandId];
      if (!cmd) return state;
      // Command ids are predictable: a result binds only from the node and
      // session the command went to, or any node could fail others' starts.
      if (cmd.nodeId !== v.nodeId || cmd.sessionId !== v.sessionId) {
        refuseResult(state, v.nodeId, v.sessionId, cmd, meta.seq);
        return state;
      }
      delete state.commands[res.commandId];
      if (!res.ok && state.replicas.get(cmd.replicaId)?.shards.some((s) => s.shardId === cmd.shardId)) {
        state.replicas.update(cmd.replicaId, (r) => {
          const shard = r.shards.find((s) => s.shardId === cmd.shardId) as ShardState;
          shard.lastError = res.error;
          shard.lastChangeSeq = meta.seq;
          // A refused start will never come up: no waiting for its deadline.
          if (
            cmd.kind === "start" &&
            shard.desired === "running" &&
            shard.state === "pending" &&
            !shard.fault
          )
            shard.fault = { kind: "start-refused", message: res.error || "refused without a reason" };
        });
      }
      return state;
    }
    case "reconcilePass":
      foldPass(state, body.value, meta, inventory);
      return state;
    case "commandUndeliverable":
      foldUndeliverable(state, body.value, meta);
      return state;
    case "sessionOpened":
      // The node's earlier sessions are superseded: their commands can no
      // longer be answered (results from them are ignored) nor re-issued.
      forgetCommands(state, body.value.nodeId, (session) => session !== body.value.sessionId);
      return state;
    case "sessionClosed":
      forgetCommands(state, body.value.nodeId, (session) => session === body.value.sessionId);
      return state;
    case "nodeUncordoned":
    case "gpuProblemsCleared":
      // The drain or the fault that kept a replica waiting on its budget
      // may be over: a new wait is a new start, recorded again.
      forgetDisruptionWaits(state, body.value.nodeId);
      return state;
    case "rolloutPaused":
    case "rolloutResumed":
      foldRolloutIntent(state, body);
      return state;
    case "usageChanged":
      foldShardLoad(state, body.value, meta, inventory);
      return state;
    case "hardwareChanged":
    case "gatewayStarted":
    case "gatewayDraining":
    case "gatewayStopped":
    case "nodeCordoned":
    case "nodeDrainRequested":
    case "gpuCordoned":
    case "gpuUncordoned":
    case "duplicateIdentity":
    case undefined:
      // Inventory facts (the reconciler combines them with replica state), or
      // a kind this version does not know.
      return state;
    default: {
      const never: never = body;
      return never;
    }
  }
}

/** Counts a result sent for a command addressed elsewhere (records replaced whole: see fork.ts). */
function refuseResult(
  state: ReplicasState,
  nodeId: string,
  sessionId: string,
  cmd: { commandId: string; nodeId: string; sessionId: string },
  seq: number,
): void {
  const refused = state.refusedResults ?? {};
  refused[nodeId] = {
    nodeId,
    count: (refused[nodeId]?.count ?? 0) + 1,
    lastSeq: seq,
    lastCommandId: cmd.commandId,
    lastSessionId: sessionId,
    addressedNodeId: cmd.nodeId,
    addressedSessionId: cmd.sessionId,
  };
  state.refusedResults = refused;
}

function foldPass(
  state: ReplicasState,
  pass: ReconcilePass,
  meta: EventMeta,
  inventory: InventoryView,
): void {
  state.passes++;
  const observedSeq = Number(pass.observedSeq);
  const nowMs = Number(pass.nowUnixMs);
  const last = state.lastPass;
  // A reconcile pass folds each of its units as a pass of its own, all alike: one record for them all.
  if (
    last === null ||
    last.seq !== meta.seq ||
    last.leaderId !== pass.leaderId ||
    last.observedSeq !== observedSeq ||
    last.nowMs !== nowMs
  )
    state.lastPass = { seq: meta.seq, leaderId: pass.leaderId, observedSeq, nowMs };

  // A pass that removes or fails a replica stops its shards in the same pass:
  // remember whose shards the stop/drain commands name before the decisions
  // forget them. (Most passes stop nothing: no map for them.)
  let ownerBefore: Map<string, string> | undefined;
  for (const c of pass.commands) {
    if (c.action.case !== "stop" && c.action.case !== "drain") continue;
    const owner = replicaOfShard(state, c.nodeId, c.action.value.shardId);
    if (!owner) continue;
    ownerBefore ??= new Map();
    ownerBefore.set(`${c.nodeId}/${c.action.value.shardId}`, owner);
  }

  // Decisions first: a pass creates and places a replica, then its commands refer to it.
  for (const d of pass.decisions) {
    const k = d.kind;
    switch (k.case) {
      case "replicaCreated": {
        const v = k.value;
        updateReplica(state, v.replicaId, v.model, meta.seq, nowMs, (r) => {
          r.replaces = v.replaces;
        });
        if (v.replaces)
          state.replicas.update(v.replaces, (old) => {
            old.replacedBy = v.replicaId;
          });
        break;
      }
      case "replicaPlaced": {
        const v = k.value;
        updateReplica(state, v.replicaId, v.model, meta.seq, nowMs, (r) => {
          r.profile = v.profile;
          r.revision = v.revision;
          r.phase = "placed";
          r.pendingReason = "";
          r.shards = v.shards.map((s) => newShard(s, "pending", false, "", meta.seq));
          r.lastChangeSeq = meta.seq;
        });
        break;
      }
      case "replicaPending": {
        updateReplica(state, k.value.replicaId, k.value.model, meta.seq, nowMs, (r) => {
          r.pendingReason = d.explanation;
          r.lastChangeSeq = meta.seq;
        });
        break;
      }
      case "shardsAdopted": {
        const v = k.value;
        for (const a of v.shards) {
          updateReplica(state, a.replicaId, a.model, meta.seq, nowMs, (r) => {
            if (r.profile === "") r.profile = a.profile;
            if (r.revision === "") r.revision = profileRevisionInForce(state, a.model, a.profile);
            if (r.phase === "pending") r.phase = "placed";
            const shard = newShard(
              {
                shardId: a.shardId,
                rank: a.rank,
                nodeId: v.nodeId,
                sessionId: v.sessionId,
                gpuIndices: a.gpuIndices,
              },
              "running",
              true,
              registeredEndpoint(inventory, v.nodeId, v.sessionId, a.shardId),
              meta.seq,
            );
            const i = r.shards.findIndex((s) => s.shardId === a.shardId);
            if (i >= 0) r.shards[i] = shard;
            else {
              r.shards.push(shard);
              r.shards.sort((x, y) => x.rank - y.rank || (x.shardId < y.shardId ? -1 : 1));
            }
            r.lastChangeSeq = meta.seq;
            refreshPhase(r);
          });
        }
        break;
      }
      case "replicaRemoved": {
        state.replicas.drop(k.value.replicaId);
        break;
      }
      case "replicaDrainStarted": {
        state.replicas.update(k.value.replicaId, (r) => {
          // A drain restated (a shard re-adopted mid-drain) keeps its start: the
          // deadline the agents were told does not move.
          if (r.phase !== "draining") r.drainStartedMs = Number(pass.nowUnixMs);
          r.phase = "draining";
          delete r.disruptionBlocked;
          r.drainReason = k.value.reason;
          if (k.value.replacementId) r.replacedBy = k.value.replacementId;
          for (const s of r.shards) if (s.desired === "running") s.desired = "draining";
          r.lastChangeSeq = meta.seq;
        });
        break;
      }
      case "replicaFailed": {
        // Its shards are gone or being stopped; the replica waits to be placed again.
        const v = k.value;
        state.replicas.update(v.replicaId, (r) => {
          r.lastFailure = {
            reason: failureReasonName(v.reason),
            message: v.error,
            nodeId: v.nodeId,
            shardId: v.shardId,
            exitCode: v.exitCode,
            lastOutput: v.lastOutput,
            seq: meta.seq,
          };
          if (v.nodeId !== "" && countsTowardCooldown(v.reason)) {
            const key = cooldownKey(r.model, v.nodeId);
            state.failures[key] = (state.failures[key] ?? 0) + 1;
          }
          r.shards = [];
          r.phase = "pending";
          r.lastChangeSeq = meta.seq;
        });
        break;
      }
      case "shardBackoff": {
        state.replicas.update(k.value.replicaId, (r) => {
          r.restarts = k.value.restarts;
          r.backoffUntilMs = Number(k.value.untilUnixMs);
          r.lastChangeSeq = meta.seq;
        });
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
      case "endpointsChanged": {
        const v = k.value;
        if (v.endpoints.length === 0) delete state.endpoints[v.model];
        else
          state.endpoints[v.model] = v.endpoints.map((e) => ({
            replicaId: e.replicaId,
            url: e.url,
            nodeId: e.nodeId,
          }));
        break;
      }
      case "rolloutStarted":
      case "rolloutStalled":
      case "rolloutCompleted":
      case "rolloutProgressing":
        foldRolloutDecision(state, k, meta.seq, nowMs);
        break;
      case "autoscaleDecided":
        foldAutoscaleDecided(state, k.value, Number(pass.nowUnixMs), meta.seq, d.explanation);
        break;
      case "sessionsExpired":
        for (const ref of k.value.sessions)
          forgetCommands(state, ref.nodeId, (session) => session === ref.sessionId);
        break;
      case "undeliverableHandled":
        delete state.undeliverable[k.value.commandId];
        break;
      case "disruptionBlocked": {
        state.replicas.update(k.value.replicaId, (r) => {
          r.disruptionBlocked = d.explanation;
        });
        break;
      }
      case "commandReissued":
      case "shardUnclaimed":
      case "nodeLiveness":
      case "duplicateStopped":
      case undefined:
        // Inventory facts or pure explanations (the commands below carry the
        // effect), or a decision kind this version does not know.
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
        : replicaOfShard(state, c.nodeId, shardId) || (ownerBefore?.get(`${c.nodeId}/${shardId}`) ?? "");
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
    if (!state.replicas.get(replicaId)?.shards.some((s) => s.shardId === shardId)) continue;
    state.replicas.update(replicaId, (r) => {
      const shard = r.shards.find((s) => s.shardId === shardId) as ShardState;
      if (kind === "start") {
        // Each send of a start (re-sends keep the id) restarts the wait for STARTING.
        if (shard.state === "pending") {
          shard.startCommandId = c.commandId;
          shard.startAttempts = c.attempt;
          shard.startDueMs = Number(c.deadlineUnixMs);
        }
      } else {
        shard.desired = kind === "stop" ? "stopped" : "draining";
        shard.lastChangeSeq = meta.seq;
      }
    });
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

/** The endpoint a node registered for a shard it runs (adoption keeps it), or "". */
function registeredEndpoint(
  inventory: InventoryView,
  nodeId: string,
  sessionId: string,
  shardId: string,
): string {
  const session = inventory.nodes.get(nodeId)?.session;
  if (!session || session.sessionId !== sessionId) return "";
  return session.registeredShards.find((s) => s.shardId === shardId)?.endpoint ?? "";
}

function replicaOfShard(state: ReplicasState, nodeId: string, shardId: string): string {
  return state.replicas.lookup(shardOwners, shardKey(nodeId, shardId));
}
