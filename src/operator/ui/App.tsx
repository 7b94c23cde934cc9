/**
 * The page: a time bar over the log, the fleet map at that position, and a
 * side column (the selected replica or node, then replicas, events, what-if).
 * Every view is fetched for the position shown, so the whole page is the
 * fleet as it was there.
 */
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { Api, ApiFailure, savedToken, saveToken } from "./api.ts";
import { EventList } from "./components/EventList.tsx";
import { FleetMap } from "./components/FleetMap.tsx";
import { type NodeAction, NodePanel } from "./components/NodePanel.tsx";
import { ReplicaList } from "./components/ReplicaList.tsx";
import { ReplicaPanel } from "./components/ReplicaPanel.tsx";
import { TimeBar } from "./components/TimeBar.tsx";
import { WhatIfPanel } from "./components/WhatIfPanel.tsx";
import {
  mapRows,
  type ReplicaTraffic,
  replicaTraffic,
  type ScaleMark,
  scaleMarks,
  stepSeq,
  summarize,
  whatIfHighlights,
} from "./model.ts";
import type { Fleet, RouterRequests, WhatIfResult } from "./types.ts";

type Selected = { kind: "replica"; id: string } | { kind: "node"; id: string } | null;
type Tab = "replicas" | "events" | "what-if";

const PLAY_MS = 350;
/** How often the routers' request counts are read (they are counters of now, not of the log). */
const TRAFFIC_MS = 2_000;
/** The time bar marks the autoscale decisions among this many events up to the log's end. */
const MARK_SPAN = 20_000;

