/**
 * Placement benchmark (no assertions): one pass placing N replicas onto N
 * nodes of 8 × H100 (a mix of 1-, 4- and 8-GPU profiles), at N = 1,000 and
 * 4,000. Prints the time of one decide call and the growth exponent
 * log(t4N / tN) / log(4). Run: node --import tsx bench/placement.ts
 */
import { performance } from "node:perf_hooks";
import { create } from "@bufbuild/protobuf";
import { EventSchema } from "../src/gen/llmgw/v1/events_pb.js";
import type { EventInit } from "../src/log/index.js";
import { evolveFleet, type FleetState, initialFleet } from "../src/projections/index.js";
import { DEFAULT_RECONCILER_CONFIG, decide } from "../src/reconciler/index.js";

const GIB = 1024;
const T0 = 1_780_000_000_000;

function fleet(nodes: number, replicas: number): FleetState {
  let state = initialFleet();
  let seq = 0;
  const apply = (body: EventInit["body"]) => {
    seq++;
    state = evolveFleet(state, create(EventSchema, { id: `b-${seq}`, body }), { seq, timeMs: T0 });
  };
  const third = Math.floor(replicas / 3);
  const profile = (name: string, gpus: number, memGb: number) => ({
    name,
    shards: 1,
    gpusPerShard: gpus,
    memoryPerGpuMb: BigInt(memGb * GIB),
    gpuProduct: "H100",
  });
  apply({
    case: "catalogChanged",
    value: {
      catalog: {
        models: [
          { name: "llama-3.1-8b", replicas: third, profiles: [profile("tp1", 1, 20)] },
          { name: "llama-3.3-70b", replicas: third, profiles: [profile("tp4", 4, 72)] },
          { name: "mixtral-8x22b", replicas: replicas - 2 * third, profiles: [profile("tp8", 8, 72)] },
        ],
      },
    },
  });
  for (let i = 0; i < nodes; i++) {
    const nodeId = `gpu-${String(i).padStart(5, "0")}`;
    const all = [0, 1, 2, 3, 4, 5, 6, 7];
    apply({
      case: "sessionOpened",
      value: {
        nodeId,
        sessionId: `s-${i}`,
        gatewayId: "gw-1",
        registration: {
          nodeId,
          gpus: all.map((g) => ({
            index: g,
            product: "NVIDIA H100 80GB HBM3",
            memoryTotalMb: BigInt(80 * GIB),
            memoryUsedMb: 0n,
          })),
          fabrics: [
            { name: `${nodeId}-nvlink`, kind: "nvlink", gpuIndices: all },
            { name: `ib-pod-${Math.floor(i / 32)}`, kind: "infiniband", gpuIndices: all },
          ],
          runningShards: [],
        },
      },
    });
  }
  // Every session handled (an empty adoption each), so the next pass scales and places.
  const config = { ...DEFAULT_RECONCILER_CONFIG, maxDecisionsPerPass: 1_000_000 };
  const adopt = decide({ state, config, nowMs: T0, liveGateways: new Set(["gw-1"]) });
  apply({ case: "reconcilePass", value: { nowUnixMs: BigInt(T0), decisions: adopt.decisions } });
  return state;
}

function measure(n: number): { ms: number; placed: number; pending: number; decisions: number } {
  const state = fleet(n, n);
  const config = { ...DEFAULT_RECONCILER_CONFIG, maxDecisionsPerPass: 1_000_000 };
  const input = { state, config, nowMs: T0 + 1_000, liveGateways: new Set(["gw-1"]) };
  decide(input); // warm-up
  const runs = 3;
  let best = Number.POSITIVE_INFINITY;
  let out = decide(input);
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    out = decide(input);
    best = Math.min(best, performance.now() - t);
  }
  const count = (k: string) => out.decisions.filter((d) => d.kind.case === k).length;
  return {
    ms: best,
    placed: count("replicaPlaced"),
    pending: count("replicaPending"),
    decisions: out.decisions.length,
  };
}

const small = measure(1_000);
const large = measure(4_000);
const exponent = Math.log(large.ms / small.ms) / Math.log(4);
for (const [n, r] of [
  [1_000, small],
  [4_000, large],
] as const) {
  console.log(
    `${n} replicas onto ${n} nodes × 8 H100: ${r.ms.toFixed(1)} ms (${r.placed} placed, ${r.pending} pending, ${r.decisions} decisions)`,
  );
}
console.log(`growth exponent (time ∝ size^k): k = ${exponent.toFixed(2)}`);
