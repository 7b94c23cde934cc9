/**
 * The type test of `RecordTable`: each line marked `@ts-expect-error` is a
 * write to a record that must not compile (`tsc --noEmit -p .` checks this
 * file with the rest). Should a guard go (`get` handing out a writable
 * record, a view gaining a writer, `DecideInput.state` a writable state),
 * the write compiles, its `@ts-expect-error` is unused, and tsc fails; a
 * view typed `Readonly` instead of `DeepReadonly` lets the nested writes
 * compile, and tsc fails the same way.
 * Never run: it only has to compile.
 */
import type {
  CommandState,
  FleetView,
  GatewayState,
  NodeState,
  RecordTable,
  ReplicaState,
  ReplicasView,
  TableView,
} from "../../src/projections/index.js";
import type { DecideInput } from "../../src/reconciler/index.js";

export function writesThatDoNotCompile(
  table: RecordTable<ReplicaState>,
  view: TableView<ReplicaState>,
  input: DecideInput,
  fleet: FleetView,
  replicas: ReplicasView,
): void {
  const r = table.get("r-1");
  if (!r) return;
  // @ts-expect-error a record read from the table is read-only: only `update` changes it.
  r.phase = "draining";
  // @ts-expect-error the same through a view.
  (view.get("r-1") as Readonly<ReplicaState>).replacedBy = "r-2";
  // @ts-expect-error the values a table lists are read-only too.
  (table.values()[0] as Readonly<ReplicaState>).lastChangeSeq = 7;
  // @ts-expect-error the records object (the JSON form) cannot be written.
  table.toJSON()["r-1"] = r;
  // @ts-expect-error a view has no writers.
  view.put("r-2", { ...r });
  // @ts-expect-error a view has no writers.
  view.drop("r-1");
  // @ts-expect-error a view has no writers.
  view.update("r-1", (w: ReplicaState) => {
    w.phase = "pending";
  });
  // @ts-expect-error nor can it be forked but through projections' forkFleet.
  view.fork();
  // A view's records are read-only all the way down (DeepReadonly), not only their own fields.
  const viewed = view.get("r-1");
  if (viewed) {
    // @ts-expect-error a nested object of a record read through a view.
    viewed.shards[0]!.desired = "stopped";
    // @ts-expect-error a nested array of a record read through a view.
    viewed.shards.push({ ...r.shards[0]! });
    // @ts-expect-error a nested array element of a record read through a view.
    viewed.shards[0]!.gpuIndices[0] = 3;
  }
  // @ts-expect-error the values a view lists, nested too.
  view.values()[0]!.shards.length = 0;
  // A table is a view of itself: what a reconcile pass is given is the table, typed as its view.
  const asView: TableView<ReplicaState> = table;
  void asView;

  // A reconcile pass's input is a view of the fleet: nothing in it can be written.
  // @ts-expect-error its node table is a view.
  input.state.inventory.nodes.put("n-1", {} as NodeState);
  // @ts-expect-error its replica table is a view.
  input.state.replicas.replicas.update("r-1", () => {});
  // @ts-expect-error its records are read-only.
  input.state.inventory.nodes.get("n-1")!.cordoned = true;
  // @ts-expect-error and their nested objects: a GPU of a node.
  input.state.inventory.nodes.get("n-1")!.gpus[0]!.cordoned = true;
  // @ts-expect-error a shard of a replica.
  input.state.replicas.replicas.sortedValues()[0]!.shards[0]!.state = "running";
  // @ts-expect-error its small containers are read-only.
  input.state.replicas.commands["c-1"] = {} as CommandState;
  // @ts-expect-error and so are its gateways.
  input.state.inventory.gateways["g-1"] = {} as GatewayState;
  // @ts-expect-error its sequence too.
  input.state.seq = 1;
  // @ts-expect-error a fleet view's catalog cannot be replaced.
  fleet.replicas.catalog = { models: [], seq: 0, appliedBy: "" };
  // @ts-expect-error nor a replicas view's passes counted.
  replicas.passes++;
}
