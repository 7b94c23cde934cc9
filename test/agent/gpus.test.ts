/**
 * GPU discovery: nvidia-smi's output read exactly or refused with the line
 * quoted; a fake nvidia-smi run for real (foreign memory seen in a sample);
 * and `llmgw agent` exiting 2 with a message naming the path and the output
 * when nvidia-smi is missing, failing or printing garbage — never registering.
 */
import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import {
  discoverWithNvidiaSmi,
  GpuDiscoveryError,
  GpuOutputError,
  hardwareConfigSchema,
  normalisePciBusId,
  nvidiaSmiSource,
  openKernelLog,
  parseQueryGpu,
  parseTopology,
  parseXidLines,
  rowProblems,
  xidProblems,
} from "../../src/agent/index.js";
import { GpuProblem_Kind } from "../../src/gen/llmgw/v1/agent_pb.js";
import { runCli } from "../support/cli.js";

const FAKE_SMI = join(import.meta.dirname, "../fixtures/agent/fake-nvidia-smi.mjs");
const KMSG_XID = readFileSync(join(import.meta.dirname, "../fixtures/agent/kmsg-xid.txt"), "utf8");
const config = hardwareConfigSchema.parse({});
const H100 =
  "0, GPU-1a2b3c4d-0000-1111-2222-333344445555, NVIDIA H100 80GB HBM3, 81559, 0, 00000000:18:00.0, 34, 0, No, No, No\n" +
  "1, GPU-1a2b3c4d-0000-1111-2222-333344445556, NVIDIA H100 80GB HBM3, 81559, 4210, 00000000:2A:00.0, 93, [N/A], [Not Supported], [N/A], [N/A]\n";

