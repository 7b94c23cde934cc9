import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { AckPolicy } from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
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

/**
 * How many events the copy of `stream` on `member` holds: a consumer of
 * the whole stream placed on that member (placement is at random among the
 * stream's replicas: tried until one lands there) counts its own copy.
 * Asked again until it holds `want` or 20 s pass (a replica reported
 * current may still be writing what it caught up on).
 */
async function copyOn(log: Log, stream: string, member: string, want: number): Promise<number> {
  const deadline = Date.now() + 20_000;
  let held = -1;
  let tries = 0;
  while (Date.now() < deadline) {
    const ci = await log.jsm.consumers.add(stream, {
      ack_policy: AckPolicy.None,
      mem_storage: true,
      num_replicas: 1,
      inactive_threshold: nanos(30_000),
    });
    await log.jsm.consumers.delete(stream, ci.name).catch(() => {});
    tries++;
    if (ci.cluster?.leader !== member) continue;
    held = ci.num_pending;
    if (held === want) return held;
    await new Promise((r) => setTimeout(r, 200));
  }
  if (held < 0) throw new Error(`no consumer of ${stream} was placed on ${member} in ${tries} tries`);
  return held;
}

describe("3-node JetStream cluster", () => {
  it("loses no acknowledged event when one server is killed, and the server catches up when it comes back", async () => {
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

      // The killed server, which missed the 200 events above, comes back and
      // catches up: its stream leader reports it current, and its own copy
      // holds every acknowledged event. Nothing restarts it again: on
      // nats-server 2.15 a replica that does not catch up fails here
      // (docs/RELIABILITY.md, "nats-server version").
      await victim.restart();
      await cluster.waitForMetaLeader();
      await cluster.waitCurrent({ timeoutMs: 45_000 });
      const back = (await log.jsm.streams.info(stream)).cluster?.replicas?.find(
        (r) => r.name === victim.name,
      );
      assert.ok(
        back?.current,
        `${victim.name} is not a current replica of ${stream} again: ${JSON.stringify(back)}`,
      );
      const held = await copyOn(log, stream, victim.name, acked.size);
      assert.equal(
        held,
        acked.size,
        `${victim.name}'s own copy of ${stream} holds ${held} of ${acked.size} events`,
      );
    } finally {
      await log?.close();
      await cluster.close();
    }
  });
});
