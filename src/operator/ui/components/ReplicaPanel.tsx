/** One replica: where it is and why (the decision with its runners-up), or why it waits; and its history. */
import { useEffect, useState } from "preact/hooks";
import { type Api, ApiFailure } from "../api.ts";
import type { Explain, HistoryEntry, Replica } from "../types.ts";
import { EngineLogs } from "./EngineLogs.tsx";

interface Props {
  api: Api;
  replicaId: string;
  seq: number;
  onSeek(seq: number): void;
  onNode(id: string): void;
  onClose(): void;
}

/** Where rank 0 serves, and whether the routing table sends requests there (ready: every shard runs, none leaving). */
function Serves({ replica }: { replica: Replica }) {
  const head = replica.shards.find((s) => s.rank === 0);
  if (!head?.endpoint) return null;
  return (
    <p data-testid="replica-endpoint">
      serves at <code>{head.endpoint}</code>{" "}
      <span class="muted">{replica.ready ? "· in the routing table" : "· not routed (not ready)"}</span>
    </p>
  );
}

export function ReplicaPanel({ api, replicaId, seq, onSeek, onNode, onClose }: Props) {
  const [explain, setExplain] = useState<Explain | null>(null);
  const [history, setHistory] = useState<HistoryEntry[]>([]);
  const [error, setError] = useState("");
  useEffect(() => {
    let stale = false;
    Promise.all([api.explain(replicaId, seq), api.history(replicaId, seq)]).then(
      ([e, h]) => {
        if (stale) return;
        setExplain(e);
        setHistory(h.history);
        setError("");
      },
      (err: Error) => {
        if (stale) return;
        setExplain(null);
        setHistory([]);
        setError(
          err instanceof ApiFailure && err.status === 404
            ? `The log up to #${seq} does not mention ${replicaId} yet.`
            : err.message,
        );
      },
    );
    return () => {
      stale = true;
    };
  }, [api, replicaId, seq]);
  const r = explain?.replica;
  return (
    <section class="panel" data-testid="replica-panel">
      <header>
        <h2>replica {replicaId}</h2>
        <button type="button" class="close" onClick={onClose} aria-label="close">
          ×
        </button>
      </header>
      {error && <p class="error">{error}</p>}
      {explain && !r && (
        <p class="muted">Not in the fleet at #{explain.seq} (removed, or not created yet).</p>
      )}
      {r && (
        <p>
          <span class={`phase p-${r.phase}`}>{r.phase}</span> {r.model} {r.profile && `· ${r.profile}`}{" "}
          {r.nodeIds.map((n) => (
            <button type="button" class="link" key={n} onClick={() => onNode(n)}>
              {n}
            </button>
          ))}
          {r.replaces && <span class="muted"> · replaces {r.replaces}</span>}
          {r.replacedBy && <span class="muted"> · replaced by {r.replacedBy}</span>}
          <span class="muted"> · {r.ready ? "ready" : "not ready"}</span>
        </p>
      )}
      {r && <Serves replica={r} />}
      {r && r.shards.length > 0 && <EngineLogs api={api} replicaId={replicaId} />}
      {r?.lastFailure && (
        <div class="failure" data-testid="last-failure">
          <h3>
            Last failure at{" "}
            <button type="button" class="link" onClick={() => onSeek(r.lastFailure?.seq ?? 0)}>
              #{r.lastFailure.seq}
            </button>
            : {r.lastFailure.reason}
            {r.lastFailure.nodeId && ` on ${r.lastFailure.nodeId}`}
            {r.lastFailure.exitCode !== 0 && ` · exit code ${r.lastFailure.exitCode}`}
          </h3>
          <p>{r.lastFailure.message}</p>
          {r.lastFailure.lastOutput && <pre class="output">{r.lastFailure.lastOutput}</pre>}
        </div>
      )}
      {explain?.pending && (
        <div class="pending" data-testid="pending-reasons">
          <h3>
            Why pending: {explain.pending.nodesFit}/{explain.pending.nodesConsidered} nodes fit
          </h3>
          <table>
            <tbody>
              {explain.pending.ruledOut.map((o) => (
                <tr key={o.reason}>
                  <td class="num">{o.nodes}</td>
                  <td>{o.reason}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p class="muted">{explain.pending.explanation}</p>
        </div>
      )}
      {explain?.placement && (
        <div class="placement" data-testid="placement">
          <h3>
            Placed at{" "}
            <button type="button" class="link" onClick={() => onSeek(explain.placement?.seq ?? 0)}>
              #{explain.placement.seq}
            </button>{" "}
            · policy {explain.placement.policy || "?"} · {explain.placement.profile}
          </h3>
          <table>
            <thead>
              <tr>
                <th />
                <th>nodes</th>
                <th class="num">score</th>
              </tr>
            </thead>
            <tbody>
              {explain.placement.chosen && (
                <tr class="chosen">
                  <td>chosen</td>
                  <td>{explain.placement.chosen.nodeIds.join(" + ")}</td>
                  <td class="num">{explain.placement.chosen.score.toFixed(3)}</td>
                </tr>
              )}
              {explain.placement.runnersUp.map((c, i) => (
                <tr key={c.nodeIds.join("+")}>
                  <td>#{i + 2}</td>
                  <td>{c.nodeIds.join(" + ")}</td>
                  <td class="num">{c.score.toFixed(3)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p class="muted">{explain.placement.explanation}</p>
        </div>
      )}
      <h3>History</h3>
      <ol class="history" data-testid="replica-history">
        {history.map((h) => (
          <li key={`${h.seq}:${h.kind}:${h.text}`}>
            <button type="button" class="link" onClick={() => onSeek(h.seq)}>
              #{h.seq}
            </button>{" "}
            <span class={`kind k-${h.kind}`}>{h.kind}</span> {h.text}
          </li>
        ))}
      </ol>
    </section>
  );
}
