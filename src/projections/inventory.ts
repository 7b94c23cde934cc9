/**
 * The inventory fold: nodes (hardware, sessions, liveness, usage, health,
 * cordon/drain, per-GPU faults and cordons) and gateways. Pure: no I/O, no clock.
 */
import type { Register } from "../gen/llmgw/v1/agent_pb.js";
import { type Event, Liveness, SessionClosed_Reason } from "../gen/llmgw/v1/events_pb.js";
import { fabricFrom, gpuFaultFrom, gpuFrom, registeredShardFrom, sortedRecord } from "./convert.js";
import { writable } from "./fork.js";
import type { EventMeta } from "./projection.js";
import { putRecord } from "./sorted-keys.js";
import type { InventoryState, NodeLiveness, NodeState } from "./state.js";

export function initialInventory(): InventoryState {
  return { nodes: {}, gateways: {} };
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

function nodeFor(state: InventoryState, nodeId: string, seq: number): NodeState {
  let n = writable(state.nodes, nodeId);
  if (!n) {
    n = newNode(nodeId, seq);
    putRecord(state.nodes, nodeId, n);
  }
  return n;
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
  const n = writable(state.nodes, at.nodeId);
  const g = n?.gpus.find((x) => x.index === at.gpuIndex);
  if (!n || !g) return;
  g.cordoned = cordoned;
  g.cordonReason = reason;
  n.lastChangeSeq = seq;
}

/**
 * True when an event of `sessionId` for `nodeId` comes from the node's
 * current session. Events of superseded or closed sessions are ignored.
 */
export function isCurrentSession(state: InventoryState, nodeId: string, sessionId: string): boolean {
  const s = state.nodes[nodeId]?.session;
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
      const n = nodeFor(state, v.nodeId, meta.seq);
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
      return state;
    }
    case "sessionClosed": {
      const v = body.value;
      const n = writable(state.nodes, v.nodeId);
      if (!n || n.session?.sessionId !== v.sessionId) return state;
      closeSession(n, CLOSE_REASON[v.reason] ?? "closed", meta);
      return state;
    }
    case "hardwareChanged": {
      const v = body.value;
      if (!isCurrentSession(state, v.nodeId, v.sessionId)) return state;
      const n = writable(state.nodes, v.nodeId) as NodeState;
      applyRegistration(n, v.registration);
      n.lastChangeSeq = meta.seq;
      return state;
    }
    case "usageChanged": {
      const v = body.value;
      if (!isCurrentSession(state, v.nodeId, v.sessionId)) return state;
      const n = writable(state.nodes, v.nodeId) as NodeState;
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
      const g = writable(state.gateways, body.value.gatewayId);
      if (g) {
        g.status = body.case === "gatewayDraining" ? "draining" : "stopped";
        g.lastChangeSeq = meta.seq;
      }
      return state;
    }
    case "catalogChanged":
      return state;
    case "nodeCordoned": {
      const n = nodeFor(state, body.value.nodeId, meta.seq);
      n.cordoned = true;
      n.cordonReason = body.value.reason;
      n.lastChangeSeq = meta.seq;
      return state;
    }
    case "nodeUncordoned": {
      const n = nodeFor(state, body.value.nodeId, meta.seq);
      n.cordoned = false;
      n.cordonReason = "";
      n.draining = false;
      n.lastChangeSeq = meta.seq;
      return state;
    }
    case "nodeDrainRequested": {
      const n = nodeFor(state, body.value.nodeId, meta.seq);
      n.cordoned = true;
      n.draining = true;
      n.cordonReason = body.value.reason || "draining";
      n.lastChangeSeq = meta.seq;
      return state;
    }
    case "gpuProblemsCleared": {
      const v = body.value;
      const n = writable(state.nodes, v.nodeId);
      if (!n) return state;
      if (v.nodeLevel) {
        n.nodeProblems = [];
      } else {
        const g = n.gpus.find((x) => x.index === v.gpuIndex);
        if (!g) return state;
        g.problems = [];
        g.faults = [];
      }
      n.lastChangeSeq = meta.seq;
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
          const n = writable(state.nodes, k.value.nodeId);
          const l = livenessName(k.value.liveness);
          // Only about the session it names: a node that came back since stays connected.
          if (
            !n ||
            !l ||
            n.session !== null ||
            (k.value.sessionId !== "" && k.value.sessionId !== n.lastSessionId)
          )
            continue;
          n.liveness = l;
          n.lastChangeSeq = meta.seq;
        } else if (k.case === "shardsAdopted") {
          const n = writable(state.nodes, k.value.nodeId);
          if (n?.session && n.session.sessionId === k.value.sessionId) n.session.adoptionSeq = meta.seq;
        } else if (k.case === "sessionsExpired") {
          const g = writable(state.gateways, k.value.gatewayId);
          if (g) {
            g.status = "lost";
            g.lastChangeSeq = meta.seq;
          }
          for (const s of k.value.sessions) {
            const n = writable(state.nodes, s.nodeId);
            if (n && n.session?.sessionId === s.sessionId) closeSession(n, "gateway-lost", meta);
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
