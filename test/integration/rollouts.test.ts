// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * Rollouts through every real part: nats-server, a gateway, a `llmgw
 * reconciler` process, the operator API and a simulated fleet over
 * Connect. A catalog change of the engine arguments rolls 8 replicas
 * make-before-break (checked over the real log by the check-log invariant
 * `rollout-below-ready` and by folding it); a spec whose engine fails to
 * start stalls after its first new replica with the 8 old ones serving,
 * and undo restores the old spec.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Log, LogRecord } from "../../src/log/index.js";
import { evolveFleet, initialFleet, readyCounts } from "../../src/projections/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { eventually } from "../support/eventually.js";
import { readAll } from "../support/gateway.js";
import { assertLogInvariants } from "../support/invariants.js";
import { startStack, withConnectedFleet } from "../support/stack.js";

const MODEL = "qwen-2.5-7b";
const catalog = (args: string[]) => ({
  models: [
    {
      name: MODEL,
      replicas: 8,
      profiles: [
        { name: "tp1", gpusPerShard: 1, memoryPerGpu: "20GiB", gpuProduct: "H100", engineArgs: args },
      ],
      rollout: { maxSurge: 1, maxUnavailable: 0, progressDeadline: "2m" },
    },
  ],
});
const V1 = ["--max-model-len=8192"];
const V2 = ["--max-model-len=16384"];
/** The simulator fails every start with this argument (`fail@arg=--broken`). */
const BROKEN = ["--max-model-len=16384", "--broken"];

const RECONCILER_CONFIG = {
  commandTimeoutMs: 5000,
  suspectAfterMs: 10_000,
  lostAfterMs: 20_000,
  drainDeadlineMs: 30_000,
};

interface Stack {
  log: Log;
  call(method: string, path: string, body?: unknown): Promise<any>;
  why(): Promise<string>;
}

const decisionsOf = (records: LogRecord[]) =>
  records.flatMap((r) =>
    r.event.body.case === "reconcilePass"
      ? r.event.body.value.decisions.map((d) => ({ seq: r.seq, d: d.kind, text: d.explanation }))
      : [],
  );

describe("rollouts through the real stack", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  async function withStack(name: string, fn: (s: Stack) => Promise<void>): Promise<void> {
    const stack = await startStack(server.url, {
      name,
      reconciler: RECONCILER_CONFIG,
    });
    const why = async () => {
      const ro = await stack.call("GET", `/v1/rollouts/${MODEL}`).catch(() => ({}));
      return `\nrollout: ${JSON.stringify(ro.rollout)}${await stack.why()}`;
    };
    try {
      const fleet = { nodes: 2, gpusPerNode: 8, seed: 7, drainMs: 200, faults: ["fail@arg=--broken"] };
      await withConnectedFleet(stack, fleet, () => fn({ log: stack.log, call: stack.call, why }));
    } finally {
      await stack.close();
    }
  }

  const rolloutOf = async (s: Stack) => (await s.call("GET", `/v1/rollouts/${MODEL}`)).rollout;

  async function eightReady(s: Stack): Promise<string> {
    await eventually(
      async () => {
        const r = await rolloutOf(s);
        if (!(r.current.ready === 8 && r.outdated.replicas === 0 && r.draining === 0 && !r.active))
          return false;
        // And the routing table restated: 8 endpoints, every one a replica of the current revision.
        const ids = new Set(
          ((await s.call("GET", `/v1/replicas?model=${MODEL}`)).replicas as any[]).map((x) => x.replicaId),
        );
        const table = await s.call("GET", `/v1/endpoints?model=${MODEL}`).catch(() => ({ endpoints: [] }));
        return table.endpoints.length === 8 && table.endpoints.every((e: any) => ids.has(e.replicaId));
      },
      { what: "8 ready replicas on the current revision, all routed to", timeoutMs: 30_000 },
    ).catch(async (err) => {
      throw new Error(`${(err as Error).message}${await s.why()}`);
    });
    return (await rolloutOf(s)).revision;
  }

  it("rolls 8 replicas with maxSurge 1, maxUnavailable 0: never below 8 ready, all on the new revision", async () => {
    await withStack("roll", async (s) => {
      await s.call("PUT", "/v1/catalog", catalog(V1));
      const v1 = await eightReady(s);
      const startSeq = await s.log.lastSeq();
      await s.call("PUT", "/v1/catalog", catalog(V2));
      const v2 = await eightReady(s);
      assert.notEqual(v2, v1, "new engine arguments are a new revision");
      const replicas = (await s.call("GET", `/v1/replicas?model=${MODEL}`)).replicas as any[];
      assert.equal(replicas.length, 8);
      const profileRev = (await s.call("GET", "/v1/catalog/history")).history.at(-1).models[0].revision;
      assert.equal(profileRev, v2);
      assert.ok(replicas.every((r) => r.ready && r.revision !== ""));
      assert.equal(new Set(replicas.map((r) => r.revision)).size, 1, "one revision left");

      // The check-log invariants over the real log, rollout-below-ready among them.
      await assertLogInvariants(s.log, { what: "an 8-replica rollout", redecide: RECONCILER_CONFIG });
      // And by folding: from the rollout's start to its end, no state holds fewer than 8 ready.
      const records = await readAll(s.log);
      let state = initialFleet();
      let low = Number.POSITIVE_INFINITY;
      for (const r of records) {
        state = evolveFleet(state, r.event, { seq: r.seq, timeMs: r.timeMs });
        if (r.seq > startSeq) low = Math.min(low, readyCounts(state.replicas)[MODEL]?.ready ?? 0);
      }
      assert.equal(low, 8, "ready never dropped below 8 during the rollout");
      const ds = decisionsOf(records).filter((x) => x.seq > startSeq);
      assert.equal(ds.filter((x) => x.d.case === "rolloutStarted").length, 1);
      assert.equal(ds.filter((x) => x.d.case === "rolloutCompleted").length, 1);
      assert.equal(
        ds.filter((x) => x.d.case === "replicaDrainStarted").length,
        8,
        "each old replica drained once",
      );
      assert.equal(ds.filter((x) => x.d.case === "rolloutStalled").length, 0);
    });
  });

  it("a spec that fails to start stalls after its first new replica, the 8 old ones serve; undo restores the old spec", async () => {
    await withStack("stall", async (s) => {
      await s.call("PUT", "/v1/catalog", catalog(V1));
      const v1 = await eightReady(s);
      const startSeq = await s.log.lastSeq();
      await s.call("PUT", "/v1/catalog", catalog(BROKEN));
      await eventually(async () => (await rolloutOf(s)).stalled !== null, {
        what: "the rollout stalled",
        timeoutMs: 30_000,
      }).catch(async (err) => {
        throw new Error(`${(err as Error).message}${await s.why()}`);
      });
      const stalled = await rolloutOf(s);
      assert.match(stalled.stalled.reason, /failed/);
      assert.equal(stalled.outdated.ready, 8, "the 8 old replicas keep serving");
      assert.equal(stalled.ready, 8);
      const newId = stalled.stalled.replicaId;
      // The stall is explained on the new replica, and in the log.
      const ex = await s.call("GET", `/v1/replicas/${newId}/explain`);
      assert.ok(
        ex.decisions.some((d: any) => d.kind === "rolloutStalled" && /stalled/.test(d.text)),
        `explain of ${newId} names the stall: ${JSON.stringify(ex.decisions.map((d: any) => d.kind))}`,
      );
      // It stays stalled: give the reconciler a few more failed retries' worth of passes.
      await eventually(
        async () =>
          decisionsOf(await readAll(s.log)).filter(
            (x) => x.seq > startSeq && x.d.case === "replicaFailed" && x.d.value.replicaId === newId,
          ).length >= 1,
        { what: `${newId} failed`, timeoutMs: 30_000 },
      );
      let records = await readAll(s.log);
      let ds = decisionsOf(records).filter((x) => x.seq > startSeq);
      const created = ds.filter((x) => x.d.case === "replicaCreated");
      assert.equal(created.length, 1, "only the first new replica was created");
      assert.equal(ds.filter((x) => x.d.case === "replicaDrainStarted").length, 0, "no old replica left");
      assert.equal(
        ds.filter((x) => x.d.case === "endpointsChanged").length,
        0,
        "the routing table never changed",
      );
      assert.equal((await s.call("GET", `/v1/endpoints?model=${MODEL}`)).endpoints.length, 8);

      const undone = await s.call("POST", `/v1/rollouts/${MODEL}/undo`, {});
      assert.equal(undone.revision, v1);
      const back = await eightReady(s);
      assert.equal(back, v1);
      const catalogNow = await s.call("GET", "/v1/catalog");
      assert.deepEqual(catalogNow.catalog.models[0].profiles[0].engineArgs, V1);

      await assertLogInvariants(s.log, {
        what: "a stalled rollout and its undo",
        redecide: RECONCILER_CONFIG,
      });
      records = await readAll(s.log);
      ds = decisionsOf(records).filter((x) => x.seq > startSeq);
      assert.equal(
        ds.filter((x) => x.d.case === "replicaDrainStarted" && x.d.value.replicaId !== newId).length,
        0,
      );
      assert.ok(ds.some((x) => x.d.case === "rolloutStalled"));
      assert.ok(ds.some((x) => x.d.case === "rolloutCompleted"));
      assert.equal(
        (await s.call("GET", `/v1/replicas?model=${MODEL}`)).replicas.filter(
          (r: any) => r.replicaId === newId,
        ).length,
        0,
        "the failed new replica is gone",
      );
    });
  });
});
