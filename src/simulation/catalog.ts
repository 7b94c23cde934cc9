/**
 * The catalog a run serves, sized to its fleet, and the operator's changes
 * to it (scale, rollout, undo) as the operator API writes them: a
 * catalog-changed event on the catalog subject, fenced on the catalog in
 * force.
 */
import { create } from "@bufbuild/protobuf";
import { newEvent } from "../codec/index.js";
import { type Catalog, CatalogSchema, type Event, Writer_Kind } from "../gen/llmgw/v1/events_pb.js";
import { H100 } from "../sim/hardware.js";

/** The models of a fleet of `nodes` nodes of 8 GPUs: about half the GPUs asked for, so there is room to move. */
export function initialCatalog(nodes: number): Catalog {
  const profile = (name: string, shards: number, gpusPerShard: number, memoryGb: number) => ({
    name,
    shards,
    gpusPerShard,
    gpuProduct: H100.product,
    memoryPerGpuMb: BigInt(memoryGb * 1024),
    engine: "default",
  });
  return create(CatalogSchema, {
    models: [
      {
        name: "chat-small",
        replicas: Math.max(1, nodes),
        minAvailable: "50%",
        profiles: [profile("tp1", 1, 1, 40)],
      },
      {
        name: "chat-mid",
        replicas: Math.max(1, Math.floor(nodes / 2)),
        minAvailable: "1",
        profiles: [profile("tp2", 1, 2, 60)],
      },
      {
        name: "chat-large",
        replicas: Math.max(1, Math.floor(nodes / 10)),
        minAvailable: "",
        profiles: [profile("tp4x2", 2, 4, 70)],
      },
    ],
  });
}

/** A catalog-changed event, as `llmgw catalog apply` has the operator API write it. */
export function catalogEvent(id: string, catalog: Catalog, timeMs: number): Event {
  return newEvent({
    id,
    timeUnixMs: BigInt(timeMs),
    writer: { kind: Writer_Kind.OPERATOR, id: "sim-operator" },
    body: { case: "catalogChanged", value: { catalog, appliedBy: "sim-operator" } },
  });
}
