/**
 * The inventory fold: nodes (hardware, sessions, liveness, usage, health,
 * cordon/drain, per-GPU faults and cordons) and gateways. Pure: no I/O, no clock.
 */
import type { Register } from "../gen/llmgw/v1/agent_pb.js";
import { type Event, Liveness, SessionClosed_Reason } from "../gen/llmgw/v1/events_pb.js";
import { fabricFrom, gpuFaultFrom, gpuFrom, registeredShardFrom, sortedRecord } from "./convert.js";
import { NODE_INDEXES } from "./fleet-indexes.js";
import type { EventMeta } from "./projection.js";
import { RecordTable } from "./record-table.js";
import type { GatewayState, InventoryState, InventoryView, NodeLiveness, NodeState } from "./state.js";

export function initialInventory(): InventoryState {
  return { nodes: new RecordTable(NODE_INDEXES), gateways: {} };
}

function newNode(nodeId: string, seq: number): NodeState {
  return {
    nodeId,
    agentVersion: "",
    advertiseAddress: "",
    labels: {},
    gpus: [],
    fabrics: [],
    nodeProblems: [],
    session: null,
    lastSessionId: "",
    liveness: "disconnected",
    disconnectedSinceMs: null,
    lastCloseReason: "",
    cordoned: false,
    cordonReason: "",
    draining: false,
    firstSeenSeq: seq,
    lastChangeSeq: seq,
  };
}

/** Changes node `nodeId`, added first if it is new. */
function updateNode(
  state: InventoryState,
  nodeId: string,
  seq: number,
  change: (n: NodeState) => void,
): void {
  if (!state.nodes.has(nodeId)) state.nodes.put(nodeId, newNode(nodeId, seq));
  state.nodes.update(nodeId, change);
}

/**
 * Gateway records are replaced whole, never changed in place: a pass's
 * fork copies the gateways container and shares its records.
 */
function updateGateway(state: InventoryState, gatewayId: string, change: Partial<GatewayState>): void {
  const g = state.gateways[gatewayId];
  if (g) state.gateways[gatewayId] = { ...g, ...change };
}

function applyRegistration(n: NodeState, reg: Register | undefined): void {
  if (!reg) return;
  const cordons = new Map(n.gpus.filter((g) => g.cordoned).map((g) => [g.index, g.cordonReason]));
  n.agentVersion = reg.agentVersion;
  n.advertiseAddress = reg.advertiseAddress;
  n.labels = sortedRecord(reg.labels);
  // A GPU cordon is operator intent and outlives a registration. So do the
  // problems of a GPU still there (same index, same UUID): an agent reports
  // each occurrence once, and only `gpu clear` ends it. A GPU with another
  // UUID is other hardware, and starts clean.
  const before = new Map(n.gpus.map((g) => [g.index, g]));
  n.gpus = reg.gpus.map((g) => {
    const gpu = gpuFrom(g);
    const reason = cordons.get(gpu.index);
    if (reason !== undefined) {
      gpu.cordoned = true;
      gpu.cordonReason = reason;
    }
    const old = before.get(gpu.index);
    if (old && old.uuid === gpu.uuid) {
      gpu.problems = [...old.problems, ...gpu.problems.filter((p) => !old.problems.includes(p))];
      gpu.faults = old.faults.map((f) => ({ ...f }));
    }
    return gpu;
  });
  n.fabrics = reg.fabrics.map(fabricFrom);
}

/** A GPU cordon on or off; intent for a node or GPU never seen changes nothing. */
function setGpuCordon(
  state: InventoryState,
  at: { nodeId: string; gpuIndex: number },
  cordoned: boolean,
  reason: string,
  seq: number,
): void {
  if (!state.nodes.get(at.nodeId)?.gpus.some((x) => x.index === at.gpuIndex)) return;
  state.nodes.update(at.nodeId, (n) => {
    const g = n.gpus.find((x) => x.index === at.gpuIndex);
    if (!g) return;
    g.cordoned = cordoned;
    g.cordonReason = reason;
    n.lastChangeSeq = seq;
  });
}

/**
 * True when an event of `sessionId` for `nodeId` comes from the node's
 * current session. Events of superseded or closed sessions are ignored.
 */
