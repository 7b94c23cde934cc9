/** Nodes as rows (grouped by InfiniBand fabric), GPUs as cells; only the rows in view are rendered. */
import { useEffect, useRef, useState } from "preact/hooks";
import {
  cellView,
  type MapRow,
  nodeBadges,
  nvlinkDomainOfGpu,
  nvlinkDomains,
  visibleWindow,
} from "../model.ts";
import type { Node } from "../types.ts";

export const ROW_HEIGHT = 44;

interface Props {
  rows: MapRow[];
  selectedNode: string | null;
  selectedReplica: string | null;
  highlights: Map<string, string[]>;
  onNode(id: string): void;
  onReplica(id: string): void;
}

export function FleetMap({ rows, selectedNode, selectedReplica, highlights, onNode, onReplica }: Props) {
  const box = useRef<HTMLDivElement>(null);
  const [scroll, setScroll] = useState({ top: 0, height: 600 });
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const update = () => setScroll({ top: el.scrollTop, height: el.clientHeight });
    update();
    const ro = new ResizeObserver(update);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  const win = visibleWindow(scroll.top, scroll.height, ROW_HEIGHT, rows.length);
  return (
    <div
      class="map"
      ref={box}
      data-testid="fleet-map"
      onScroll={(e) => {
        const el = e.currentTarget as HTMLDivElement;
        setScroll({ top: el.scrollTop, height: el.clientHeight });
      }}
    >
      <div style={{ height: `${win.padTop}px` }} />
      {rows.slice(win.start, win.end).map((row) =>
        row.type === "fabric" ? (
          <div class="fabric-row" key={`f:${row.name}`} style={{ height: `${ROW_HEIGHT}px` }}>
            <span class="fabric-name">⇄ {row.name}</span>
            <span class="muted">
              {row.nodes} node{row.nodes === 1 ? "" : "s"} · {row.gpusUsed}/{row.gpus} GPUs used
            </span>
          </div>
        ) : (
          <NodeRow
            key={row.node.nodeId}
            node={row.node}
            selected={row.node.nodeId === selectedNode}
            selectedReplica={selectedReplica}
            highlight={highlights.get(row.node.nodeId)}
            onNode={onNode}
            onReplica={onReplica}
          />
        ),
      )}
      <div style={{ height: `${win.padBottom}px` }} />
    </div>
  );
}

function NodeRow(props: {
  node: Node;
  selected: boolean;
  selectedReplica: string | null;
  highlight: string[] | undefined;
  onNode(id: string): void;
  onReplica(id: string): void;
}) {
  const { node } = props;
  const badges = nodeBadges(node);
  const domainOf = nvlinkDomainOfGpu(node);
  const domains = nvlinkDomains(node);
  // Consecutive GPUs of one NVLink domain are drawn inside one frame.
  const groups: Array<{ domain: number; gpus: Node["gpus"] }> = [];
  for (const g of node.gpus) {
    const d = domainOf.get(g.index) ?? -1;
    const last = groups.at(-1);
    if (last && last.domain === d) last.gpus.push(g);
    else groups.push({ domain: d, gpus: [g] });
  }
  const cls = [
    "node-row",
    `live-${node.liveness}`,
    props.selected ? "selected" : "",
    props.highlight ? "whatif" : "",
    node.cordoned ? "cordoned" : "",
  ].join(" ");
  return (
    <div
      class={cls}
      style={{ height: `${ROW_HEIGHT}px` }}
      data-node={node.nodeId}
      title={props.highlight?.join("\n")}
    >
      <button type="button" class="node-name" onClick={() => props.onNode(node.nodeId)} title={node.nodeId}>
        <span class="id">{node.nodeId}</span>
        <span class="badges">
          {badges.map((b) => (
            <span key={b.text} class={`badge b-${b.kind}`} title={b.title} data-badge={b.kind}>
              {b.text}
            </span>
          ))}
        </span>
      </button>
      <div class="gpus">
        {groups.map((grp) => (
          <span
            key={grp.gpus[0]?.index}
            class={grp.domain >= 0 ? "nvl" : "nvl none"}
            title={grp.domain >= 0 ? `NVLink domain ${domains[grp.domain]?.name ?? ""}` : "no NVLink domain"}
          >
            {grp.gpus.map((g) => {
              const c = cellView(g);
              const mine = props.selectedReplica !== null && c.replicaIds.includes(props.selectedReplica);
              return (
                <button
                  type="button"
                  key={g.index}
                  class={`gpu s-${c.state}${c.problem ? " problem" : ""}${c.shared ? " shared" : ""}${mine ? " mine" : ""}`}
                  title={c.title}
                  data-gpu={g.index}
                  data-state={c.state}
                  data-replica={c.replicaIds[0] ?? ""}
                  onClick={() =>
                    c.replicaIds[0] ? props.onReplica(c.replicaIds[0]) : props.onNode(node.nodeId)
                  }
                >
                  <span class="l1">{c.label}</span>
                  <span class="l2">{c.sublabel}</span>
                </button>
              );
            })}
          </span>
        ))}
      </div>
    </div>
  );
}
