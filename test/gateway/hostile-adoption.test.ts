/**
 * A shard on a GPU the node does not list, through every real part: the
 * gateway records the registration as sent, and the `llmgw reconciler`
 * process never adopts the shard: it is stopped as unclaimed, and the
 * replica it claimed to be is placed on GPUs the node has.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type ReceivedCommand, TestAgent } from "../support/agent.js";
import { eventually } from "../support/eventually.js";
import { EventFactory, h100Node, llamaCatalog } from "../support/fleet-events.js";
import { rand, readAll } from "../support/gateway.js";
import { assertLogHygiene } from "../support/log-hygiene.js";
import { passesOf, passViolations } from "../support/pass-invariants.js";
import { killAll, type ReconcilerProcess, spawnReconciler } from "../support/reconciler.js";
import { gatewaySuite } from "../support/suites.js";

describe("hostile agent end to end: a shard on a GPU the node does not have", () => {
  const gatewaysBucket = `gwl_${rand()}`;
  const env = gatewaySuite("GWADOPT", { gateway: () => ({ leaseBucket: gatewaysBucket }) });
  let rec: ReconcilerProcess | undefined;

  before(async () => {
    rec = await spawnReconciler({
      id: "rec-hostile",
      nats: env.server.url,
      stream: env.stream,
      prefix: env.prefix,
      leaseBucket: `rl_${rand()}`,
      gatewaysBucket,
    });
  });
  after(async () => {
    await killAll([rec]);
  });

  it("is recorded as sent, stopped as unclaimed, and its replica placed on GPUs the node lists", async () => {
    await env.log.append(new EventFactory(`adopt-${rand()}`).catalog(llamaCatalog(1, 0)));
    const reg = h100Node("gpu-x1", {
      running: [
        { shard: "old-s0", replica: "old-r", model: "llama-3.3-70b", profile: "tp4", gpus: [4, 5, 6, 7] },
      ],
    });
    reg.gpus = reg.gpus?.slice(0, 7); // GPU 7 fell off the bus under the running engine
    const agent = await TestAgent.connect({ baseUrl: env.gw.url, registration: reg, autoAnswer: true });
    const beat = setInterval(() => {
      if (!agent.done) agent.heartbeat({});
    }, 500);
    try {
      const stop = await agent.waitFor((m) => m.msg.case === "stop", {
        what: "a StopShard",
        timeoutMs: 30_000,
      });
      assert.ok(stop.msg.case === "stop");
      assert.equal(stop.msg.value.shardId, "old-s0");
      await eventually(async () => agent.commands().some((c: ReceivedCommand) => c.case === "start"), {
        what: `the replica placed on the node's listed GPUs:\n${rec?.output()}`,
      });
      const start = agent.commands().find((c: ReceivedCommand) => c.case === "start");
      assert.ok(start?.case === "start");
      assert.ok(
        start.value.gpuIndices.every((i) => i < 7),
        `placed on ${start.value.gpuIndices.join(",")}`,
      );
    } finally {
      clearInterval(beat);
      agent.abort();
    }
    const records = await readAll(env.log);
    const decisions = passesOf(records).flatMap((p) => p.pass.decisions);
    const unclaimed = decisions.find((d) => d.kind.case === "shardUnclaimed");
    assert.ok(unclaimed?.kind.case === "shardUnclaimed");
    assert.equal(unclaimed.kind.value.reason, "GPU 7 is not on the node");
    const adopted = decisions.filter((d) => d.kind.case === "shardsAdopted");
    assert.ok(adopted.every((d) => d.kind.case === "shardsAdopted" && d.kind.value.shards.length === 0));
    assert.deepEqual(passViolations(records), []);
    assertLogHygiene(records, env.prefix, (n) => n === "gpu-x1");
  });
});
