/**
 * What nvidia-smi prints, read into the protocol's terms. Pure: the text in,
 * typed rows or a typed error quoting the line out.
 */
import { GpuProblem_Kind } from "../../gen/llmgw/v1/agent_pb.js";
import type { SampledProblem } from "../node-agent.js";

/** The columns asked of `nvidia-smi --query-gpu`, in order. */
export const QUERY_COLUMNS = [
  "index",
  "uuid",
  "name",
  "memory.total",
  "memory.used",
  "pci.bus_id",
  "temperature.gpu",
  "ecc.errors.uncorrected.volatile.total",
  "retired_pages.pending",
  // Ampere and later (H100) remap rows instead of retiring pages: retired_pages.* is N/A there.
  "remapped_rows.pending",
  "remapped_rows.failure",
] as const;

export interface GpuRow {
  index: number;
  uuid: string;
  product: string;
  memoryTotalMb: number;
  memoryUsedMb: number;
  pciBusId: string;
  temperatureC: number | undefined;
  eccUncorrected: number | undefined;
  retiredPagesPending: boolean | undefined;
  remappedRowsPending: boolean | undefined;
  remappedRowsFailure: boolean | undefined;
}

/** nvidia-smi's output could not be read as GPUs: the line and why. */
export class GpuOutputError extends Error {
  override readonly name = "GpuOutputError";
}

const NOT_AVAILABLE = /^\[(N\/A|Not Supported|Unknown Error|Insufficient Permissions)\]$|^N\/A$/;

