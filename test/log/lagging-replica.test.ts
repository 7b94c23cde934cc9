/**
 * A read of the whole log while one replica of the stream is still catching
 * up (restarted after missing writes). A reader's consumer may be placed on
 * that replica, whose view of the stream ends early: the read must still
 * return every event up to the end the stream leader reported, not stop
 * where the lagging replica's view ends.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { type Log, openLog } from "../../src/log/index.js";
import { type NatsCluster, startCluster, uniqueStream } from "../harness/nats.js";

describe("reading while a replica lags", () => {
  let cluster: NatsCluster;
  before(async () => {
    cluster = await startCluster(3);
    await cluster.waitForMetaLeader();
  });
  after(async () => {
    await cluster?.close();
  });

  it("returns every event up to the stream's end, whichever replica hosts the reader", async () => {
    const stream = uniqueStream("LAG");
    let log: Log | undefined;
    try {
      log = await openLog({ url: cluster.url, clientName: "lag-test", name: stream, replicas: 3 });
      const info = await log.jsm.streams.info(stream);
      // A follower, and not the server this client is connected to (its publishes would wait for a reconnect).
      const connectedTo = log.nc.info?.server_name;
      const follower = cluster.servers.find(
        (s) => s.name !== info.cluster?.leader && s.name !== connectedTo,
      )!;
      await follower.kill();
      const n = 20_000;
      const appends: Array<Promise<unknown>> = [];
      for (let i = 0; i < n; i++) {
        appends.push(
          log.appender.append(
            create(EventSchema, {
              id: `lag-${i}`,
              body: { case: "gatewayStarted", value: { gatewayId: `gw-${i % 7}` } },
            }),
          ),
        );
        if (appends.length >= 512) await Promise.all(appends.splice(0));
      }
      await Promise.all(appends);
      // A time half-way through, as the leader has it (a message get is answered by the leader).
      const midMs = (await log.jsm.streams.getMessage(stream, { seq: n / 2 }))!.time.getTime();
      await follower.restart();
      // Readers opened while the restarted replica catches up; some of their
      // consumers may be placed on it. A third read everything, a third one
      // gateway's subject (the end of a filtered read is found another way),
      // a third from a time (a replica behind places a time at its own end).
      const subject = log.subjects.gateway("gw-3");
      const kinds = ["all", "subject", "time"] as const;
      const results = await Promise.all(
        Array.from({ length: 12 }, async (_, k) => {
          const kind = kinds[k % 3]!;
          const opts =
            kind === "subject" ? { subjects: [subject] } : kind === "time" ? { fromTimeMs: midMs } : {};
          const seqs: number[] = [];
          const times: number[] = [];
          for await (const r of log!.read(opts)) {
            seqs.push(r.seq);
            times.push(r.timeMs);
          }
          return { kind, seqs, times };
        }),
      );
      // What each kind must return, from a read once every replica is current.
      await cluster.waitCurrent();
      const every: Array<{ seq: number; timeMs: number; subject: string }> = [];
      for await (const r of log.read({})) every.push({ seq: r.seq, timeMs: r.timeMs, subject: r.subject });
      assert.equal(every.length, n);
      const expected = {
        all: every.map((r) => r.seq),
        subject: every.filter((r) => r.subject === subject).map((r) => r.seq),
        time: every.filter((r) => r.timeMs >= midMs).map((r) => r.seq),
      };
      assert.ok(expected.time.includes(n / 2) && expected.time.length < n, "the time splits the log");
      for (const r of results) {
        assert.deepEqual(r.seqs, expected[r.kind], `a read of ${r.kind} returned ${r.seqs.length} events`);
        assert.ok(r.times.every((t) => t >= (r.kind === "time" ? midMs : 0)));
      }
    } finally {
      await log?.jsm.streams.delete(stream).catch(() => {});
      await log?.close();
    }
  });
});