export function isCurrentSession(state: InventoryView, nodeId: string, sessionId: string): boolean {
  const s = state.nodes.get(nodeId)?.session;
  return s !== null && s !== undefined && s.sessionId === sessionId;
}

const CLOSE_REASON: Record<SessionClosed_Reason, string> = {
  [SessionClosed_Reason.UNSPECIFIED]: "closed",
  [SessionClosed_Reason.DISCONNECTED]: "disconnected",
  [SessionClosed_Reason.SILENT]: "silent",
  [SessionClosed_Reason.SUPERSEDED]: "superseded",
  [SessionClosed_Reason.GATEWAY_DRAINING]: "gateway-draining",
  [SessionClosed_Reason.SLOW_CONSUMER]: "slow-consumer",
  [SessionClosed_Reason.PROTOCOL_ERROR]: "protocol-error",
  [SessionClosed_Reason.LOG_UNAVAILABLE]: "log-unavailable",
  [SessionClosed_Reason.EXPIRED]: "expired",
  [SessionClosed_Reason.REVOKED]: "revoked",
  [SessionClosed_Reason.EVENT_BUDGET]: "event-budget",
};

function closeSession(n: NodeState, reason: string, meta: EventMeta): void {
  n.session = null;
  n.liveness = "disconnected";
  n.disconnectedSinceMs = meta.timeMs;
  n.lastCloseReason = reason;
  n.lastChangeSeq = meta.seq;
}

function livenessName(l: Liveness): NodeLiveness | undefined {
  switch (l) {
    case Liveness.CONNECTED:
      return "connected";
    case Liveness.DISCONNECTED:
      return "disconnected";
    case Liveness.SUSPECT:
      return "suspect";
    case Liveness.LOST:
      return "lost";
    default:
      return undefined;
  }
}

