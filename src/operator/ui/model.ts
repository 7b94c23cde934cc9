/**
 * State to view, for the fleet map and panels: pure functions of the API's
 * answers (no DOM, no fetch), unit-tested on their own.
 */
import type { EventRow, Fleet, Gpu, Node, Replica, Rollout, RouterRequests, WhatIfResult } from "./types.ts";

// ---- GPU cells ----

export type CellState = "free" | "starting" | "running" | "draining" | "stopped" | "failed" | "other";

export interface CellView {
  state: CellState;
  /** Short text in the cell: the model and the replica. */
  label: string;
  sublabel: string;
  /** Hover text with every detail. */
  title: string;
  replicaIds: string[];
  problem: boolean;
  /** More than one shard claims the GPU (a make-before-break overlap or a bug to look at). */
  shared: boolean;
}

export function cellState(state: string | undefined): CellState {
  switch (state) {
    case undefined:
      return "free";
    case "starting":
    case "running":
    case "draining":
    case "stopped":
    case "failed":
      return state;
    default:
      return "other";
  }
}

/** Model names are long ("llama-3.3-70b"); the size part is what tells replicas apart at a glance. */
export function shortModel(model: string): string {
  const m = /(\d+x)?\d+(\.\d+)?[bBmM]$/.exec(model);
  const family = model.split(/[-_.]/)[0] ?? model;
  return m ? `${family.slice(0, 6)} ${m[0]}` : model.slice(0, 12);
}

/** "r-llama-3-3-70b-2" → "…70b-2": the end of an id is what differs between replicas. */
export function shortReplica(id: string, max = 10): string {
  return id.length <= max ? id : `…${id.slice(-(max - 1))}`;
}

export function cellView(gpu: Gpu): CellView {
  const first = gpu.shards[0];
  const problem = gpu.problems.length > 0 || gpu.faults.length > 0;
  const mem = `${Math.round(gpu.memoryUsedMb / 1024)}/${Math.round(gpu.memoryTotalMb / 1024)} GiB`;
  const lines = [`GPU ${gpu.index} · ${gpu.product} · ${mem}`];
  for (const s of gpu.shards) lines.push(`${s.model} · ${s.replicaId} · ${s.shardId} · ${s.state}`);
  if (problem) lines.push(`problems: ${gpuProblemTexts(gpu).join(", ")}`);
  if (gpu.cordoned) lines.push(`cordoned${gpu.cordonReason ? `: ${gpu.cordonReason}` : ""}`);
  if (!first) {
    return {
      state: "free",
      label: problem ? "problem" : gpu.cordoned ? "cordoned" : "free",
      sublabel: "",
      title: lines.join("\n"),
      replicaIds: [],
      problem,
      shared: false,
    };
  }
  return {
    state: cellState(first.state),
    label: shortModel(first.model),
    sublabel: shortReplica(first.replicaId),
    title: lines.join("\n"),
    replicaIds: [...new Set(gpu.shards.map((s) => s.replicaId))],
    problem,
    shared: gpu.shards.length > 1,
  };
}

/** A GPU's problems for people: as registered, then as heartbeats reported them ("xid: …"). */
function gpuProblemTexts(gpu: Gpu): string[] {
  return [...gpu.problems, ...gpu.faults.map((f) => `${f.kind}: ${f.message}`)];
}

// ---- node badges ----

export interface Badge {
  text: string;
  kind: "suspect" | "lost" | "disconnected" | "cordoned" | "draining" | "problem";
  title: string;
}