function withState<T>(state: object, fn: (path: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-smi-"));
  const path = join(dir, "state.json");
  writeFileSync(path, JSON.stringify(state));
  process.env["FAKE_NVIDIA_SMI_STATE"] = path;
  process.env["PATH"] = `${dirname(process.execPath)}:${process.env["PATH"]}`;
  return fn(path).finally(() => rmSync(dir, { recursive: true, force: true }));
}

describe("GPU discovery", () => {
  it("reads nvidia-smi's CSV, N/A health columns included", () => {
    const rows = parseQueryGpu(H100);
    assert.equal(rows.length, 2);
    assert.equal(rows[1]!.product, "NVIDIA H100 80GB HBM3");
    assert.equal(rows[1]!.memoryUsedMb, 4210);
    assert.equal(rows[1]!.eccUncorrected, undefined);
    assert.deepEqual(
      rowProblems(rows[1]!, 90).map((p) => p.kind),
      [GpuProblem_Kind.THERMAL],
    );
  });

  it("refuses output that is not a GPU list, quoting the line", () => {
    assert.throws(() => parseQueryGpu(""), GpuOutputError);
    assert.throws(
      () => parseQueryGpu("0, GPU-1a2b-3c4d, H100, lots, 0, b, 1, 0, No, No, No"),
      /memory.total "lots" is not a whole number/,
    );
    assert.throws(
      () => parseQueryGpu("Segmentation fault"),
      /expected 11 columns .* in "Segmentation fault"/,
    );
    assert.throws(() => parseQueryGpu(H100.split("\n")[1]!), /indices are not 0..0 in order/);
  });

  it("reads remapped rows (H100: retired pages N/A) as problems, each a condition with a level", () => {
    const rows = parseQueryGpu(
      "0, GPU-1a2b3c4d-0000-1111-2222-333344445555, NVIDIA H100 80GB HBM3, 81559, 0, 00000000:18:00.0, 34, 2, [N/A], Yes, Yes\n",
    );
    assert.deepEqual(
      [rows[0]!.retiredPagesPending, rows[0]!.remappedRowsPending, rows[0]!.remappedRowsFailure],
      [undefined, true, true],
    );
    assert.deepEqual(
      rowProblems(rows[0]!, 90).map((p) => [p.kind, p.message, p.occurrence.signal, p.occurrence.level]),
      [
        [GpuProblem_Kind.ECC, "2 uncorrectable ECC errors", "ecc", 2],
        [
          GpuProblem_Kind.RETIRED_PAGES,
          "remapped rows pending (a reset is needed)",
          "remapped-rows-pending",
          1,
        ],
        [
          GpuProblem_Kind.RETIRED_PAGES,
          "row remapping failed (the GPU needs service)",
          "remapped-rows-failure",
          1,
        ],
      ],
    );
  });

  it("groups NVLink domains from topo -m, ignoring NIC rows and the legend", () => {
    const topo =
      "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\n" +
      "GPU0\t X \tNV18\tSYS\tSYS\tPXB\t0-55\t0\n" +
      "GPU1\tNV18\t X \tSYS\tSYS\tPXB\t0-55\t0\n" +
      "GPU2\tSYS\tSYS\t X \tNV18\tSYS\t56-111\t1\n" +
      "GPU3\tSYS\tSYS\tNV18\t X \tSYS\t56-111\t1\n" +
      "NIC0\tPXB\tPXB\tSYS\tSYS\t X \n\nLegend:\n  X    = Self\n  NV#  = bonded NVLinks\n";
    assert.deepEqual(parseTopology(topo, 4), [
      [0, 1],
      [2, 3],
    ]);
    assert.throws(() => parseTopology("garbage", 4), /no GPU0 column header/);
  });

  it("reads Xid lines of /dev/kmsg and dmesg, old and new driver formats, other lines skipped", () => {
    assert.deepEqual(parseXidLines(KMSG_XID), [
      { stamp: "1023", pciKey: "0000:28:00", xid: 79, detail: "GPU has fallen off the bus." },
      {
        stamp: "7123.456789",
        pciKey: "0000:18:00",
        xid: 13,
        detail: "Graphics Exception: ESR 0x504648=0x2000d",
      },
      {
        stamp: "1025",
        pciKey: "0000:28:00",
        xid: 48,
        detail:
          "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 1, subpartition 0.",
      },
    ]);
    assert.equal(normalisePciBusId("00000000:3B:00.0"), "0000:3b:00");
    assert.equal(normalisePciBusId("0000:3b:00"), "0000:3b:00");
    assert.equal(normalisePciBusId("[N/A]"), undefined);
  });

  it("puts an Xid on the GPU whose bus it names; application Xids and unknown buses are no problem", () => {
    const gpus = [
      { index: 0, pciBusId: "00000000:18:00.0" },
      { index: 1, pciBusId: "00000000:28:00.0" },
    ];
    const problems = xidProblems(
      [...parseXidLines(KMSG_XID), { pciKey: "0000:99:00", xid: 79, detail: "", stamp: "9" }],
      gpus,
      config.xidIgnore,
    );
    assert.deepEqual(
      problems.map((p) => [p.gpuIndex, p.kind, p.message]),
      [
        [1, GpuProblem_Kind.XID, "Xid 79: GPU has fallen off the bus (GPU has fallen off the bus.)"],
        [
          1,
          GpuProblem_Kind.XID,
          "Xid 48: double-bit ECC error (An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 1, subpartition 0.)",
        ],
      ],
    );
    assert.deepEqual(config.xidIgnore, [13, 31, 43, 45]);
  });

  it("samples Xids the kernel log gained since the last look, a half-written line once whole, again after truncation", async () => {
    await withState({ gpus: [{}, {}] }, async (path) => {
      const kmsg = join(dirname(path), "kmsg");
      writeFileSync(kmsg, "6,1,1,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n");
      const kernelLog = openKernelLog({ path: kmsg, onUnreadable: (r) => assert.fail(r) });
      const o = { path: FAKE_SMI, nodeId: "gpu-x", config, kernelLog };
      try {
        const inv = await discoverWithNvidiaSmi(o);
        assert.deepEqual(inv.problems, []);
        const source = nvidiaSmiSource(o);
        appendFileSync(kmsg, "4,2,2,-;NVRM: Xid (PCI:0000:28:00): 79, pid=1, name=x, GPU has fallen off");
        assert.deepEqual((await source.sample()).problems, [], "half a line is not read yet");
        appendFileSync(kmsg, " the bus.\n");
        const xid = (await source.sample()).problems;
        assert.deepEqual(
          xid.map((p) => [p.gpuIndex, p.kind]),
          [[1, GpuProblem_Kind.XID]],
        );
        assert.deepEqual((await source.sample()).problems, [], "an Xid is read once");
        writeFileSync(kmsg, "4,1,1,-;NVRM: Xid (PCI:0000:18:00): 95, pid=1, name=x, Uncontained\n");
        assert.deepEqual(
          (await source.sample()).problems.map((p) => [p.gpuIndex, p.message]),
          [[0, "Xid 95: uncontained ECC error (Uncontained)"]],
        );
      } finally {
        kernelLog.close();
      }
    });
    const reasons: string[] = [];
    const missing = openKernelLog({ path: "/nonexistent/kmsg", onUnreadable: (r) => reasons.push(r) });
    assert.equal(missing.readNew(), "");
    assert.equal(missing.readNew(), "");
    assert.deepEqual(reasons, ["ENOENT"], "an unreadable kernel log is told once");
  });

  it("discovers through a real nvidia-smi process, and samples memory a foreign process holds", async () => {
    await withState({ gpus: [{}, {}, {}, {}], nvlink: [[0, 1, 2, 3]] }, async (path) => {
      const o = { path: FAKE_SMI, nodeId: "gpu-x", config };
      const inv = await discoverWithNvidiaSmi(o);
      assert.equal(inv.gpus.length, 4);
      assert.deepEqual(inv.fabrics, [{ name: "nvlink-gpu-x-0", kind: "nvlink", gpuIndices: [0, 1, 2, 3] }]);
      writeFileSync(path, JSON.stringify({ gpus: [{}, { memoryUsedMb: 70000 }, {}, { ecc: 3 }] }));
      const sample = await nvidiaSmiSource(o).sample();
      assert.deepEqual(sample.memoryUsedMb, [0, 70000, 0, 0]);
      assert.deepEqual(
        sample.problems.map((p) => [p.gpuIndex, p.kind]),
        [[3, GpuProblem_Kind.ECC]],
      );
      // A GPU fallen off the bus is not listed; the ones behind it move up, their slots stay.
      writeFileSync(path, JSON.stringify({ gpus: [{}, { gone: true }, {}, { remappedPending: true }] }));
      const after = await nvidiaSmiSource(o).sample();
      assert.deepEqual(
        after.gpus?.map((g) => g.slot),
        [inv.slots?.[0], inv.slots?.[2], inv.slots?.[3]],
      );
      assert.deepEqual(
        after.problems.map((p) => [p.gpuIndex, p.message]),
        [[2, "remapped rows pending (a reset is needed)"]],
      );
    });
  });

  it("fails with the path and the output when nvidia-smi is missing, failing, garbage or hung", async () => {
    await assert.rejects(
      discoverWithNvidiaSmi({ path: "/nonexistent/nvidia-smi", nodeId: "n", config }),
      (e: Error) =>
        e instanceof GpuDiscoveryError && /not found at \/nonexistent\/nvidia-smi/.test(e.message),
    );
    await withState({ gpus: [{}], mode: "fail" }, async () => {
      await assert.rejects(
        discoverWithNvidiaSmi({ path: FAKE_SMI, nodeId: "n", config }),
        /exited with code 9: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver/,
      );
    });
    await withState({ gpus: [{}], mode: "hang" }, async () => {
      await assert.rejects(
        discoverWithNvidiaSmi({ path: FAKE_SMI, nodeId: "n", config, timeoutMs: 500 }),
        /did not answer within 500 ms/,
      );
    });
  });

  it("llmgw agent exits 2 naming nvidia-smi and its output, before registering anything", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-agent-smi-"));
    try {
      const cfg = join(dir, "agent.json");
      writeFileSync(
        cfg,
        JSON.stringify({
          engines: { default: { command: ["true"], ready: { http: "http://127.0.0.1:{port}/health" } } },
        }),
      );
      writeFileSync(join(dir, "state.json"), JSON.stringify({ gpus: [{}], mode: "garbage" }));
      const base = [
        "agent",
        "--config",
        cfg,
        "--insecure-dev",
        "--gateway",
        "http://127.0.0.1:9",
        "--node-id",
        "gpu-1",
      ];
      const env = {
        FAKE_NVIDIA_SMI_STATE: join(dir, "state.json"),
        PATH: `${dirname(process.execPath)}:${process.env["PATH"]}`,
      };
      const garbage = await runCli([...base, "--nvidia-smi", FAKE_SMI, "--state-dir", dir], { env });
      assert.equal(garbage.code, 2, garbage.stderr);
      assert.match(
        garbage.stderr,
        /nvidia-smi at .*fake-nvidia-smi\.mjs printed what is not a GPU list: .*"Segmentation fault in libnvidia-ml/,
      );
      const missing = await runCli([...base, "--nvidia-smi", "/nonexistent/nvidia-smi", "--state-dir", dir], {
        env,
      });
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /nvidia-smi not found at \/nonexistent\/nvidia-smi/);
      writeFileSync(
        cfg,
        JSON.stringify({ engines: { default: { command: ["x", "{prot}"], ready: { http: "u" } } } }),
      );
      const badConfig = await runCli([...base, "--nvidia-smi", FAKE_SMI], { env });
      assert.equal(badConfig.code, 2);
      assert.match(badConfig.stderr, /engines\.default\.command\.1: unknown placeholder \{prot\}/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