export function evolveInventory(state: InventoryState, event: Event, meta: EventMeta): InventoryState {
  const body = event.body;
  switch (body.case) {
    case "sessionOpened": {
      const v = body.value;
      updateNode(state, v.nodeId, meta.seq, (n) => {
        // The newest session wins: whatever was current is superseded.
        n.session = {
          sessionId: v.sessionId,
          gatewayId: v.gatewayId,
          openedSeq: meta.seq,
          openedAtMs: meta.timeMs,
          identity: v.identity,
          registeredShards: (v.registration?.runningShards ?? []).map(registeredShardFrom),
          adoptionSeq: 0,
        };
        n.lastSessionId = v.sessionId;
        n.liveness = "connected";
        n.disconnectedSinceMs = null;
        n.lastCloseReason = "";
        applyRegistration(n, v.registration);
        n.lastChangeSeq = meta.seq;
      });
      return state;
    }
    case "sessionClosed": {
      const v = body.value;
      if (state.nodes.get(v.nodeId)?.session?.sessionId !== v.sessionId) return state;
      state.nodes.update(v.nodeId, (n) => closeSession(n, CLOSE_REASON[v.reason] ?? "closed", meta));
      return state;
    }
    case "hardwareChanged": {
      const v = body.value;
      if (!isCurrentSession(state, v.nodeId, v.sessionId)) return state;
      state.nodes.update(v.nodeId, (n) => {
        applyRegistration(n, v.registration);
        n.lastChangeSeq = meta.seq;
      });
      return state;
    }
    case "usageChanged": {
      const v = body.value;
      if (!isCurrentSession(state, v.nodeId, v.sessionId)) return state;
      state.nodes.update(v.nodeId, (n) => {
        v.gpuMemoryUsedMb.forEach((used, i) => {
          const g = n.gpus[i];
          if (g) g.memoryUsedMb = Number(used);
        });
        for (const p of v.newProblems) if (!n.nodeProblems.includes(p)) n.nodeProblems.push(p);
        for (const p of v.gpuProblems) {
          const g = n.gpus.find((x) => x.index === p.gpuIndex);
          const f = gpuFaultFrom(p);
          if (g && !g.faults.some((x) => x.kind === f.kind && x.message === f.message)) g.faults.push(f);
        }
        n.lastChangeSeq = meta.seq;
      });
      return state;
    }
    case "shardStatus":
    case "commandResult":
      // Replica facts: folded by the replicas projection.
      return state;
    case "gatewayStarted": {
      const v = body.value;
      state.gateways[v.gatewayId] = {
        gatewayId: v.gatewayId,
        status: "running",
        listenAddress: v.listenAddress,
        version: v.version,
        leaseTtlMs: v.leaseTtlMs,
        startedSeq: meta.seq,
        lastChangeSeq: meta.seq,
      };
      return state;
    }
    case "gatewayDraining":
    case "gatewayStopped": {
      updateGateway(state, body.value.gatewayId, {
        status: body.case === "gatewayDraining" ? "draining" : "stopped",
        lastChangeSeq: meta.seq,
      });
      return state;
    }
    case "catalogChanged":
      return state;
    case "nodeCordoned": {
      updateNode(state, body.value.nodeId, meta.seq, (n) => {
        n.cordoned = true;
        n.cordonReason = body.value.reason;
        n.lastChangeSeq = meta.seq;
      });
      return state;
    }
    case "nodeUncordoned": {
      updateNode(state, body.value.nodeId, meta.seq, (n) => {
        n.cordoned = false;
        n.cordonReason = "";
        n.draining = false;
        n.lastChangeSeq = meta.seq;
      });
      return state;
    }
    case "nodeDrainRequested": {
      updateNode(state, body.value.nodeId, meta.seq, (n) => {
        n.cordoned = true;
        n.draining = true;
        n.cordonReason = body.value.reason || "draining";
        n.lastChangeSeq = meta.seq;
      });
      return state;
    }
    case "gpuProblemsCleared": {
      const v = body.value;
      const node = state.nodes.get(v.nodeId);
      if (!node || (!v.nodeLevel && !node.gpus.some((x) => x.index === v.gpuIndex))) return state;
      state.nodes.update(v.nodeId, (n) => {
        if (v.nodeLevel) n.nodeProblems = [];
        else {
          const g = n.gpus.find((x) => x.index === v.gpuIndex) as (typeof n.gpus)[number];
          g.problems = [];
          g.faults = [];
        }
        n.lastChangeSeq = meta.seq;
      });
      return state;
    }
    case "gpuCordoned":
      setGpuCordon(state, body.value, true, body.value.reason, meta.seq);
      return state;
    case "gpuUncordoned":
      setGpuCordon(state, body.value, false, "", meta.seq);
      return state;
    case "reconcilePass": {
      for (const d of body.value.decisions) {
        const k = d.kind;
        if (k.case === "nodeLiveness") {
          const n = state.nodes.get(k.value.nodeId);
          const l = livenessName(k.value.liveness);
          // Only about the session it names: a node that came back since stays connected.
          if (
            !n ||
            !l ||
            n.session !== null ||
            (k.value.sessionId !== "" && k.value.sessionId !== n.lastSessionId)
          )
            continue;
          state.nodes.update(k.value.nodeId, (w) => {
            w.liveness = l;
            w.lastChangeSeq = meta.seq;
          });
        } else if (k.case === "shardsAdopted") {
          if (state.nodes.get(k.value.nodeId)?.session?.sessionId === k.value.sessionId)
            state.nodes.update(k.value.nodeId, (n) => {
              if (n.session) n.session.adoptionSeq = meta.seq;
            });
        } else if (k.case === "sessionsExpired") {
          updateGateway(state, k.value.gatewayId, { status: "lost", lastChangeSeq: meta.seq });
          for (const s of k.value.sessions) {
            if (state.nodes.get(s.nodeId)?.session?.sessionId === s.sessionId)
              state.nodes.update(s.nodeId, (n) => closeSession(n, "gateway-lost", meta));
          }
        }
      }
      return state;
    }
    case "commandUndeliverable":
      // The session's end is the SessionClosed that follows; the replicas fold keeps the command.
      return state;
    case "duplicateIdentity":
      // A refused newcomer: the live session, the node's current one, is unchanged.
      return state;
    case "rolloutPaused":
    case "rolloutResumed":
      // A model's rollout: the replicas fold keeps it.
      return state;
    case undefined:
      // An event kind from a newer version: nothing this version can fold.
      return state;
    default: {
      const never: never = body;
      return never;
    }
  }
}
