/**
 * Failures. A shard that reports failed fails its replica (the other shards
 * are stopped; the replica is placed again) after a crash-loop backoff that
 * doubles with each restart. A model that keeps failing on one node puts the
 * pair on cooldown so placement tries elsewhere. A replica adopted with
 * fewer shards than its profile needs cannot serve: it fails too.
 */
import { decision, failReplica, sortedValues } from "./messages.js";
import type { Pass } from "./pass.js";

export function handleFailures(pass: Pass): void {
  const { crashBackoffBaseMs, crashBackoffMaxMs } = pass.config;
  for (const r of sortedValues(pass.work.replicas.replicas)) {
    if (r.phase === "draining") continue;
    const s = r.shards.find((x) => x.state === "failed" && x.desired === "running");
    if (!s) continue;
    const error = s.lastError || `exit code ${s.exitCode}`;
    const unit = failReplica(pass, r, s.shardId, s.nodeId, error);
    if (unit.decisions[0]?.kind.case === "replicaFailed") {
      const restarts = r.restarts + 1;
      const wait = Math.min(crashBackoffMaxMs, crashBackoffBaseMs * 2 ** r.restarts);
      const until = pass.nowMs + wait;
      unit.decisions.push(
        decision(
          `${r.replicaId} restart ${restarts}: waits ${Math.round(wait / 1000)}s before it is placed again`,
          {
            case: "shardBackoff",
            value: { replicaId: r.replicaId, restarts, untilUnixMs: BigInt(until) },
          },
        ),
      );
    }
    if (!pass.add(unit)) return;
  }
  startCooldowns(pass);
}

function startCooldowns(pass: Pass): void {
  const { cooldownFailures, cooldownMs } = pass.config;
  const failures = pass.work.replicas.failures;
  for (const key of Object.keys(failures).sort()) {
    const count = failures[key] ?? 0;
    if (count < cooldownFailures) continue;
    const at = key.lastIndexOf("@");
    const model = key.slice(0, at);
    const nodeId = key.slice(at + 1);
    const until = pass.nowMs + cooldownMs;
    const ok = pass.add({
      decisions: [
        decision(
          `${model} failed ${count} times on ${nodeId}: placement avoids the pair for ${Math.round(cooldownMs / 1000)}s`,
          {
            case: "cooldownStarted",
            value: { model, nodeId, failures: count, untilUnixMs: BigInt(until) },
          },
        ),
      ],
      commands: [],
    });
    if (!ok) return;
  }
}

/** Replicas adopted with missing shards: once every node's registration is handled, they are failed. */
export function failIncomplete(pass: Pass): void {
  const catalog = pass.work.replicas.catalog.models;
  for (const r of sortedValues(pass.work.replicas.replicas)) {
    if (r.phase === "draining" || r.phase === "pending" || r.shards.length === 0) continue;
    const p = catalog.find((m) => m.name === r.model)?.profiles.find((x) => x.name === r.profile);
    if (!p) continue;
    const want = Math.max(1, p.shards);
    const held = r.shards.filter((s) => s.desired !== "stopped");
    if (held.length >= want) continue;
    const first = held[0];
    const unit = failReplica(
      pass,
      r,
      "",
      "",
      `incomplete: ${held.length} of ${want} shards registered${first ? ` (on ${held.map((s) => s.nodeId).join(", ")})` : ""}`,
    );
    if (!pass.add(unit)) return;
  }
}
