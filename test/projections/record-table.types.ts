/**
 * The type test of `RecordTable`: each line marked `@ts-expect-error` is a
 * write to a record that must not compile (`tsc --noEmit -p .` checks this
 * file with the rest). Should a guard go (`get` handing out a writable
 * record, a view gaining a writer, `DecideInput.state` a writable state),
 * the write compiles, its `@ts-expect-error` is unused, and tsc fails.
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

  // A reconcile pass's input is a view of the fleet: nothing in it can be written.
  // @ts-expect-error its node table is a view.
  input.state.inventory.nodes.put("n-1", {} as NodeState);
  // @ts-expect-error its replica table is a view.
  input.state.replicas.replicas.update("r-1", () => {});
  // @ts-expect-error its records are read-only.
  input.state.inventory.nodes.get("n-1")!.cordoned = true;
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
