/**
 * Events that name a key every plain object answers to (`constructor`,
 * `__proto__`, `toString`…) as a node, gateway, replica, shard or command
 * id. The state's maps are plain objects: such a key would read or write
 * the prototype instead of an entry. Writers refuse these ids, but the log
 * is forever and an older writer may have let one in, so the folds pass
 * over such an event (it can describe nothing real) instead of throwing on
 * it or corrupting the process.
 */
import type { Event } from "../gen/llmgw/v1/events_pb.js";
import { isReservedKey } from "../ids/reserved-keys.js";

/** Up to five ids, without an array per event (this runs for every event folded). */
function reserved(a: string, b = "", c = "", d = "", e = ""): boolean {
  return isReserved(a) || isReserved(b) || isReserved(c) || isReserved(d) || isReserved(e);
}

function isReserved(id: string): boolean {
  return id !== "" && isReservedKey(id);
}

function registrationReserved(
  reg: { runningShards: Array<{ shardId: string; replicaId: string }> } | undefined,
) {
  for (const s of reg?.runningShards ?? []) if (reserved(s.shardId, s.replicaId)) return true;
  return false;
}

export function namesReservedKey(event: Event): boolean {
  const b = event.body;
  switch (b.case) {
    case "sessionOpened":
      return reserved(b.value.nodeId, b.value.gatewayId) || registrationReserved(b.value.registration);
    case "hardwareChanged":
      return reserved(b.value.nodeId) || registrationReserved(b.value.registration);
    case "sessionClosed":
      return reserved(b.value.nodeId, b.value.gatewayId);
    case "duplicateIdentity":
      return reserved(b.value.nodeId, b.value.gatewayId, b.value.heldGatewayId, b.value.heldSessionId);
    case "usageChanged":
    case "nodeCordoned":
    case "nodeUncordoned":
    case "nodeDrainRequested":
    case "gpuProblemsCleared":
    case "gpuCordoned":
    case "gpuUncordoned":
      return reserved(b.value.nodeId);
    case "shardStatus":
      return reserved(b.value.nodeId, b.value.status?.replicaId ?? "", b.value.status?.shardId ?? "");
    case "commandResult":
      return reserved(b.value.nodeId, b.value.result?.commandId ?? "");
    case "gatewayStarted":
    case "gatewayDraining":
    case "gatewayStopped":
      return reserved(b.value.gatewayId);
    case "commandUndeliverable":
      return reserved(
        b.value.nodeId,
        b.value.gatewayId,
        b.value.commandId,
        b.value.replicaId,
        b.value.shardId,
      );
    case "catalogChanged":
    case "reconcilePass":
    case "rolloutPaused":
    case "rolloutResumed":
    case undefined:
      // Written by the API and the reconciler from validated names and ids they make.
      return false;
    default: {
      const never: never = b;
      return never;
    }
  }
}
