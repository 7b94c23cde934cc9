/**
 * The node's GPUs, from nvidia-smi (or, on machines without NVIDIA tools, a
 * file that lists them). Whatever cannot be read exactly is an error naming
 * the path and quoting the output: a node never registers hardware it was
 * not sure of.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import type {
  FabricInit,
  GpuSample,
  GpuSeen,
  GpuSource,
  NodeHardwareInventory,
  SampledProblem,
} from "../node-agent.js";
import type { HardwareConfig } from "./config.js";
import { discoveredGpu } from "./discovered-gpu.js";
import type { KernelLog } from "./kernel-log.js";
import {
  GpuOutputError,
  type GpuRow,
  parseQueryGpu,
  parseTopology,
  QUERY_COLUMNS,
  rowProblems,
} from "./parse.js";
import { normalisePciBusId, parseXidLines, xidProblems } from "./xid.js";

/** nvidia-smi (or the --gpus-from file) could not tell what the GPUs are. */
export class GpuDiscoveryError extends Error {
  override readonly name = "GpuDiscoveryError";
}

const excerpt = (s: string) => JSON.stringify(s.length > 400 ? `${s.slice(0, 400)}…` : s);

function run(path: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(path, args, { timeout: timeoutMs, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const e = err as NodeJS.ErrnoException & { killed?: boolean; code?: string | number };
      if (e.code === "ENOENT")
        return reject(
          new GpuDiscoveryError(
            `nvidia-smi not found at ${path} (set --nvidia-smi, or --gpus-from FILE on a machine without NVIDIA tools)`,
          ),
        );
      if (e.code === "EACCES")
        return reject(new GpuDiscoveryError(`nvidia-smi at ${path} is not executable`));
      if (e.killed)
        return reject(new GpuDiscoveryError(`nvidia-smi at ${path} did not answer within ${timeoutMs} ms`));
      reject(
        new GpuDiscoveryError(
          `nvidia-smi at ${path} exited with code ${String(e.code)}: ${excerpt((stderr || stdout).trim())}`,
        ),
      );
    });
  });
}

export interface NvidiaSmiOptions {
  path: string;
  nodeId: string;
  config: HardwareConfig;
  timeoutMs?: number;
  /** Where Xid errors are read from; none without. */
  kernelLog?: KernelLog;
}

const QUERY_ARGS = [`--query-gpu=${QUERY_COLUMNS.join(",")}`, "--format=csv,noheader,nounits"];

async function queryRows(o: NvidiaSmiOptions) {
  const out = await run(o.path, QUERY_ARGS, o.timeoutMs ?? 10_000);
  try {
    return parseQueryGpu(out);
  } catch (err) {
    if (err instanceof GpuOutputError)
      throw new GpuDiscoveryError(`nvidia-smi at ${o.path} printed what is not a GPU list: ${err.message}`, {
        cause: err,
      });
    throw err;
  }
}

function fabricsOf(nodeId: string, config: HardwareConfig, nvlink: number[][]): FabricInit[] {
  return [
    ...nvlink.map((gpuIndices, n) => ({ name: `nvlink-${nodeId}-${n}`, kind: "nvlink", gpuIndices })),
    ...config.fabrics.map((f) => ({ name: f.name, kind: f.kind, gpuIndices: f.gpuIndices })),
  ];
}

/** What the rows show, and the Xids the kernel logged since the last look. */
function problemsOf(rows: GpuRow[], o: NvidiaSmiOptions): SampledProblem[] {
  const xids = o.kernelLog ? xidProblems(parseXidLines(o.kernelLog.readNew()), rows, o.config.xidIgnore) : [];
  return [...rows.flatMap((r) => rowProblems(r, o.config.thermalLimitC)), ...xids];
}

