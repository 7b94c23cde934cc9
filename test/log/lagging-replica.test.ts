/**
 * A read of the whole log while one replica of the stream lags. A reader's
 * consumer may be placed on any replica, and one placed on the lagging
 * replica sees a stream that ends early: the read must still return every
 * event up to the end the stream leader reported, not stop where the
 * lagging replica's copy ends.
 *
 * The replica is held behind for the whole read, not merely restarted (a
 * restarted replica is current again within a second, before any reader is
 * placed): the cluster's routes go through proxies, and the stream's raft
 * traffic to and from one member is dropped while it stays a cluster member
 * that hosts consumers and serves its copy. The test checks that readers
 * were in fact placed on it and met its short copy while it lagged.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import type { ConsumerInfo } from "@nats-io/jetstream";
import { EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { type Log, openLog } from "../../src/log/index.js";
import { type NatsCluster, startCluster, uniqueStream } from "../harness/nats.js";
import { eventually } from "../support/eventually.js";

describe("reading while a replica lags", () => {
  let cluster: NatsCluster;
  before(async () => {
    cluster = await startCluster(3, { routeProxies: true });
    await cluster.waitForMetaLeader();
  });
  after(async () => {
    await cluster?.close();
  });

  it("returns every event up to the stream's end from readers placed on the lagging replica", async (t) => {
    const stream = uniqueStream("LAG");
    let setup: Log | undefined;
    let log: Log | undefined;
    let hold: { release(): void; dropped(): number } | undefined;
    try {
      setup = await openLog({ url: cluster.url, clientName: "lag-setup", name: stream, replicas: 3 });
      const info = await setup.jsm.streams.info(stream);
      const leader = cluster.servers.find((s) => s.name === info.cluster?.leader);
      const group = (info.cluster as { raft_group?: string } | undefined)?.raft_group;
      assert.ok(
        leader && group,
        `stream ${stream} has a leader and a raft group: ${JSON.stringify(info.cluster)}`,
      );
      const lagging = cluster.servers.find((s) => s !== leader)!;
      // The readers talk to the stream leader: the held member, without a
      // leader of its own for the stream, also answers stream info from its
      // copy (the reader refuses such an answer and asks again; here the
      // leader's answer, local to the reader's server, comes first).
      log = await openLog({ url: leader.url, clientName: "lag-test", name: stream, replicas: 3 });

      const lagAt = 1_000;
      const n = 6_000;
      // What the log acknowledged: the reads must return exactly that.
      const acked: Array<{ seq: number; subject: string }> = [];
      const append = async (from: number, to: number) => {
        const appends: Array<Promise<unknown>> = [];
        for (let i = from; i < to; i++) {
          const gatewayId = `gw-${i % 7}`;
          appends.push(
            log!.appender
              .append(
                create(EventSchema, {
                  id: `lag-${i}`,
                  body: { case: "gatewayStarted", value: { gatewayId } },
                }),
              )
              .then((a) => acked.push({ seq: a.seq, subject: log!.subjects.gateway(gatewayId) })),
          );
          if (appends.length >= 512) await Promise.all(appends.splice(0));
        }
        await Promise.all(appends);
      };
      await append(0, lagAt);
      await cluster.waitCurrent();
      hold = cluster.holdRaftGroup(lagging.name, group);
      await append(lagAt, n);
      // The leader says the held member is behind once it has noticed: the
      // readers are opened after that, not at a guessed moment.
      let held: { current?: boolean } | undefined;
      await eventually(
        async () => {
          held = (await log!.jsm.streams.info(stream)).cluster?.replicas?.find(
            (r) => r.name === lagging.name,
          );
          return held !== undefined && !held.current;
        },
        {
          what: `the hold to put ${lagging.name} behind, as the stream leader reports it`,
          timeoutMs: 20_000,
          everyMs: 250,
        },
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}; last report: ${JSON.stringify(held)}`);
      });

      // A time half-way through, as the leader has it (a message get is answered by the leader).
      const midMs = (await log.jsm.streams.getMessage(stream, { seq: n / 2 }))!.time.getTime();
      // Readers opened while the replica lags; their consumers are placed on
      // a replica at random (a third or so on the lagging one, and a reader
      // that gives one up is placed anew). A third read everything, a third
      // one gateway's subject (the end of a filtered read is found another
      // way), a third from a time (a replica behind places a time at its own end).
      const subject = log.subjects.gateway("gw-3");
      const kinds = ["all", "subject", "time"] as const;
      const results = await Promise.all(
        Array.from({ length: 24 }, async (_, k) => {
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

      // Where the readers were placed, while the replica still lags: every
      // consumer they opened is still there (ordered consumers outlive their
      // read by minutes), each with its host's view of the stream.
      const consumers: ConsumerInfo[] = [];
      for await (const c of log.jsm.consumers.list(stream)) consumers.push(c);
      const onLagging = consumers.filter((c) => c.cluster?.leader === lagging.name);
      const hosts = consumers.map((c) => c.cluster?.leader ?? "?").join(", ");
      assert.ok(
        onLagging.length > 0,
        `no reader was placed on the lagging ${lagging.name} (hosts: ${hosts})`,
      );
      // Offered a copy that ends early: delivered plus pending is where the
      // host's copy ends for an unfiltered read. A reader may have given its
      // consumer up before the first message came (it compares the
      // consumer's end with the leader's at once), so nothing delivered is
      // still a reader that met the short copy.
      const servedBehind = onLagging.filter(
        (c) =>
          !c.config.filter_subject &&
          (c.config.filter_subjects ?? []).length === 0 &&
          c.delivered.stream_seq + c.num_pending < n,
      );
      assert.ok(
        servedBehind.length > 0,
        `no unfiltered reader on ${lagging.name} met its lagging copy: ${JSON.stringify(onLagging.map((c) => ({ delivered: c.delivered.stream_seq, pending: c.num_pending, filter: c.config.filter_subjects })))}`,
      );
      assert.ok(hold.dropped() > 0, "the hold dropped none of the stream's raft traffic");
      t.diagnostic(
        `${onLagging.length} of ${consumers.length} readers on ${lagging.name}; its copy ended at ${Math.max(...servedBehind.map((c) => c.delivered.stream_seq + c.num_pending))} of ${n}`,
      );

      // What each kind must return: every acknowledged event, those on the
      // gateway's subject, and (times as the leader stored them, from a read
      // once every replica is current) those at or after the time.
      acked.sort((a, b) => a.seq - b.seq);
      const expectedOf = {
        all: acked.map((a) => a.seq),
        subject: acked.filter((a) => a.subject === subject).map((a) => a.seq),
      };
      assert.equal(acked.length, n);
      for (const r of results.filter((x) => x.kind !== "time")) {
        const want = expectedOf[r.kind as keyof typeof expectedOf];
        assert.deepEqual(
          r.seqs,
          want,
          `a read of ${r.kind} returned ${r.seqs.length} events, not ${want.length}`,
        );
      }
      hold.release();
      await cluster.waitCurrent();
      const every: Array<{ seq: number; timeMs: number }> = [];
      for await (const r of log.read({})) every.push({ seq: r.seq, timeMs: r.timeMs });
      assert.deepEqual(
        every.map((r) => r.seq),
        expectedOf.all,
        "a read once every replica is current returns every acknowledged event",
      );
      const fromTime = every.filter((r) => r.timeMs >= midMs).map((r) => r.seq);
      assert.ok(fromTime.includes(n / 2) && fromTime.length < n, "the time does not split the log");
      for (const r of results.filter((x) => x.kind === "time")) {
        assert.deepEqual(
          r.seqs,
          fromTime,
          `a read from a time returned ${r.seqs.length} events, not ${fromTime.length}`,
        );
        assert.ok(
          r.times.every((tm) => tm >= midMs),
          "a read from a time returned an event from before it",
        );
      }
    } finally {
      hold?.release();
      await log?.jsm.streams.delete(stream).catch(() => {});
      await log?.close();
      await setup?.close();
    }
  });
});
