/**
 * Ready: the only replicas that count as capacity. A replica is ready when
 * it is placed, every one of its shards reports RUNNING, and none is being
 * drained or stopped. A placed replica whose engines are still loading, or
 * whose start was never acknowledged, is not.
 */
import type { DeepReadonly } from "./deep-readonly.js";
import type { ReplicaState } from "./state.js";

export function isReady(r: DeepReadonly<ReplicaState>): boolean {
  return (
    r.phase === "running" &&
    r.shards.length > 0 &&
    r.shards.every((s) => s.state === "running" && s.desired === "running")
  );
}
