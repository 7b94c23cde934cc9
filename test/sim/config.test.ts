import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fleetNodeIds, nodeHardware, parseSimConfig, SimConfigError, SimFleet } from "../../src/sim/index.js";
import { runCli, startCli } from "../support/cli.js";
import { FakeGateway, waitFor } from "../support/fake-gateway.js";

describe("sim configuration", () => {
  it("defaults to H100 nodes in 4-node InfiniBand pods over TLS", () => {
    const c = parseSimConfig({});
    assert.equal(c.gpusPerNode, 8);
    assert.equal(c.gpuMemoryMb, 81559);
    assert.equal(c.nodesPerFabric, 4);
    assert.equal(c.nvlinkDomainSize, 8);
    assert.equal(c.insecureDev, false);
    assert.match(c.gateways[0]!, /^https:\/\//);
    assert.equal(c.faultRate, 0);
  });

  it("names nodes by prefix and number, and one by one with DNS names", () => {
    const c = parseSimConfig({ nodes: 2, nodePrefix: "rack4-gpu-", nodeIds: ["gpu-1.dc1.example.com"] });
    assert.deepEqual(fleetNodeIds(c), ["rack4-gpu-1", "rack4-gpu-2", "gpu-1.dc1.example.com"]);
    assert.deepEqual(fleetNodeIds(parseSimConfig({ nodes: 0, nodeIds: ["a.b"] })), ["a.b"]);
    assert.deepEqual(fleetNodeIds(parseSimConfig({ nodes: 1, nodePrefix: "dc1.gpu-" })), ["dc1.gpu-1"]);
  });

  it("models several NVLink domains per node and rack-scale domains across nodes", () => {
    const base = { gpuProduct: "x", gpuMemoryMb: 1024, nodesPerFabric: 0, fabricKind: "infiniband" as const };
    const split = nodeHardware("n1", 0, { ...base, gpusPerNode: 8, nvlinkDomainSize: 4 });
    assert.deepEqual(
      split.fabrics.map((f) => [f.name, f.gpuIndices]),
      [
        ["n1-nvl-1", [0, 1, 2, 3]],
        ["n1-nvl-2", [4, 5, 6, 7]],
      ],
    );
    // GB200 NVL72: 4 GPUs per tray, 18 trays in one domain.
    const nvl72 = (pos: number) =>
      nodeHardware(`t${pos}`, pos, { ...base, gpusPerNode: 4, nvlinkDomainSize: 72 }).fabrics[0]!.name;
    assert.equal(nvl72(0), nvl72(17));
    assert.notEqual(nvl72(17), nvl72(18));
    assert.deepEqual(nodeHardware("p", 0, { ...base, gpusPerNode: 4, nvlinkDomainSize: 0 }).fabrics, []);
  });

  it("names the field and the expected form of every invalid value", () => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ nodes: -1 }, "nodes", /integer from 0/],
      [{ nodes: "abc" }, "nodes", /got "abc"/],
      [{ gpuMemoryMb: 12.5 }, "gpuMemoryMb", /MiB/],
      [{ faultRate: 2 }, "faultRate", /from 0 to 1/],
      [{ faults: ["meltdown"] }, "faults", /unknown fault "meltdown"/],
      [{ faults: ["oom@node-99"], nodes: 2 }, "faults", /not in this fleet/],
      [{ faults: ["xid@arg=--x"] }, "faults", /unknown fault "xid@arg=--x"/],
      [{ gateways: ["ftp://x"] }, "gateways", /https:\/\//],
      [{ gateways: ["http://127.0.0.1:1"] }, "gateways", /insecureDev/],
      [{ nodePrefix: "A_b" }, "nodePrefix", /lower-case letters, digits/],
      [{ nodePrefix: "-gpu" }, "nodePrefix", /"-gpu4" must be a DNS name/],
      [{ nodeIds: ["gpu_1.dc1"] }, "nodeIds", /"gpu_1\.dc1" must be a DNS name/],
      [{ nodeIds: ["node-2"] }, "nodeIds", /"node-2" is in the fleet twice/],
      [{ nodes: 0, nodeIds: ["a.b", "a.b"] }, "nodeIds", /"a\.b" is in the fleet twice/],
      [{ gpusPerNode: 8, nvlinkDomainSize: 3 }, "nvlinkDomainSize", /does not fit/],
      [{ restartMode: "maybe" }, "restartMode", /keep or empty/],
      [{ reconnectMinMs: 500, reconnectMaxMs: 100 }, "reconnectMaxMs", /below/],
    ];
    for (const [input, field, message] of cases) {
      assert.throws(
        () => new SimFleet(input as never),
        (err: unknown) =>
          err instanceof SimConfigError &&
          err.issues.some((i) => i.field === field && message.test(i.message)),
        `${JSON.stringify(input)} should be refused naming ${field}`,
      );
    }
  });
});

describe("llmgw sim command", () => {
  it("exits 2 on an invalid flag, naming the flag and what it expects", async () => {
    // A few through the real command (each costs a process start); the schema's
    // field-by-field messages are covered in-process above.
    const cases: [string[], RegExp][] = [
      [["--nodes", "abc"], /invalid --nodes: expected an integer/],
      [["--fault", "meltdown"], /invalid --fault: .*unknown fault/],
      [
        ["--fault-rate", "1.5", "--restart-mode", "sometimes"],
        /invalid --fault-rate: expected a number from 0 to 1[\s\S]*invalid --restart-mode: expected keep or empty/,
      ],
      [["--insecure-dev", "--gateway", "https://127.0.0.1:1"], /invalid --gateway: .*not http:\/\//],
      [["--label", "novalue"], /invalid --label/],
    ];
    await Promise.all(
      cases.map(async ([args, message]) => {
        const r = await runCli(["sim", ...args]);
        assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
        assert.match(r.stderr, message);
      }),
    );
  });

  it("exits 2 naming the missing certificate and how to make it", async () => {
    const r = await runCli(["sim", "--certs-dir", "no-such-dir", "--nodes", "1"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /no-such-dir.*llmgw certs/);
  });

  it("runs a fleet against a gateway, prints summaries and stops cleanly on SIGTERM", async () => {
    const gw = await FakeGateway.start();
    const child = startCli([
      "sim",
      "--insecure-dev",
      "--gateway",
      gw.url,
      "--nodes",
      "3",
      "--summary-ms",
      "100",
      "--heartbeat-ms",
      "100",
    ]);
    try {
      await waitFor("3 registrations", () => gw.streams.filter((s) => s.register).length === 3, 30_000);
      await waitFor(
        "a summary with 3 nodes connected",
        () => /nodes 3\/3 connected/.test(child.stdout()),
        30_000,
      );
      child.proc.kill("SIGTERM");
      assert.equal(await child.exited, 0);
      assert.match(child.stdout(), /shards 0 running, 0 starting, 0 draining, 0 failed · 0 reconnects/);
      assert.match(child.stdout(), /^stopped: /m);
    } finally {
      child.proc.kill("SIGKILL");
      await gw.close();
    }
  });
});
