/**
 * Regression: a following read whose consumer lives on a cluster member
 * that dies must go on. The client library asked the dead host for the
 * consumer's info forever (a timeout, never "not found"), so a gateway's
 * command relay or a reconciler's projection stopped without an error. The
 * reader now ends on missed heartbeats and the follower reopens it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pino } from "pino";
import { follow } from "../../src/gateway/follow.js";
import { type Log, type LogRecord, openLog } from "../../src/log/index.js";
import { startCluster, uniqueStream } from "../harness/nats.js";
import { eventually } from "../support/eventually.js";
import { EventFactory } from "../support/fleet-events.js";

describe("following the log on a 3-node cluster", () => {
  it("goes on after the member hosting its consumer is killed", async () => {
    const cluster = await startCluster(3);
    const logs: Log[] = [];
    const ac = new AbortController();
    try {
      await cluster.waitForMetaLeader();
      const stream = uniqueStream("FOLLOW");
      const [reader, writerServer] = [cluster.servers[0]!, cluster.servers[1]!];
      const open = async (url: string, name: string) => {
        let log: Log | undefined;
        await eventually(
          async () => {
            log = await openLog({ url, clientName: name, name: stream, prefix: "f.evt", replicas: 3 });
            return true;
          },
          { what: "the R3 stream", everyMs: 500, timeoutMs: 60_000 },
        );
        logs.push(log!);
        return log!;
      };
      // The reader is connected to one member only, so losing another is silent for it.
      const readLog = await open(reader.url, "reader");
      const writeLog = await open(cluster.url, "writer");
      const f = new EventFactory("follow");
      await writeLog.append(f.cordon("gpu-1"));

      const seen: LogRecord[] = [];
      let opened = 0;
      const following = follow(readLog, {
        subjects: [`${readLog.subjects.prefix}.operator.>`],
        fromSeq: 1,
        signal: ac.signal,
        logger: pino({ level: "silent" }),
        onOpen: () => opened++,
        onRecord: (r) => seen.push(r),
      });
      await eventually(() => seen.length === 1, { what: "the first event" });

      // Find the member hosting the reader's consumer; while it is the reader's
      // own server, move the reader to a fresh consumer (placement is per consumer).
      let host: string | undefined;
      await eventually(
        async () => {
          host = undefined;
          for await (const ci of writeLog.jsm.consumers.list(stream)) host = ci.cluster?.leader;
          if (host === reader.name) {
            // A cordon makes the reader's consumer busy, not new; restart the follower's read instead.
            await writeLog.jsm.consumers.delete(stream, (await firstConsumer(writeLog, stream))!);
            return false;
          }
          return host !== undefined;
        },
        { what: "the reader's consumer on another member", timeoutMs: 30_000, everyMs: 500 },
      );
      const victim = cluster.servers.find((s) => s.name === host)!;
      const writeVia = victim === writerServer ? cluster.servers[2]! : writerServer;
      await victim.kill();
      const after = await open(writeVia.url, "writer-2");
      await eventually(
        async () => {
          await after.append(f.cordon("gpu-2"), { timeoutMs: 2_000 });
          return true;
        },
        { what: "an append after the kill", everyMs: 500 },
      );
      await eventually(() => seen.some((r) => r.event.body.case === "nodeCordoned" && r.seq > 1), {
        what: `the follower to see the event appended after ${victim.name} died`,
        timeoutMs: 45_000,
      });
      assert.ok(opened >= 2, "the read was reopened");
      assert.deepEqual(
        seen.map((r) => r.seq),
        [...new Set(seen.map((r) => r.seq))],
        "nothing handled twice",
      );
      ac.abort();
      await following;
    } finally {
      ac.abort();
      await Promise.all(logs.map((l) => l.close()));
      await cluster.close();
    }
  });
});

async function firstConsumer(log: Log, stream: string): Promise<string | undefined> {
  for await (const ci of log.jsm.consumers.list(stream)) return ci.name;
  return undefined;
}
