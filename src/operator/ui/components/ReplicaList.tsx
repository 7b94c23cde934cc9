/**
 * Every replica at the current position, those needing a look (pending,
 * draining) first, each with its requests through the routers now.
 */
import { type ReplicaTraffic, rolloutLine, sortReplicas, trafficLine } from "../model.ts";
import type { ModelReadiness, Replica, Rollout } from "../types.ts";

export function ReplicaList(props: {
  replicas: Replica[];
  readiness: ModelReadiness[];
  rollouts: Rollout[];
  /** Requests per replica as the routers count them now (empty: no router read). */
  traffic: Map<string, ReplicaTraffic>;
  /** Routers the API could not read, and why. */
  trafficUnread: string[];
  selected: string | null;
  onSelect(id: string): void;
}) {
  const list = sortReplicas(props.replicas);
  const rolling = props.rollouts.flatMap((r) => {
    const line = rolloutLine(r);
    return line === null ? [] : [{ r, line }];
  });
  const readiness = (
    <>
      <ul class="readiness" data-testid="readiness">
        {props.readiness.map((m) => (
          <li key={m.model} class={m.ready < m.desired ? "short" : ""} data-model={m.model}>
            {m.model} <b>{m.ready}</b>/{m.desired} ready
            {m.minAvailable !== "" && (
              <span
                class={m.ready <= m.keepsReady ? "budget at-limit" : "budget"}
                title="disruption budget: drains and GPU-fault moves keep at least this many ready"
              >
                {" "}
                · min {m.minAvailable}
                {m.minAvailable === String(m.keepsReady) ? "" : ` (${m.keepsReady})`}
              </span>
            )}
          </li>
        ))}
      </ul>
      {props.trafficUnread.map((why) => (
        <p key={why} class="muted" data-testid="traffic-unread">
          requests per replica: {why}
        </p>
      ))}
      {rolling.length > 0 && (
        <ul class="rollouts" data-testid="rollouts">
          {rolling.map(({ r, line }) => (
            <li key={r.model} class={r.stalled ? "stalled" : ""} data-model={r.model}>
              {line}
            </li>
          ))}
        </ul>
      )}
    </>
  );
  if (list.length === 0)
    return (
      <>
        {readiness}
        <p class="muted">No replicas at this point of the log.</p>
      </>
    );
  return (
    <>
      {readiness}
      <ul class="replicas" data-testid="replica-list">
        {list.map((r) => {
          const t = props.traffic.get(r.replicaId);
          return (
            <li key={r.replicaId}>
              <button
                type="button"
                class={r.replicaId === props.selected ? "selected" : ""}
                data-replica-id={r.replicaId}
                data-phase={r.phase}
                onClick={() => props.onSelect(r.replicaId)}
              >
                <span class={`phase p-${r.phase}`}>{r.phase}</span>
                <span class="rid">{r.replicaId}</span>
                <span class="muted">
                  {r.nodeIds.join(" + ") || r.pendingReason}
                  {r.revision && ` · rev ${r.revision}`}
                  {r.lastFailure && ` · last failure: ${r.lastFailure.reason}`}
                </span>
                {t && (
                  <span
                    class={t.inFlight > 0 ? "traffic busy" : "traffic"}
                    data-testid="traffic"
                    data-in-flight={t.inFlight}
                    data-total={t.total}
                    title="requests through the routers now: in flight, answered in total, per second since the last read"
                  >
                    {trafficLine(t)}
                  </span>
                )}
              </button>
            </li>
          );
        })}
      </ul>
    </>
  );
}
