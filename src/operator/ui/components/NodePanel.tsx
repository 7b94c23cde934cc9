/** One node: liveness, fabrics, problems, its replicas, what its drain waits on, and the operator actions (with a confirmation). */
import { useState } from "preact/hooks";
import { nodeBadges, nvlinkDomains, podOf } from "../model.ts";
import type { Node } from "../types.ts";

export type NodeAction = "cordon" | "uncordon" | "drain";

interface Props {
  node: Node;
  atLiveEnd: boolean;
  onAction(action: NodeAction, reason: string): Promise<void>;
  onReplica(id: string): void;
  onClose(): void;
}

const WHAT: Record<NodeAction, string> = {
  cordon: "takes no new work; what runs there stays",
  uncordon: "takes work again (this also ends a drain)",
  drain:
    "is cordoned and its replicas are moved elsewhere, each replacement running before the old one stops (or earlier, as far as its model's disruption budget allows)",
};

export function NodePanel({ node, atLiveEnd, onAction, onReplica, onClose }: Props) {
  const [confirm, setConfirm] = useState<NodeAction | null>(null);
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const run = async () => {
    if (!confirm) return;
    setBusy(true);
    try {
      await onAction(confirm, reason);
      setConfirm(null);
      setReason("");
      setError("");
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="panel" data-testid="node-panel">
      <header>
        <h2>node {node.nodeId}</h2>
        <button type="button" class="close" onClick={onClose} aria-label="close">
          ×
        </button>
      </header>
      <p>
        {node.liveness} · {node.gpusUsed}/{node.gpusTotal} GPUs used · fabric {podOf(node) || "none"}
        {nodeBadges(node).map((b) => (
          <span key={b.text} class={`badge b-${b.kind}`} title={b.title}>
            {b.text}
          </span>
        ))}
      </p>
      <p class="muted">
        NVLink:{" "}
        {nvlinkDomains(node)
          .map((d) => `${d.name} [${d.gpuIndices.join(",")}]`)
          .join(" · ") || "none"}
      </p>
      <p>
        {node.replicaIds.map((r) => (
          <button type="button" class="link" key={r} onClick={() => onReplica(r)}>
            {r}
          </button>
        ))}
      </p>
      {(node.draining || node.waitingOn.length > 0) && (
        <div class="drain-state" data-testid="drain-state">
          <p>
            {node.draining ? "draining" : "moving work off"}:{" "}
            {node.waitingOn.length === 0
              ? node.replicaIds.length === 0
                ? "nothing left on the node"
                : "replicas finishing their drain"
              : `waits on ${node.waitingOn.length} replica(s)`}
          </p>
          <ul>
            {node.waitingOn.map((w) => (
              <li key={w.replicaId} data-replica-id={w.replicaId} class={w.blockedByBudget ? "blocked" : ""}>
                <button type="button" class="link" onClick={() => onReplica(w.replicaId)}>
                  {w.replicaId}
                </button>{" "}
                {w.blockedByBudget && <span class="badge b-budget">disruption budget</span>} {w.reason}
              </li>
            ))}
          </ul>
        </div>
      )}
      <div class="actions">
        {(["cordon", "uncordon", "drain"] as const).map((a) => (
          <button
            type="button"
            key={a}
            data-action={a}
            disabled={!atLiveEnd}
            title={atLiveEnd ? WHAT[a] : "go live to act on the fleet as it is now"}
            onClick={() => setConfirm(a)}
          >
            {a}
          </button>
        ))}
      </div>
      {error && <p class="error">{error}</p>}
      {confirm && (
        <div class="modal" role="dialog" aria-modal="true" data-testid="confirm-dialog">
          <div class="dialog">
            <h3>
              {confirm} {node.nodeId}?
            </h3>
            <p>
              The node {WHAT[confirm]}. This is written to the log as your intent and the reconciler acts on
              it.
            </p>
            {confirm !== "uncordon" && (
              <label>
                reason{" "}
                <input
                  value={reason}
                  maxLength={500}
                  onInput={(e) => setReason((e.currentTarget as HTMLInputElement).value)}
                />
              </label>
            )}
            <div class="actions">
              <button type="button" onClick={() => setConfirm(null)} disabled={busy}>
                cancel
              </button>
              <button type="button" class="danger" data-testid="confirm" onClick={run} disabled={busy}>
                {confirm} {node.nodeId}
              </button>
            </div>
          </div>
        </div>
      )}
    </section>
  );
}
