import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  fileProblemLedger,
  type GpuSeen,
  HardwareWatch,
  type NodeHardwareInventory,
  type ProblemLedgerData,
  type SampledProblem,
} from "../../src/agent/index.js";
import { GpuProblem_Kind } from "../../src/gen/llmgw/v1/agent_pb.js";

const uuid = (i: number) => `GPU-0000000${i}-aaaa`;
const slot = (i: number) => `0000:${(0x18 + i * 0x10).toString(16)}:00`;
const seen = (i: number, u = uuid(i)): GpuSeen => ({
  uuid: u,
  slot: slot(i),
  product: "H100",
  memoryTotalMb: 81559,
});

function inventory(n: number, problems: SampledProblem[] = []): NodeHardwareInventory {
  return {
    gpus: Array.from({ length: n }, (_, i) => ({
      index: i,
      uuid: uuid(i),
      product: "H100",
      memoryTotalMb: 81559n,
      memoryUsedMb: 0n,
      problems: [],
    })),
    fabrics: [],
    problems,
    slots: Array.from({ length: n }, (_, i) => slot(i)),
  };
}

const ecc = (gpuIndex: number, count: number): SampledProblem => ({
  gpuIndex,
  kind: GpuProblem_Kind.ECC,
  message: `${count} uncorrectable ECC errors`,
  occurrence: { type: "state", signal: "ecc", level: count },
});
const xid = (gpuIndex: number, stamp: string): SampledProblem => ({
  gpuIndex,
  kind: GpuProblem_Kind.XID,
  message: "Xid 79: GPU has fallen off the bus",
  occurrence: { type: "event", signal: `xid 79 ${stamp}`, level: 1 },
});

/** A ledger kept in memory, as the state directory's file keeps it. */
function memoryLedger() {
  let data: ProblemLedgerData | undefined;
  return {
    load: () => data,
    save: (d: ProblemLedgerData) => {
      data = structuredClone(d);
    },
  };
}

const messages = (o: { problems: { gpuIndex?: number; message?: string }[] }) =>
  o.problems.map((p) => `${p.gpuIndex} ${p.message}`);

describe("hardware watch", () => {
  it("keeps registered indices when nvidia-smi renumbers; a GPU gone, back, swapped or new is a change", () => {
    const w = new HardwareWatch(inventory(3), { failureThreshold: 3 });
    // GPU 1 fell off the bus: nvidia-smi lists GPU 2 at position 1, its problem and memory with it.
    const gone = w.observe({ memoryUsedMb: [10, 20], problems: [ecc(1, 1)], gpus: [seen(0), seen(2)] });
    assert.deepEqual(gone.changes, [{ index: 1, uuid: uuid(1), kind: "gone" }]);
    assert.deepEqual(messages(gone), ["2 1 uncorrectable ECC errors"]);
    assert.deepEqual(
      w.present().map((g) => [g.gpu.index, g.memoryUsedMb]),
      [
        [0, 10],
        [2, 20],
      ],
    );
    assert.equal(w.has(1), false);
    const back = w.observe({ memoryUsedMb: [0, 0, 0], problems: [], gpus: [seen(0), seen(1), seen(2)] });
    assert.deepEqual(back.changes, [{ index: 1, uuid: uuid(1), kind: "back" }]);
    const swapped = w.observe({
      memoryUsedMb: [0, 0, 0, 0],
      problems: [],
      gpus: [seen(0), seen(1, "GPU-new"), seen(2), seen(3)],
    });
    assert.deepEqual(swapped.changes, [
      { index: 1, uuid: "GPU-new", kind: "swapped", previousUuid: uuid(1) },
      { index: 3, uuid: uuid(3), kind: "new" },
    ]);
    assert.equal(w.uuidOf(1), "GPU-new");
    assert.deepEqual(w.observe({ memoryUsedMb: [], problems: [] }).changes, [], "a source that cannot tell");
  });

  it("reports each occurrence once, through a restart: a rising counter, a condition back, a new Xid", () => {
    const store = memoryLedger();
    const first = new HardwareWatch(inventory(2, [ecc(0, 2), xid(1, "1023")]), {
      failureThreshold: 3,
      store,
    });
    assert.deepEqual(messages({ problems: first.initialProblems() }), [
      "0 2 uncorrectable ECC errors",
      "1 Xid 79: GPU has fallen off the bus",
    ]);
    assert.deepEqual(messages(first.observe({ memoryUsedMb: [0, 0], problems: [ecc(0, 2)] })), []);

    // A restart: the kernel log read again from its start, the counter unchanged.
    const second = new HardwareWatch(inventory(2, [ecc(0, 2), xid(1, "1023")]), {
      failureThreshold: 3,
      store,
    });
    assert.deepEqual(second.initialProblems(), [], "nothing said before is said again");
    assert.deepEqual(
      messages(second.observe({ memoryUsedMb: [0, 0], problems: [ecc(0, 3), xid(1, "1077")] })),
      ["0 3 uncorrectable ECC errors", "1 Xid 79: GPU has fallen off the bus"],
    );
    // The counter reset (GPU reset), then rose again: a new occurrence.
    assert.deepEqual(messages(second.observe({ memoryUsedMb: [0, 0], problems: [] })), []);
    assert.deepEqual(messages(second.observe({ memoryUsedMb: [0, 0], problems: [ecc(0, 1)] })), [
      "0 1 uncorrectable ECC errors",
    ]);
  });

  it("nvidia-smi failing failureThreshold times in a row is one node problem per run of failures", () => {
    const w = new HardwareWatch(inventory(1), { failureThreshold: 3 });
    assert.equal(w.failed("exit 9"), undefined);
    assert.equal(w.failed("exit 9"), undefined);
    assert.match(
      w.failed("exit 9") ?? "",
      /^nvidia-smi failed 3 times in a row \(GPU figures are stale\): exit 9$/,
    );
    assert.equal(w.failed("exit 9"), undefined, "once per run");
    w.observe({ memoryUsedMb: [0], problems: [] });
    w.failed("x");
    w.failed("x");
    assert.ok(w.failed("x"), "a new run of failures is reported again");
  });

  it("keeps the ledger in the state directory, 0600; a damaged file is a warning and an empty ledger", () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-ledger-"));
    try {
      const warnings: string[] = [];
      const store = fileProblemLedger(join(dir, "state"), (_o, msg) => warnings.push(msg));
      assert.equal(store.load(), undefined);
      new HardwareWatch(inventory(1, [ecc(0, 4)]), { failureThreshold: 3, store });
      const path = join(dir, "state", "gpu-problems.json");
      assert.deepEqual(JSON.parse(readFileSync(path, "utf8")), {
        levels: { [`${uuid(0)} ecc`]: 4 },
        events: [],
      });
      assert.equal(statSync(path).mode & 0o777, 0o600);
      const again = new HardwareWatch(inventory(1, [ecc(0, 4)]), { failureThreshold: 3, store });
      assert.deepEqual(again.initialProblems(), []);
      rmSync(path);
      const bad = fileProblemLedger(join(dir, "state"), (_o, msg) => warnings.push(msg));
      writeFileSync(path, "{not json");
      assert.equal(bad.load(), undefined);
      assert.match(warnings.join("\n"), /damaged/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
