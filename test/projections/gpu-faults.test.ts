import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { GpuProblem_Kind } from "../../src/gen/llmgw/v1/agent_pb.js";
import { Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import { EventFactory, h100Node } from "../support/fleet-events.js";
import { given } from "./gwt.js";

const OPERATOR = { kind: Writer_Kind.OPERATOR, id: "api-1" };

function gpuProblem(
  f: EventFactory,
  sessionId: string,
  gpuIndex: number,
  kind: GpuProblem_Kind,
  message: string,
) {
  return f.make({
    case: "usageChanged",
    value: { nodeId: "a1", sessionId, sessionSeq: 3n, gpuProblems: [{ gpuIndex, kind, message }] },
  });
}
const clear = (f: EventFactory, gpuIndex: number, nodeLevel = false) =>
  f.make(
    {
      case: "gpuProblemsCleared",
      value: { nodeId: "a1", gpuIndex, nodeLevel, operator: "alice", reason: "reseated" },
    },
    OPERATOR,
  );
const cordon = (f: EventFactory, gpuIndex: number) =>
  f.make(
    { case: "gpuCordoned", value: { nodeId: "a1", gpuIndex, reason: "fan", operator: "alice" } },
    OPERATOR,
  );
const uncordon = (f: EventFactory, gpuIndex: number) =>
  f.make({ case: "gpuUncordoned", value: { nodeId: "a1", gpuIndex, operator: "alice" } }, OPERATOR);

describe("fold: per-GPU problems and cordons", () => {
  it("a GPU problem attaches to that GPU only, with its kind, once however often it is reported", () => {
    const f = new EventFactory();
    const { after } = given(f.sessionOpened("a1", "s-1", "gw-1")).when(
      gpuProblem(f, "s-1", 3, GpuProblem_Kind.XID, "Xid 79: GPU has fallen off the bus"),
      gpuProblem(f, "s-1", 3, GpuProblem_Kind.XID, "Xid 79: GPU has fallen off the bus"),
      gpuProblem(f, "s-1", 3, GpuProblem_Kind.THERMAL, "92 C"),
    );
    const n = after.inventory.nodes.get("a1")!;
    assert.deepEqual(n.gpus[3]?.faults, [
      { kind: "xid", message: "Xid 79: GPU has fallen off the bus" },
      { kind: "thermal", message: "92 C" },
    ]);
    assert.deepEqual(
      n.gpus.filter((g) => g.faults.length > 0).map((g) => g.index),
      [3],
    );
    assert.deepEqual(n.nodeProblems, [], "a tagged problem is not node-level");
  });

  it("a kind this version does not know is kept as unspecified; an index the node lacks is ignored", () => {
    const f = new EventFactory();
    const { before, after } = given(f.sessionOpened("a1", "s-1", "gw-1")).when(
      gpuProblem(f, "s-1", 2, 42 as GpuProblem_Kind, "new kind"),
      gpuProblem(f, "s-1", 9, GpuProblem_Kind.ECC, "no such GPU"),
    );
    assert.deepEqual(after.inventory.nodes.get("a1")?.gpus[2]?.faults, [
      { kind: "unspecified", message: "new kind" },
    ]);
    assert.equal(after.inventory.nodes.get("a1")?.gpus.length, before.inventory.nodes.get("a1")?.gpus.length);
  });

  it("a problem from a superseded session is ignored", () => {
    const f = new EventFactory();
    const { after } = given(f.sessionOpened("a1", "s-1", "gw-1"), f.sessionOpened("a1", "s-2", "gw-1")).when(
      gpuProblem(f, "s-1", 3, GpuProblem_Kind.ECC, "old"),
    );
    assert.deepEqual(after.inventory.nodes.get("a1")?.gpus[3]?.faults, []);
  });

  it("clearing empties that GPU's registered and reported problems; node_level clears the node's", () => {
    const f = new EventFactory();
    const history = [
      f.sessionOpened("a1", "s-1", "gw-1", h100Node("a1", { gpuProblems: { 3: ["ecc"], 5: ["ecc"] } })),
      gpuProblem(f, "s-1", 3, GpuProblem_Kind.XID, "Xid 79"),
      f.usage("a1", "s-1", [0, 0, 0, 0, 0, 0, 0, 0], ["NVLink down"]),
    ];
    const gpu = given(...history).when(clear(f, 3));
    const n = gpu.after.inventory.nodes.get("a1")!;
    assert.deepEqual([n.gpus[3]?.problems, n.gpus[3]?.faults], [[], []]);
    assert.deepEqual(n.gpus[5]?.problems, ["ecc"], "other GPUs keep theirs");
    assert.deepEqual(n.nodeProblems, ["NVLink down"]);
    assert.equal(n.lastChangeSeq, gpu.whenSeq);

    const node = given(...history).when(clear(f, 0, true));
    const m = node.after.inventory.nodes.get("a1")!;
    assert.deepEqual(m.nodeProblems, []);
    assert.deepEqual(m.gpus[3]?.faults, [{ kind: "xid", message: "Xid 79" }], "GPU problems stay");
  });

  it("a GPU cordon is operator intent: it outlives a re-registration and a new session; uncordon ends it", () => {
    const f = new EventFactory();
    const { after } = given(f.sessionOpened("a1", "s-1", "gw-1")).when(
      cordon(f, 5),
      f.hardwareChanged("a1", "s-1", h100Node("a1")),
      f.sessionClosed("a1", "s-1", "gw-1"),
      f.sessionOpened("a1", "s-2", "gw-1"),
    );
    const g = after.inventory.nodes.get("a1")?.gpus[5];
    assert.deepEqual([g?.cordoned, g?.cordonReason], [true, "fan"]);
    assert.equal(after.inventory.nodes.get("a1")?.gpus.filter((x) => x.cordoned).length, 1);
    const back = given(f.sessionOpened("a1", "s-1", "gw-1"), cordon(f, 5)).when(uncordon(f, 5));
    assert.deepEqual(back.after.inventory.nodes.get("a1")?.gpus[5]?.cordoned, false);
  });

  it("a re-registration and a new session keep a GPU's problems (only gpu clear ends them); a new UUID starts clean", () => {
    const f = new EventFactory();
    const { after } = given(
      f.sessionOpened("a1", "s-1", "gw-1"),
      gpuProblem(f, "s-1", 3, GpuProblem_Kind.XID, "Xid 79"),
    ).when(
      f.hardwareChanged("a1", "s-1", h100Node("a1", { gpuProblems: { 3: ["Xid 79"] } })),
      f.sessionClosed("a1", "s-1", "gw-1"),
      f.sessionOpened("a1", "s-2", "gw-1"),
    );
    const g = after.inventory.nodes.get("a1")?.gpus[3];
    assert.deepEqual([g?.problems, g?.faults], [["Xid 79"], [{ kind: "xid", message: "Xid 79" }]]);
    const node = h100Node("a1");
    node.gpus![3]!.uuid = "GPU-swapped-in";
    const swapped = given(
      f.sessionOpened("a1", "s-1", "gw-1"),
      gpuProblem(f, "s-1", 3, GpuProblem_Kind.XID, "Xid 79"),
    ).when(f.hardwareChanged("a1", "s-1", node));
    const s3 = swapped.after.inventory.nodes.get("a1")?.gpus[3];
    assert.deepEqual([s3?.uuid, s3?.problems, s3?.faults], ["GPU-swapped-in", [], []]);
  });

  it("intent for an unknown node or GPU changes nothing", () => {
    const f = new EventFactory();
    const { before, after } = given(f.sessionOpened("a1", "s-1", "gw-1")).when(cordon(f, 12), clear(f, 12));
    assert.deepEqual(after.inventory, before.inventory);
  });
});
