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
      await follower.restart();
      // Readers opened while the restarted replica catches up; some of their
      // consumers may be placed on it. Half read everything, half one
      // gateway's subject (the end of a filtered read is found another way).
      const subject = log.subjects.gateway("gw-3");
      const wanted = Array.from({ length: n }, (_, i) => i).filter((i) => i % 7 === 3);
      const results = await Promise.all(
        Array.from({ length: 12 }, async (_, k) => {
          const filtered = k % 2 === 1;
          let count = 0;
          let last = 0;
          for await (const r of log!.read(filtered ? { subjects: [subject] } : {})) {
            count++;
            last = r.seq;
          }
          return { filtered, count, last };
        }),
      );
      for (const r of results) {
        if (r.filtered)
          assert.deepEqual(r, { filtered: true, count: wanted.length, last: wanted.at(-1)! + 1 });
        else assert.deepEqual(r, { filtered: false, count: n, last: n });
      }
    } finally {
      await log?.jsm.streams.delete(stream).catch(() => {});
      await log?.close();
    }
  });
});