export function App() {
  const [token, setToken] = useState(savedToken());
  const api = useMemo(() => new Api(token), [token]);
  const [needToken, setNeedToken] = useState(false);
  const [fleet, setFleet] = useState<Fleet | null>(null);
  const [seq, setSeq] = useState<number | null>(null);
  const [lastSeq, setLastSeq] = useState(0);
  const [live, setLive] = useState(true);
  const [playing, setPlaying] = useState(false);
  const [selected, setSelected] = useState<Selected>(null);
  const [tab, setTab] = useState<Tab>("replicas");
  const [filter, setFilter] = useState({ text: "", problemsOnly: false });
  const [eventFilter, setEventFilter] = useState({ node: "", replica: "" });
  const [whatIf, setWhatIf] = useState<WhatIfResult | null>(null);
  const [marks, setMarks] = useState<ScaleMark[]>([]);
  const marksAt = useRef(0);
  const marksSeq = useRef(0);
  const [error, setError] = useState("");
  const [traffic, setTraffic] = useState<{ byReplica: Map<string, ReplicaTraffic>; unread: string[] }>({
    byReplica: new Map(),
    unread: [],
  });
  const liveRef = useRef(live);
  liveRef.current = live;

  const fail = useCallback((err: unknown) => {
    if (err instanceof ApiFailure && err.status === 401) setNeedToken(true);
    else if (!(err instanceof DOMException && err.name === "AbortError")) setError((err as Error).message);
  }, []);

  // Follow the live end of the log.
  useEffect(() => {
    const ctl = new AbortController();
    api
      .follow((p) => {
        setLastSeq((l) => Math.max(l, p.seq));
        if (liveRef.current) setSeq(p.seq);
      }, ctl.signal)
      .catch(fail);
    return () => ctl.abort();
  }, [api, fail]);

  // The fleet at the position shown (a drag sends many positions: only the last one counts).
  useEffect(() => {
    const ctl = new AbortController();
    const t = setTimeout(
      () => {
        api
          .fleet(seq, ctl.signal)
          .then((f) => {
            setFleet(f);
            setLastSeq((l) => Math.max(l, f.lastSeq));
            if (seq === null) setSeq(f.seq);
            setNeedToken(false);
            setError("");
          })
          .catch(fail);
      },
      seq === null ? 0 : 60,
    );
    return () => {
      clearTimeout(t);
      ctl.abort();
    };
  }, [api, seq, fail]);

  // Requests per replica through the routers, read every TRAFFIC_MS; the rate is between two reads.
  useEffect(() => {
    const ctl = new AbortController();
    let before: RouterRequests | null = null;
    const read = () =>
      api
        .routerRequests(ctl.signal)
        .then((now) => {
          setTraffic({
            byReplica: replicaTraffic(now, before),
            unread: now.routers.flatMap((r) => (r.error ? [r.error] : [])),
          });
          before = now;
        })
        .catch((err: unknown) => {
          // An API older than the route: no traffic column, no error banner.
          if (!(err instanceof ApiFailure && err.status === 404)) fail(err);
        });
    void read();
    const t = setInterval(read, TRAFFIC_MS);
    return () => {
      clearInterval(t);
      ctl.abort();
    };
  }, [api, fail]);

  // Autoscale decisions on the time bar, refreshed at most once a second as the log grows. A
  // request in flight is not cancelled by the next position (under steady traffic none would finish).
  useEffect(() => {
    if (lastSeq === 0) return;
    const t = setTimeout(
      () => {
        marksAt.current = Date.now();
        const asked = lastSeq;
        api
          .passes(asked, MARK_SPAN)
          .then((r) => {
            // An older answer arriving late does not replace a newer one.
            if (asked >= marksSeq.current) {
              marksSeq.current = asked;
              setMarks(scaleMarks(r.events));
            }
          })
          .catch(fail);
      },
      Math.max(0, marksAt.current + 1000 - Date.now()),
    );
    return () => clearTimeout(t);
  }, [api, lastSeq, fail]);

  // Play: one event forward at a time; reaching the end goes live.
  useEffect(() => {
    if (!playing) return;
    const t = setInterval(() => {
      setSeq((s) => {
        const next = stepSeq(s ?? 0, 1, lastSeq);
        if (next >= lastSeq) {
          setPlaying(false);
          setLive(true);
        }
        return next;
      });
    }, PLAY_MS);
    return () => clearInterval(t);
  }, [playing, lastSeq]);

  const seek = (s: number) => {
    setPlaying(false);
    setLive(s >= lastSeq);
    setSeq(Math.max(0, Math.min(s, lastSeq)));
  };
  const goLive = () => {
    setPlaying(false);
    setLive(true);
    setSeq(lastSeq);
  };
  const nodeAction = async (nodeId: string, action: NodeAction, reason: string) => {
    const r = await api.nodeAction(nodeId, action, reason);
    setLastSeq((l) => Math.max(l, r.seq));
    goLive();
    setSeq(r.seq);
  };

  const shown = fleet?.seq ?? 0;
  const rows = useMemo(() => (fleet ? mapRows(fleet.nodes, filter) : []), [fleet, filter]);
  const highlights = useMemo(() => whatIfHighlights(whatIf), [whatIf]);
  const sum = fleet ? summarize(fleet) : null;
  const selectedNode =
    selected?.kind === "node" ? fleet?.nodes.find((n) => n.nodeId === selected.id) : undefined;
  const selectReplica = (id: string) => setSelected({ kind: "replica", id });
  const selectNode = (id: string) => setSelected({ kind: "node", id });

  return (
    <div class="app" data-seq={shown} data-last-seq={lastSeq} data-live={String(live)}>
      <header class="top">
        <h1>llmgw</h1>
        {sum && (
          <span class="summary" data-testid="summary">
            {sum.nodes} nodes · {sum.gpusUsed}/{sum.gpus} GPUs · {sum.replicas.running} running ·{" "}
            {sum.replicas.placed} starting · {sum.replicas.pending} pending · {sum.replicas.draining} draining
          </span>
        )}
        <input
          class="search"
          placeholder="filter nodes, replicas, models"
          value={filter.text}
          onInput={(e) => setFilter({ ...filter, text: (e.currentTarget as HTMLInputElement).value })}
        />
        <label class="muted">
          <input
            type="checkbox"
            checked={filter.problemsOnly}
            onChange={(e) =>
              setFilter({ ...filter, problemsOnly: (e.currentTarget as HTMLInputElement).checked })
            }
          />{" "}
          flagged only
        </label>
        <form
          class="token"
          onSubmit={(e) => {
            e.preventDefault();
            const v = (new FormData(e.currentTarget as HTMLFormElement).get("token") as string).trim();
            saveToken(v);
            setToken(v);
          }}
        >
          <input
            name="token"
            type="password"
            placeholder={needToken ? "API token needed" : "API token (not needed with --dev)"}
            class={needToken ? "need" : ""}
            autoComplete="off"
          />
          <button type="submit">use</button>
        </form>
      </header>
      <TimeBar
        seq={seq ?? 0}
        lastSeq={lastSeq}
        timeMs={fleet?.timeMs ?? 0}
        live={live}
        playing={playing}
        onSeek={seek}
        onStep={(d) => seek(stepSeq(seq ?? 0, d, lastSeq))}
        onPlay={() => {
          if (!playing && (seq ?? 0) >= lastSeq) return;
          setLive(false);
          setPlaying(!playing);
        }}
        onLive={goLive}
        marks={marks}
        onTime={(time) => {
          const ms = Date.parse(time);
          if (Number.isNaN(ms)) {
            setError(`not a time: ${time} (write it as 2026-12-01T10:00:00Z)`);
            return;
          }
          api.fleetAtTime(new Date(ms).toISOString()).then((f) => seek(f.seq), fail);
        }}
      />
      {error && <p class="error banner">{error}</p>}
      {needToken && (
        <p class="error banner">This API needs a token: enter it above (kept in this tab only).</p>
      )}
      <main>
        <FleetMap
          rows={rows}
          selectedNode={selected?.kind === "node" ? selected.id : null}
          selectedReplica={selected?.kind === "replica" ? selected.id : null}
          highlights={highlights}
          onNode={selectNode}
          onReplica={selectReplica}
        />
        <aside>
          {selected?.kind === "replica" && (
            <ReplicaPanel
              api={api}
              replicaId={selected.id}
              seq={shown}
              onSeek={seek}
              onNode={selectNode}
              onClose={() => setSelected(null)}
            />
          )}
          {selectedNode && (
            <NodePanel
              node={selectedNode}
              atLiveEnd={live}
              onAction={(a, reason) => nodeAction(selectedNode.nodeId, a, reason)}
              onReplica={selectReplica}
              onClose={() => setSelected(null)}
            />
          )}
          <nav class="tabs">
            {(["replicas", "events", "what-if"] as const).map((t) => (
              <button
                type="button"
                key={t}
                class={tab === t ? "on" : ""}
                onClick={() => setTab(t)}
                data-tab={t}
              >
                {t}
              </button>
            ))}
          </nav>
          {tab === "replicas" && fleet && (
            <ReplicaList
              replicas={fleet.replicas}
              readiness={fleet.readiness}
              rollouts={fleet.rollouts}
              traffic={traffic.byReplica}
              trafficUnread={traffic.unread}
              selected={selected?.kind === "replica" ? selected.id : null}
              onSelect={selectReplica}
            />
          )}
          {tab === "events" && (
            <EventList
              api={api}
              seq={shown}
              node={eventFilter.node}
              replica={eventFilter.replica}
              onFilter={setEventFilter}
              onSeek={seek}
            />
          )}
          {tab === "what-if" && (
            <WhatIfPanel api={api} lastSeq={lastSeq} result={whatIf} onResult={setWhatIf} onSeek={seek} />
          )}
        </aside>
      </main>
    </div>
  );
}