export function nodeBadges(node: Node): Badge[] {
  const out: Badge[] = [];
  switch (node.liveness) {
    case "suspect":
      out.push({ text: "suspect", kind: "suspect", title: "no session for a while: takes no new work" });
      break;
    case "lost":
      out.push({ text: "lost", kind: "lost", title: "gone too long: its replicas are placed elsewhere" });
      break;
    case "disconnected":
      out.push({ text: "disconnected", kind: "disconnected", title: "no session; not yet suspect" });
      break;
    case "connected":
      break;
    default: {
      const never: never = node.liveness;
      void never;
    }
  }
  if (node.draining)
    out.push({ text: "draining", kind: "draining", title: node.cordonReason || "drain requested" });
  else if (node.cordoned)
    out.push({
      text: "cordoned",
      kind: "cordoned",
      title: node.cordonReason || "cordoned: takes no new work",
    });
  const sick = node.gpus.filter((g) => g.problems.length > 0 || g.faults.length > 0);
  if (sick.length > 0) {
    out.push({
      text: `${sick.length} GPU problem${sick.length > 1 ? "s" : ""}`,
      kind: "problem",
      title: sick.map((g) => `GPU ${g.index}: ${gpuProblemTexts(g).join(", ")}`).join("\n"),
    });
  }
  const cordoned = node.gpus.filter((g) => g.cordoned);
  if (cordoned.length > 0) {
    out.push({
      text: `${cordoned.length} GPU${cordoned.length > 1 ? "s" : ""} cordoned`,
      kind: "cordoned",
      title: cordoned.map((g) => `GPU ${g.index}: ${g.cordonReason || "cordoned"}`).join("\n"),
    });
  }
  if (node.nodeProblems.length > 0) {
    out.push({ text: "node problem", kind: "problem", title: node.nodeProblems.join("\n") });
  }
  return out;
}

// ---- fabrics and rows ----

/** The inter-node fabric a node belongs to (InfiniBand pod), or "" for none. */
export function podOf(node: Node): string {
  const ib = node.fabrics.filter((f) => f.kind !== "nvlink").map((f) => f.name);
  return ib.sort()[0] ?? "";
}

/** NVLink domains inside the node: which GPUs share one (a GPU in none is alone). */
export function nvlinkDomains(node: Node): Array<{ name: string; gpuIndices: number[] }> {
  return node.fabrics
    .filter((f) => f.kind === "nvlink")
    .map((f) => ({ name: f.name, gpuIndices: [...f.gpuIndices].sort((a, b) => a - b) }));
}

/** For each GPU index, which NVLink domain (0, 1, …) it is in, or -1: the map draws domain borders from it. */
export function nvlinkDomainOfGpu(node: Node): Map<number, number> {
  const out = new Map<number, number>();
  nvlinkDomains(node).forEach((d, i) => {
    for (const g of d.gpuIndices) if (!out.has(g)) out.set(g, i);
  });
  return out;
}

export type MapRow =
  | { type: "fabric"; name: string; nodes: number; gpus: number; gpusUsed: number }
  | { type: "node"; node: Node };

export interface MapFilter {
  /** Substring of node id, replica id or model. */
  text?: string;
  /** Only nodes with a badge. */
  problemsOnly?: boolean;
}

export function nodeMatches(node: Node, f: MapFilter): boolean {
  if (f.problemsOnly && nodeBadges(node).length === 0) return false;
  const t = f.text?.trim().toLowerCase();
  if (!t) return true;
  if (node.nodeId.toLowerCase().includes(t)) return true;
  return node.gpus.some((g) =>
    g.shards.some((s) => s.replicaId.toLowerCase().includes(t) || s.model.toLowerCase().includes(t)),
  );
}

/** "ib-pod-2" before "ib-pod-10", as people count. */
export function natural(a: string, b: string): number {
  return a.localeCompare(b, "en", { numeric: true });
}

/** Nodes grouped by InfiniBand fabric (a header row per fabric), sorted by fabric then id. */
export function mapRows(nodes: readonly Node[], filter: MapFilter = {}): MapRow[] {
  const groups = new Map<string, Node[]>();
  for (const n of nodes) {
    if (!nodeMatches(n, filter)) continue;
    const pod = podOf(n);
    const list = groups.get(pod) ?? [];
    list.push(n);
    groups.set(pod, list);
  }
  const names = [...groups.keys()].sort((a, b) => (a === "" ? 1 : b === "" ? -1 : natural(a, b)));
  const rows: MapRow[] = [];
  for (const name of names) {
    const list = (groups.get(name) ?? []).sort((a, b) => natural(a.nodeId, b.nodeId));
    rows.push({
      type: "fabric",
      name: name || "no inter-node fabric",
      nodes: list.length,
      gpus: list.reduce((s, n) => s + n.gpusTotal, 0),
      gpusUsed: list.reduce((s, n) => s + n.gpusUsed, 0),
    });
    for (const node of list) rows.push({ type: "node", node });
  }
  return rows;
}