function optionalNumber(v: string): number | undefined {
  if (NOT_AVAILABLE.test(v)) return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

function optionalFlag(v: string): boolean | undefined {
  return NOT_AVAILABLE.test(v) ? undefined : /^yes$/i.test(v);
}

function wholeNumber(v: string, what: string, line: string): number {
  if (!/^\d+$/.test(v))
    throw new GpuOutputError(`${what} ${JSON.stringify(v)} is not a whole number in ${JSON.stringify(line)}`);
  return Number(v);
}

/** Rows of `--query-gpu=<QUERY_COLUMNS> --format=csv,noheader,nounits`. */
export function parseQueryGpu(text: string): GpuRow[] {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
  if (lines.length === 0) throw new GpuOutputError("nvidia-smi listed no GPU");
  const rows = lines.map((line) => {
    const cols = line.split(",").map((c) => c.trim());
    if (cols.length !== QUERY_COLUMNS.length)
      throw new GpuOutputError(
        `expected ${QUERY_COLUMNS.length} columns (${QUERY_COLUMNS.join(", ")}), got ${cols.length} in ${JSON.stringify(line)}`,
      );
    const [index, uuid, name, total, used, bus, temp, ecc, retired, remapPending, remapFailure] = cols as [
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    if (!/^GPU-[0-9a-fA-F-]+$/.test(uuid))
      throw new GpuOutputError(`uuid ${JSON.stringify(uuid)} is not a GPU UUID in ${JSON.stringify(line)}`);
    if (name === "") throw new GpuOutputError(`empty product name in ${JSON.stringify(line)}`);
    const memoryTotalMb = wholeNumber(total, "memory.total", line);
    if (memoryTotalMb === 0) throw new GpuOutputError(`memory.total is 0 in ${JSON.stringify(line)}`);
    return {
      index: wholeNumber(index, "index", line),
      uuid,
      product: name,
      memoryTotalMb,
      memoryUsedMb: wholeNumber(used, "memory.used", line),
      pciBusId: bus,
      temperatureC: optionalNumber(temp),
      eccUncorrected: optionalNumber(ecc),
      retiredPagesPending: optionalFlag(retired),
      remappedRowsPending: optionalFlag(remapPending),
      remappedRowsFailure: optionalFlag(remapFailure),
    };
  });
  rows.forEach((r, i) => {
    if (r.index !== i)
      throw new GpuOutputError(
        `GPU indices are not 0..${rows.length - 1} in order: found ${r.index} at position ${i}`,
      );
  });
  const uuids = new Set(rows.map((r) => r.uuid));
  if (uuids.size !== rows.length) throw new GpuOutputError("two GPUs report the same UUID");
  return rows;
}

/**
 * The problems a row shows: uncorrectable ECC errors, retired pages or
 * remapped rows pending, a row remapping failure, over the thermal limit.
 * Each is a condition (`occurrence.type` "state"): its level is the counter
 * (ECC) or 1, so a new occurrence is a rising counter or a condition that
 * went away and came back.
 */
export function rowProblems(row: GpuRow, thermalLimitC: number): SampledProblem[] {
  const out: SampledProblem[] = [];
  const state = (signal: string, level: number) => ({ type: "state" as const, signal, level });
  if (row.eccUncorrected !== undefined && row.eccUncorrected > 0)
    out.push({
      gpuIndex: row.index,
      kind: GpuProblem_Kind.ECC,
      message: `${row.eccUncorrected} uncorrectable ECC errors`,
      occurrence: state("ecc", row.eccUncorrected),
    });
  if (row.retiredPagesPending === true)
    out.push({
      gpuIndex: row.index,
      kind: GpuProblem_Kind.RETIRED_PAGES,
      message: "retired pages pending (a reset is needed)",
      occurrence: state("retired-pages-pending", 1),
    });
  if (row.remappedRowsPending === true)
    out.push({
      gpuIndex: row.index,
      kind: GpuProblem_Kind.RETIRED_PAGES,
      message: "remapped rows pending (a reset is needed)",
      occurrence: state("remapped-rows-pending", 1),
    });
  if (row.remappedRowsFailure === true)
    out.push({
      gpuIndex: row.index,
      kind: GpuProblem_Kind.RETIRED_PAGES,
      message: "row remapping failed (the GPU needs service)",
      occurrence: state("remapped-rows-failure", 1),
    });
  if (row.temperatureC !== undefined && row.temperatureC >= thermalLimitC)
    out.push({
      gpuIndex: row.index,
      kind: GpuProblem_Kind.THERMAL,
      message: `over its thermal limit (${thermalLimitC} C)`,
      occurrence: state("thermal", 1),
    });
  return out;
}

/**
 * NVLink domains from `nvidia-smi topo -m`: GPUs joined by NV# links,
 * grouped as connected components. CPU/NUMA affinity columns, NIC rows and
 * the legend are ignored.
 */
export function parseTopology(text: string, gpuCount: number): number[][] {
  const lines = text.split("\n");
  const header = lines.find((l) => /^\s*GPU0\b/.test(l));
  if (!header)
    throw new GpuOutputError(`no GPU0 column header in the topology: ${JSON.stringify(text.slice(0, 200))}`);
  const columns = header.trim().split(/\s+/);
  const parent = Array.from({ length: gpuCount }, (_, i) => i);
  const find = (i: number): number => {
    let r = i;
    while (parent[r] !== r) r = parent[r]!;
    return r;
  };
  let rows = 0;
  for (const line of lines) {
    const m = /^GPU(\d+)\s+(.*)$/.exec(line.trim());
    if (!m) continue;
    const from = Number(m[1]);
    if (from >= gpuCount) continue;
    rows++;
    const cells = m[2]!.trim().split(/\s+/);
    columns.forEach((col, i) => {
      const c = /^GPU(\d+)$/.exec(col);
      const to = c ? Number(c[1]) : -1;
      if (to < 0 || to >= gpuCount || to === from) return;
      if (/^NV\d+$/.test(cells[i] ?? "")) parent[find(from)] = find(to);
    });
  }
  if (rows === 0)
    throw new GpuOutputError(`no GPU rows in the topology: ${JSON.stringify(text.slice(0, 200))}`);
  const groups = new Map<number, number[]>();
  for (let i = 0; i < gpuCount; i++) {
    const root = find(i);
    groups.set(root, [...(groups.get(root) ?? []), i]);
  }
  return [...groups.values()].filter((g) => g.length > 1);
}
