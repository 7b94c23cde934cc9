/**
 * Fencing after the expected message left the stream (archived and
 * purged): `Log.append` with `expectLastSubjectSeq` still refuses an
 * append when someone else appended to the subject since, and accepts it
 * when nobody did. Real nats-server.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { newEvent } from "../../src/codec/index.js";
import { isLogError, type Log, openLog } from "../../src/log/index.js";
import { startServer, uniqueStream } from "../harness/nats.js";

describe("fencing after a purge", () => {
  let server: Awaited<ReturnType<typeof startServer>>;
  let log: Log;
  before(async () => {
    server = await startServer();
    log = await openLog({
      url: server.url,
      clientName: "test",
      name: uniqueStream("FENCE"),
      prefix: "fence.evt",
    });
  });
  after(async () => {
    await log?.close();
    await server?.close();
  });

  const catalog = (id: string) =>
    newEvent({ id, body: { case: "catalogChanged", value: { appliedBy: id } } });

  it("refuses a stale writer and accepts the current one once the expected message is gone", async () => {
    const first = await log.append(catalog("c1"));
    await log.append(newEvent({ id: "o1", body: { case: "nodeCordoned", value: { nodeId: "gpu-1" } } }));
    await log.jsm.streams.purge(log.stream, { seq: first.seq + 2 });
    assert.equal(await log.lastSubjectSeq(log.subjects.catalog), 0);

    // Nobody appended to the catalog since c1: the writer that saw c1 goes on.
    const second = await log.append(catalog("c2"), { expectLastSubjectSeq: first.seq });
    assert.ok(second.seq > first.seq);

    // A writer that still expects c1 is stale now (c2 is in the stream): refused.
    await log.jsm.streams.purge(log.stream, { seq: second.seq });
    await assert.rejects(log.append(catalog("c3"), { expectLastSubjectSeq: first.seq }), (err) =>
      isLogError(err, "wrong-last-sequence"),
    );
    // And one expecting c2 (still in the stream) goes on as ever.
    await log.append(catalog("c4"), { expectLastSubjectSeq: second.seq });
  });
});