// ---- virtualization ----

export interface RowWindow {
  start: number;
  /** Exclusive. */
  end: number;
  padTop: number;
  padBottom: number;
}

/** Which rows to render for a scroll position: only those in view plus `overscan` on each side. */
export function visibleWindow(
  scrollTop: number,
  viewportHeight: number,
  rowHeight: number,
  count: number,
  overscan = 6,
): RowWindow {
  if (count === 0 || rowHeight <= 0) return { start: 0, end: 0, padTop: 0, padBottom: 0 };
  const first = Math.floor(Math.max(0, scrollTop) / rowHeight);
  const start = Math.max(0, Math.min(count - 1, first - overscan));
  const visible = Math.ceil(Math.max(0, viewportHeight) / rowHeight) + 1;
  const end = Math.min(count, first + visible + overscan);
  return { start, end, padTop: start * rowHeight, padBottom: (count - end) * rowHeight };
}

// ---- replicas ----

export interface FleetSummary {
  nodes: number;
  gpus: number;
  gpusUsed: number;
  replicas: Record<Replica["phase"], number>;
}

export function summarize(fleet: Pick<Fleet, "nodes" | "replicas">): FleetSummary {
  const replicas = { pending: 0, placed: 0, running: 0, draining: 0 };
  for (const r of fleet.replicas) replicas[r.phase]++;
  return {
    nodes: fleet.nodes.length,
    gpus: fleet.nodes.reduce((s, n) => s + n.gpusTotal, 0),
    gpusUsed: fleet.nodes.reduce((s, n) => s + n.gpusUsed, 0),
    replicas,
  };
}

const PHASE_ORDER: Record<Replica["phase"], number> = { pending: 0, draining: 1, placed: 2, running: 3 };

/** Replicas needing a look first (pending, draining), then by model and id. */
export function sortReplicas(replicas: readonly Replica[]): Replica[] {
  return [...replicas].sort(
    (a, b) =>
      PHASE_ORDER[a.phase] - PHASE_ORDER[b.phase] ||
      (a.model < b.model ? -1 : a.model > b.model ? 1 : 0) ||
      (a.replicaId < b.replicaId ? -1 : 1),
  );
}

// ---- what-if ----

/** Per node, the differences a what-if run found there (for highlighting the map). */
export function whatIfHighlights(result: WhatIfResult | null): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (!result) return out;
  for (const p of result.passes) {
    for (const d of p.differences) {
      for (const n of d.nodes) {
        const list = out.get(n) ?? [];
        list.push(`#${p.seq} ${d.subject}: ${d.record} → ${d.alternative}`);
        out.set(n, list);
      }
    }
  }
  return out;
}

// ---- time ----

/** The sequence one step from `seq`, kept within 0..last. */
export function stepSeq(seq: number, delta: number, last: number): number {
  return Math.max(0, Math.min(last, seq + delta));
}

/** The slider's label: where it is, and how far behind the live end. */
export function positionLabel(seq: number, timeMs: number, last: number): string {
  const when =
    timeMs > 0
      ? new Date(timeMs)
          .toISOString()
          .replace("T", " ")
          .replace(/\.\d+Z$/, "Z")
      : "—";
  return seq >= last ? `#${seq} (live end) · ${when}` : `#${seq} of ${last} · ${when}`;
}

/** The event window the list shows around a position: the `size` sequences up to it. */
export function eventWindow(seq: number, size = 200): { from: number; to: number } {
  return { from: Math.max(1, seq - size + 1), to: Math.max(1, seq) };
}

/** Parses a server-sent events buffer: complete events and the unfinished rest. */
export function parseSse(buffer: string): { events: Array<{ event: string; data: string }>; rest: string } {
  const events: Array<{ event: string; data: string }> = [];
  const blocks = buffer.split(/\r?\n\r?\n/);
  const rest = blocks.pop() ?? "";
  for (const block of blocks) {
    let event = "message";
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (data.length > 0) events.push({ event, data: data.join("\n") });
  }
  return { events, rest };
}

