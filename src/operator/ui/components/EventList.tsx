/** The events up to the current position, decoded, newest first; filterable by node, replica and kind. */
import { useEffect, useState } from "preact/hooks";
import type { Api } from "../api.ts";
import { eventWindow } from "../model.ts";
import type { EventRow } from "../types.ts";

const KINDS = [
  "",
  "reconcilePass",
  "shardStatus",
  "commandResult",
  "commandUndeliverable",
  "sessionOpened",
  "sessionClosed",
  "usageChanged",
  "catalogChanged",
  "nodeCordoned",
  "nodeUncordoned",
  "nodeDrainRequested",
  "gpuProblemsCleared",
  "gpuCordoned",
  "gpuUncordoned",
  "gatewayStarted",
];

interface Props {
  api: Api;
  seq: number;
  node: string;
  replica: string;
  onFilter(f: { node: string; replica: string }): void;
  onSeek(seq: number): void;
}

export function EventList({ api, seq, node, replica, onFilter, onSeek }: Props) {
  const [kind, setKind] = useState("");
  const [rows, setRows] = useState<EventRow[]>([]);
  const [error, setError] = useState("");
  const win = eventWindow(seq);
  useEffect(() => {
    const ctl = new AbortController();
    const t = setTimeout(() => {
      api
        .events({ ...win, node, replica, kind }, ctl.signal)
        .then((r) => {
          setRows(r.events.slice().reverse());
          setError("");
        })
        .catch((err: Error) => {
          if (!ctl.signal.aborted) setError(err.message);
        });
    }, 80);
    return () => {
      clearTimeout(t);
      ctl.abort();
    };
  }, [api, win.from, win.to, node, replica, kind]);
  return (
    <section data-testid="event-list">
      <div class="filters">
        <input
          placeholder="node"
          value={node}
          onChange={(e) => onFilter({ node: (e.currentTarget as HTMLInputElement).value.trim(), replica })}
        />
        <input
          placeholder="replica"
          value={replica}
          onChange={(e) => onFilter({ node, replica: (e.currentTarget as HTMLInputElement).value.trim() })}
        />
        <select value={kind} onChange={(e) => setKind((e.currentTarget as HTMLSelectElement).value)}>
          {KINDS.map((k) => (
            <option key={k} value={k}>
              {k || "any kind"}
            </option>
          ))}
        </select>
      </div>
      <p class="muted">
        events #{win.from}–#{win.to}
        {rows.length === 0 ? ": none match" : ""}
      </p>
      {error && <p class="error">{error}</p>}
      <ol class="events">
        {rows.map((e) => (
          <li key={e.seq} class={e.seq === seq ? "here" : ""}>
            <button
              type="button"
              class="link"
              onClick={() => onSeek(e.seq)}
              title="show the fleet after this event"
            >
              #{e.seq}
            </button>{" "}
            <span class={`kind k-${e.kind ?? "malformed"}`}>{e.kind ?? "malformed"}</span>{" "}
            <span class="text">{e.text ?? e.malformed}</span>
          </li>
        ))}
      </ol>
    </section>
  );
}