/** The inventory through nvidia-smi: GPUs, NVLink domains (topo -m or the config), the configured fabrics, problems. */
export async function discoverWithNvidiaSmi(o: NvidiaSmiOptions): Promise<NodeHardwareInventory> {
  const rows = await queryRows(o);
  let nvlink: number[][];
  if (o.config.nvlink === "auto") {
    const topo = await run(o.path, ["topo", "-m"], o.timeoutMs ?? 10_000);
    try {
      nvlink = parseTopology(topo, rows.length);
    } catch (err) {
      if (err instanceof GpuOutputError)
        throw new GpuDiscoveryError(`nvidia-smi at ${o.path} topo -m: ${err.message}`, { cause: err });
      throw err;
    }
  } else nvlink = o.config.nvlink;
  const problems = problemsOf(rows, o);
  return {
    gpus: rows.map((r) => discoveredGpu(r, r.memoryUsedMb)),
    fabrics: fabricsOf(o.nodeId, o.config, nvlink),
    problems,
    slots: rows.map(slotOf),
  };
}

/** Where a GPU sits: its PCI bus id (stable while the GPU is in the machine), else its index. */
function slotOf(r: GpuRow): string {
  return normalisePciBusId(r.pciBusId) ?? `index:${r.index}`;
}

function seen(r: GpuRow): GpuSeen {
  return { uuid: r.uuid, slot: slotOf(r), product: r.product, memoryTotalMb: r.memoryTotalMb };
}

/** Periodic samples through nvidia-smi: memory held by any process (a foreign one included) and problems. */
export function nvidiaSmiSource(o: NvidiaSmiOptions): GpuSource {
  return {
    async sample(): Promise<GpuSample> {
      const rows = await queryRows(o);
      return {
        memoryUsedMb: rows.map((r) => r.memoryUsedMb),
        problems: problemsOf(rows, o),
        gpus: rows.map(seen),
      };
    },
  };
}

const gpusFileSchema = z
  .array(
    z.strictObject({
      index: z.number().int().min(0),
      uuid: z.string().min(1).max(128),
      product: z.string().min(1).max(128),
      memoryTotalMb: z.number().int().positive(),
      memoryUsedMb: z.number().int().min(0).default(0),
    }),
  )
  .min(1, "lists no GPU");

/** The --gpus-from file (YAML or JSON list), read again at every sample so a test or operator can change it. */
async function readGpusFile(path: string) {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new GpuDiscoveryError(`--gpus-from ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (err) {
    throw new GpuDiscoveryError(`--gpus-from ${path} is not YAML or JSON: ${(err as Error).message}`);
  }
  const r = gpusFileSchema.safeParse(data);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new GpuDiscoveryError(
      `--gpus-from ${path}: ${i.path.length ? `[${i.path.join("].")}`.replace(/\]\.(\w)/g, "].$1") : "(top)"}: ${i.message}`,
    );
  }
  r.data.forEach((g, i) => {
    if (g.index !== i)
      throw new GpuDiscoveryError(
        `--gpus-from ${path}: [${i}].index is ${g.index}; GPUs are listed in index order from 0`,
      );
  });
  return r.data;
}

export async function discoverFromFile(
  path: string,
  nodeId: string,
  config: HardwareConfig,
): Promise<NodeHardwareInventory> {
  const gpus = await readGpusFile(path);
  const nvlink = config.nvlink === "auto" ? [] : config.nvlink;
  return {
    gpus: gpus.map((g) => ({
      ...g,
      memoryTotalMb: BigInt(g.memoryTotalMb),
      memoryUsedMb: BigInt(g.memoryUsedMb),
      problems: [],
    })),
    fabrics: fabricsOf(nodeId, config, nvlink),
    problems: [],
    slots: gpus.map((g) => `index:${g.index}`),
  };
}

export function fileSource(path: string): GpuSource {
  return {
    async sample(): Promise<GpuSample> {
      const gpus = await readGpusFile(path);
      return {
        memoryUsedMb: gpus.map((g) => g.memoryUsedMb),
        problems: [],
        gpus: gpus.map((g) => ({
          uuid: g.uuid,
          slot: `index:${g.index}`,
          product: g.product,
          memoryTotalMb: g.memoryTotalMb,
        })),
      };
    },
  };
}
