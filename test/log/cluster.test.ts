import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { EventSchema, Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import { isLogError, type Log, openLog } from "../../src/log/index.js";
import { startCluster, uniqueStream } from "../harness/nats.js";

function event(i: number) {
  return create(EventSchema, {
    id: `c-${i}`,
    timeUnixMs: BigInt(Date.now()),
    writer: { kind: Writer_Kind.TOOL, id: "cluster-test" },
    body: { case: "nodeCordoned", value: { nodeId: `gpu-${i % 16}`, reason: `r${i}`, operator: "t" } },
  });
}

/** Appends until acked, retrying the same event (same id) while the cluster elects. */
async function appendAcked(log: Log, i: number): Promise<number> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      return (await log.append(event(i), { timeoutMs: 2000 })).seq;
    } catch (err) {
      if (!isLogError(err, "unavailable", "internal") || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe("3-node JetStream cluster", () => {
  it("loses no acknowledged event when one server is killed", async (t) => {
    const cluster = await startCluster(3);
    let log: Log | undefined;
    try {
      await cluster.waitForMetaLeader();
      const stream = uniqueStream("CL");
      log = await openLog({ url: cluster.url, clientName: "cluster-test", name: stream, replicas: 3 });
      const acked = new Map<string, number>();
      for (let i = 0; i < 200; i++) acked.set(`c-${i}`, await appendAcked(log, i));

      // Kill the stream's leader: the worst server to lose.
      const info = await log.jsm.streams.info(stream);
      const leaderName = info.cluster?.leader;
      const victim = cluster.servers.find((s) => s.name === leaderName) ?? cluster.servers[0]!;
      await victim.kill();

      for (let i = 200; i < 400; i++) acked.set(`c-${i}`, await appendAcked(log, i));

      // Read back through the survivors: every acked event once, in ack order.
      const seen = new Map<string, number>();
      for await (const r of log.read()) {
        assert.ok(!seen.has(r.event.id), `event ${r.event.id} stored twice`);
        seen.set(r.event.id, r.seq);
      }
      for (const [id, seq] of acked) assert.equal(seen.get(id), seq, `acked event ${id} missing or moved`);
      assert.equal(seen.size, acked.size);

      // The killed server comes back and catches up. A healthy replica is
      // current in 1–7 s; about one restart in twenty after SIGKILL never
      // catches up on nats-server 2.10 (docs/RELIABILITY.md), and the harness
      // restarts it once more after 20 s. That rescue is reported, so the
      // scenario's outcome is visible in every run.
      await victim.restart();
      await cluster.waitForMetaLeader();
      const rescued = await cluster.waitCurrent({ timeoutMs: 45_000 });
      if (rescued.length > 0)
        t.diagnostic(`did not catch up by itself; restarted again (nats-server 2.10): ${rescued.join(", ")}`);
      const back = (await log.jsm.streams.info(stream)).cluster?.replicas?.find(
        (r) => r.name === victim.name,
      );
      assert.ok(
        back?.current,
        `${victim.name} is a current replica of ${stream} again: ${JSON.stringify(back)}`,
      );
    } finally {
      await log?.close();
      await cluster.close();
    }
  });
});
