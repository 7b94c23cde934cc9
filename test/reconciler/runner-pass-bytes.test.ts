/**
 * A pass is one log message: against a real nats-server whose max_payload
 * is 64 KiB, a `llmgw reconciler` process (default config, 768 KiB pass
 * limit) lowers its pass limit to what the server takes and places a
 * catalog whose placement, as one pass, the server would refuse forever.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { openLog } from "../../src/log/index.js";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { logFlags, runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { EventFactory } from "../support/fleet-events.js";
import { rand, readAll } from "../support/gateway.js";
import { passesOf, passViolations } from "../support/pass-invariants.js";
import { killAll, type ReconcilerProcess, spawnReconciler } from "../support/reconciler.js";

const MAX_PAYLOAD = 64 * 1024;
const NODES = 24;
const REPLICAS = 20;
const GIB = 1024;

/**
 * One replica per 8-GPU node, with a 3 KiB chat template in its engine
 * arguments (as a real profile can carry): each start carries it, so 20
 * placements make one pass of about 70 KB.
 */
function templated(replicas: number) {
  const template = `{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{{ m.content }}<|eot_id|>{% endfor %}`;
  return {
    name: "llama-3.3-70b-templated",
    replicas,
    profiles: [
      {
        name: "tp8",
        shards: 1,
        gpusPerShard: 8,
        memoryPerGpuMb: BigInt(72 * GIB),
        gpuProduct: "H100",
        engineArgs: [
          "--tensor-parallel-size",
          "8",
          "--chat-template",
          template.repeat(30).slice(0, 3 * 1024),
        ],
        engineEnv: { VLLM_USE_V1: "1" },
      },
    ],
  };
}

describe("reconciler runner: passes fit the NATS server's max_payload", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    const dir = tempDir("nats-payload");
    writeFileSync(join(dir, "payload.conf"), `max_payload: ${MAX_PAYLOAD}\n`);
    server = await startServer({ include: join(dir, "payload.conf") });
  });
  after(async () => {
    await server?.close();
  });

  it("lowers its pass limit to the server's and places every replica in passes the server takes", async () => {
    const stream = uniqueStream("PASSBYTES");
    const prefix = `pb${rand()}.evt`;
    const log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    assert.equal(log.nc.info?.max_payload, MAX_PAYLOAD, "the server runs with the included max_payload");
    const f = new EventFactory(`pb-${rand()}`);
    let rec: ReconcilerProcess | undefined;
    try {
      for (let i = 0; i < NODES; i++) await log.append(f.sessionOpened(`gpu-${i}`, `s-${i}`, "gw-1"));
      rec = await spawnReconciler({
        id: "rec-bytes",
        nats: server.url,
        stream,
        prefix,
        leaseBucket: `rl_${rand()}`,
        gatewaysBucket: `gwl_${rand()}`,
      });
      await log.append(f.catalog([templated(REPLICAS)]));

      const placed = async () =>
        new Set(
          passesOf(await readAll(log)).flatMap((p) =>
            p.pass.decisions.flatMap((d) =>
              d.kind.case === "replicaPlaced" ? [d.kind.value.replicaId] : [],
            ),
          ),
        );
      await eventually(async () => (await placed()).size === REPLICAS, {
        what: `${REPLICAS} replicas placed:\n${rec.output()}`,
        timeoutMs: 30_000,
      });

      const lowered = rec.lines.find((l) => l.msg.startsWith("pass limit lowered"));
      assert.ok(lowered, `the reconciler says why its limit is lower:\n${rec.output()}`);
      assert.equal(lowered.natsMaxPayload, MAX_PAYLOAD);
      assert.equal(lowered.configured, 768 * 1024);
      assert.ok((lowered.maxPassBytes as number) < MAX_PAYLOAD);
      const failed = rec.lines.filter((l) => /^pass failed/.test(l.msg));
      assert.deepEqual(failed, [], "no pass was refused by the server");

      const passes = passesOf(await readAll(log));
      const placing = passes.filter((p) => p.pass.decisions.some((d) => d.kind.case === "replicaPlaced"));
      assert.ok(
        placing.length >= 2,
        `${placing.length} placing passes: one would be over the server's limit`,
      );
      assert.equal(placing[0]?.pass.truncated, true);
      assert.deepEqual(passViolations(await readAll(log)), []);

      // The check decides every pass again with the limit lowered as the
      // runner lowered it (the same server's max_payload): the same passes.
      const check = await runCli(["check-log", "--redecide", ...logFlags(server.url, stream, prefix)], {
        timeoutMs: 60_000,
      });
      assert.equal(check.code, 0, `${check.stdout}\n${check.stderr}`);
      const m = /, (\d+) passes re-decided \((\d+) the same\): every invariant holds/.exec(check.stdout);
      assert.ok(m, check.stdout);
      assert.ok(Number(m[1]) >= passes.length);
      assert.equal(m[2], m[1]);
    } finally {
      await killAll([rec]);
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
    }
  });
});
