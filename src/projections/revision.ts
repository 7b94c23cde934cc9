/**
 * Spec revisions. A profile's revision is a content hash of what a running
 * replica cannot change without a restart: its engine, engine arguments and
 * environment, and its GPU needs (shards, GPUs per shard, memory, product,
 * fabric, node labels). Lifecycle deadlines are not part of it: changing
 * them rolls nothing. A hash rather than a counter, so that the same spec
 * always has the same revision: an undo that restores an earlier spec makes
 * the replicas still running it current again, and nothing in the fold has
 * to remember history to compute it.
 *
 * The hash is FNV-1a 32-bit over a canonical JSON rendering (maps sorted by
 * key), written as 8 hex digits. A model's revision hashes its profiles'
 * names and revisions in order.
 */
import type { ProfileSpec } from "./state.js";

type SpecFields = Pick<
  ProfileSpec,
  | "engine"
  | "engineArgs"
  | "engineEnv"
  | "shards"
  | "gpusPerShard"
  | "memoryPerGpuMb"
  | "gpuProduct"
  | "fabricKind"
  | "nodeLabels"
>;

function sorted(m: Record<string, string>): Array<[string, string]> {
  return Object.keys(m)
    .sort()
    .map((k) => [k, m[k] as string]);
}

/** FNV-1a 32-bit of a string's UTF-8 bytes. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

const hex = (n: number) => n.toString(16).padStart(8, "0");

export function profileRevision(p: SpecFields): string {
  return hex(
    fnv1a32(
      JSON.stringify([
        p.engine,
        p.engineArgs,
        sorted(p.engineEnv),
        p.shards,
        p.gpusPerShard,
        p.memoryPerGpuMb,
        p.gpuProduct,
        p.fabricKind,
        sorted(p.nodeLabels),
      ]),
    ),
  );
}

export function modelRevision(profiles: ReadonlyArray<{ name: string; revision: string }>): string {
  return hex(fnv1a32(JSON.stringify(profiles.map((p) => [p.name, p.revision]))));
}
