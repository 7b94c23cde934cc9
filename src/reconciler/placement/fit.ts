/**
 * Whether one node can hold one shard of a profile, and if so on which GPUs
 * and with what score. The first reason that rules a node out is the one
 * counted in a pending explanation.
 */
import type { ProfileSpec } from "../../projections/index.js";
import { lowerProduct } from "./make-node-view.js";
import type { GpuView, NodeView } from "./node-view.js";

export type Policy = "binpack" | "spread";

export type NodeFit = { ok: true; score: number } | { ok: false; reason: string };

export function fitNode(
  n: NodeView,
  model: string,
  p: ProfileSpec,
  policy: Policy,
  onCooldown: boolean,
): NodeFit {
  if (n.blocked !== "") return { ok: false, reason: n.blocked };
  for (const k in p.nodeLabels) {
    if (n.labels[k] !== p.nodeLabels[k]) return { ok: false, reason: "labels mismatch" };
  }
  const want = lowerProduct(p.gpuProduct);
  const k = p.gpusPerShard;
  let product = 0;
  let healthy = 0;
  let uncordoned = 0;
  let free = 0;
  let roomy = 0;
  for (const g of n.gpus) {
    if (want !== "" && !g.product.includes(want)) continue;
    product++;
    if (!g.healthy) continue;
    healthy++;
    if (g.cordoned) continue;
    uncordoned++;
    if (g.allocated) continue;
    free++;
    if (g.freeMb >= p.memoryPerGpuMb) roomy++;
  }
  if (product === 0) return { ok: false, reason: want === "" ? "no GPUs" : `no ${p.gpuProduct} GPUs` };
  if (onCooldown) return { ok: false, reason: "cooldown" };
  if (healthy < k) return { ok: false, reason: "too few healthy GPUs" };
  if (uncordoned < k) return { ok: false, reason: "too few uncordoned GPUs" };
  if (free < k) return { ok: false, reason: "too few free GPUs" };
  if (roomy < k) return { ok: false, reason: "too little free memory" };
  return { ok: true, score: score(n, model, k, policy) };
}

/** The GPUs a shard of `p` gets on a node that fits it (chosen only for the nodes placement picks). */
export function chooseGpus(n: NodeView, p: ProfileSpec): number[] {
  const want = lowerProduct(p.gpuProduct);
  const roomy = n.gpus.filter(
    (g) =>
      (want === "" || g.product.includes(want)) &&
      g.healthy &&
      !g.cordoned &&
      !g.allocated &&
      g.freeMb >= p.memoryPerGpuMb,
  );
  return pickGpus(roomy, p.gpusPerShard);
}

/**
 * Prefers k GPUs within one NVLink domain, the smallest domain that fits
 * (keeps big domains whole for big shards; ties by name); otherwise the
 * lowest indices. A node has a few GPUs and fewer domains: counted in
 * place, once per placement.
 */
function pickGpus(roomy: readonly GpuView[], k: number): number[] {
  let best: string | undefined;
  let bestSize = 0;
  for (let i = 0; i < roomy.length; i++) {
    const name = (roomy[i] as GpuView).nvlink;
    if (name === "" || seenBefore(roomy, name, i)) continue;
    let size = 0;
    for (let j = i; j < roomy.length; j++) if ((roomy[j] as GpuView).nvlink === name) size++;
    if (size < k) continue;
    if (best === undefined || size < bestSize || (size === bestSize && name < best)) {
      best = name;
      bestSize = size;
    }
  }
  const out: number[] = [];
  for (const g of roomy) {
    if (out.length === k) break;
    if (best === undefined || g.nvlink === best) out.push(g.index);
  }
  return out;
}

function seenBefore(gpus: readonly GpuView[], nvlink: string, end: number): boolean {
  for (let j = 0; j < end; j++) if ((gpus[j] as GpuView).nvlink === nvlink) return true;
  return false;
}

/**
 * Higher is better. The policy part lies in [0, 1] (how full the node would
 * be after this shard, or how empty); each shard of the same model already
 * on the node costs 1, so one model's replicas spread before nodes fill.
 */
function score(n: NodeView, model: string, k: number, policy: Policy): number {
  const total = n.gpus.length;
  const after = total === 0 ? 1 : (n.allocatedGpus + k) / total;
  const part = policy === "binpack" ? after : 1 - after;
  return round(part - (n.modelShards.get(model) ?? 0));
}

export function round(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}