/**
 * One model's rollout in a line, or null when there is nothing to say (no
 * rollout running, stalled or paused): new and old revision counts, ready
 * among them, and why it waits.
 */
export function rolloutLine(r: Rollout): string | null {
  if (!r.active && !r.paused) return null;
  const counts = `${r.current.replicas} new (${r.current.ready} ready) / ${r.outdated.replicas} old (${r.outdated.ready} ready)`;
  const state = r.paused ? "paused" : r.stalled ? `stalled: ${r.stalled.reason}` : "rolling";
  return `${r.model} → ${r.revision}: ${counts}${r.draining > 0 ? `, ${r.draining} draining` : ""} · ${state}`;
}

/** One autoscale decision on the time bar. */
export interface ScaleMark {
  seq: number;
  model: string;
  from: number;
  to: number;
  explanation: string;
}

/**
 * The autoscale decisions in a page of reconcile passes (`/v1/events`, whose
 * `event` is the protobuf JSON: zero values are left out, so an absent count is 0).
 */
export function scaleMarks(rows: readonly EventRow[]): ScaleMark[] {
  const out: ScaleMark[] = [];
  for (const r of rows) {
    const pass = (r.event as { reconcilePass?: { decisions?: unknown[] } } | undefined)?.reconcilePass;
    for (const d of pass?.decisions ?? []) {
      const dec = d as {
        explanation?: string;
        autoscaleDecided?: { model?: string; from?: number; to?: number };
      };
      const a = dec.autoscaleDecided;
      if (!a) continue;
      out.push({
        seq: r.seq,
        model: a.model ?? "",
        from: a.from ?? 0,
        to: a.to ?? 0,
        explanation: dec.explanation ?? "",
      });
    }
  }
  return out;
}

/** Where a mark sits on the slider, in percent of its width. */
export function markLeft(seq: number, lastSeq: number): number {
  return lastSeq <= 0 ? 0 : Math.min(100, Math.max(0, (seq / lastSeq) * 100));
}

/** One replica's traffic through the routers: in flight now, answered in total, and the rate between two reads. */
export interface ReplicaTraffic {
  inFlight: number;
  total: number;
  errors: number;
  /** Requests a second since the previous read; null on the first read. */
  perSecond: number | null;
}

/**
 * Each replica's traffic from a read of GET /v1/router/requests, its rate
 * from the read before (a counter that went down, a router restarted, counts
 * as 0). A replica serves one model; its models' counts are added.
 */
export function replicaTraffic(
  now: RouterRequests,
  before: RouterRequests | null,
): Map<string, ReplicaTraffic> {
  const sum = (r: RouterRequests) => {
    const m = new Map<string, { inFlight: number; total: number; errors: number }>();
    for (const x of r.replicas) {
      const t = m.get(x.replicaId) ?? { inFlight: 0, total: 0, errors: 0 };
      t.inFlight += x.inFlight;
      t.total += x.requests;
      t.errors += x.errors;
      m.set(x.replicaId, t);
    }
    return m;
  };
  const readAt = (r: RouterRequests) => Math.max(0, ...r.routers.map((x) => x.readAtMs));
  const cur = sum(now);
  const prev = before ? sum(before) : null;
  const seconds = before ? (readAt(now) - readAt(before)) / 1000 : 0;
  const out = new Map<string, ReplicaTraffic>();
  for (const [id, t] of cur) {
    const p = prev?.get(id);
    const perSecond = prev === null || seconds <= 0 ? null : Math.max(0, t.total - (p?.total ?? 0)) / seconds;
    out.set(id, { ...t, perSecond });
  }
  return out;
}

/** "3 in flight · 120 · 4.5/s" for a replica's row. */
export function trafficLine(t: ReplicaTraffic): string {
  const rate =
    t.perSecond === null ? "" : ` · ${t.perSecond < 10 ? t.perSecond.toFixed(1) : Math.round(t.perSecond)}/s`;
  return `${t.inFlight} in flight · ${t.total} req${rate}${t.errors > 0 ? ` · ${t.errors} failed` : ""}`;
}
