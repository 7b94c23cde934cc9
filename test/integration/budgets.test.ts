// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * Disruption budgets and scaling with every real part: nats-server, a
 * gateway, a `llmgw reconciler` process, the operator API, the `llmgw` CLI
 * and a simulated fleet over Connect. A node drain that would take a model
 * below its minAvailable waits and says why (in the log, the API and
 * `llmgw drain --status`), and proceeds once a replacement is ready; `llmgw
 * scale` grows and shrinks a model, and every replica scaled down leaves the
 * routing table no later than the pass that sends its drain.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import type { LogRecord } from "../../src/log/index.js";
import { evolveFleet, initialFleet, readyCounts } from "../../src/projections/index.js";
import type { SimFleet } from "../../src/sim/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { readAll } from "../support/gateway.js";
import { passViolations } from "../support/pass-invariants.js";
import { h100Profile, stackFleet, startStack } from "../support/stack.js";

const MODEL = "llama-3.3-70b";
/** One replica fills a 4-GPU node. */
const catalogWith = (replicas: number) => ({
  models: [
    {
      name: MODEL,
      replicas,
      minAvailable: "100%",
      profiles: [h100Profile("tp4", 4)],
    },
  ],
});

const decisionsOf = (records: LogRecord[]) =>
  records.flatMap((r) =>
    r.event.body.case === "reconcilePass"
      ? r.event.body.value.decisions.map((d) => ({ seq: r.seq, d: d.kind, text: d.explanation }))
      : [],
  );

describe("disruption budgets and scaling, end to end", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("a drain blocked by minAvailable waits and explains, proceeds once the replacement is ready; scale up and down", async () => {
    const stack = await startStack(server.url, {
      name: "budget",
      reconciler: {
        policy: "spread",
        commandTimeoutMs: 5000,
        suspectAfterMs: 10_000,
        lostAfterMs: 20_000,
        drainDeadlineMs: 120_000,
      },
    });
    const { log, call, api } = stack;
    let fleet: SimFleet | undefined;
    const replicas = async (): Promise<any[]> => (await call("GET", "/v1/replicas")).replicas;
    const cli = (...args: string[]) => runCli([...args, "--api", api.url], { timeoutMs: 60_000 });
    const explained = <T>(p: Promise<T>) =>
      p.catch(async (err) => {
        throw new Error(`${(err as Error).message}${await stack.why()}`);
      });
    try {
      fleet = stackFleet(stack.gw.url, { nodes: 3, gpusPerNode: 4, seed: 16 });
      await fleet.start();
      await eventually(
        async () =>
          (await call("GET", "/v1/nodes")).nodes.filter((n: any) => n.liveness === "connected").length === 3,
        { what: "three connected nodes in the API" },
      );
      const [a, b, spare] = ((await call("GET", "/v1/nodes")).nodes as any[]).map((n) => n.nodeId as string);
      assert.ok(a && b && spare);

      // The spare node is cordoned: the two replicas go to a and b, and nothing has room to move.
      await call("POST", `/v1/nodes/${spare}/cordon`, { reason: "held back" });
      await call("PUT", "/v1/catalog", catalogWith(2));
      await explained(
        eventually(
          async () => {
            const rs = await replicas();
            return rs.length === 2 && rs.every((r) => r.phase === "running");
          },
          { what: "two replicas running", timeoutMs: 30_000 },
        ),
      );
      const models = (await call("GET", "/v1/replicas")).models;
      assert.deepEqual(
        models.map((m: any) => [m.model, m.ready, m.desired, m.minAvailable, m.keepsReady]),
        [[MODEL, 2, 2, "100%", 2]],
      );
      const allRunningSeq = await log.lastSeq();
      const old = (await replicas()).find((r) => r.nodeIds.includes(a));
      assert.ok(old, `a replica on ${a}`);

      // Drain a: its replacement cannot be placed; taking the old one would leave 1 < 2 ready.
      const drainOut = await cli("drain", a, "--reason", "kernel upgrade");
      assert.equal(drainOut.code, 0, drainOut.stderr);
      assert.match(
        drainOut.stdout,
        new RegExp(`^${a} draining \\(log sequence \\d+\\)\\n${a} waits on 1 replica`),
      );
      const blocked = await explained(
        (async () => {
          let found: ReturnType<typeof decisionsOf>[number] | undefined;
          await eventually(
            async () => {
              found = decisionsOf(await readAll(log)).find((x) => x.d.case === "disruptionBlocked");
              return found !== undefined;
            },
            { what: "a DisruptionBlocked decision in the log", timeoutMs: 30_000 },
          );
          return found!;
        })(),
      );
      assert.ok(blocked.d.case === "disruptionBlocked");
      assert.equal(blocked.d.value.replicaId, old.replicaId);
      assert.equal(blocked.d.value.nodeId, a);
      assert.equal(blocked.d.value.ready, 2);
      assert.equal(blocked.d.value.minAvailable, 2);
      assert.match(blocked.text, new RegExp(`${MODEL} has 2 ready, minAvailable 2 \\(100% of 2 desired\\)`));

      // The API and `llmgw drain --status` say what the drain waits on.
      const view = (await call("GET", `/v1/nodes/${a}`)).node;
      assert.equal(view.draining, true);
      assert.equal(view.waitingOn.length, 1);
      assert.equal(view.waitingOn[0].replicaId, old.replicaId);
      assert.equal(view.waitingOn[0].blockedByBudget, true);
      assert.equal(view.waitingOn[0].reason, blocked.text);
      const status = await cli("drain", a, "--status");
      assert.equal(status.code, 0, status.stderr);
      assert.ok(status.stdout.includes(`${a} draining`), status.stdout);
      assert.ok(status.stdout.includes("[disruption budget]"), status.stdout);
      assert.ok(status.stdout.includes("minAvailable 2 (100% of 2 desired)"), status.stdout);
      // It keeps serving and routing.
      const table = (await call("GET", `/v1/endpoints?model=${MODEL}`)).endpoints;
      assert.ok(
        table.some((e: any) => e.replicaId === old.replicaId),
        "the old replica still routes",
      );

      // Room appears: the replacement is placed on the spare node, runs, and only then does the old one drain.
      await call("POST", `/v1/nodes/${spare}/uncordon`, {});
      await explained(
        eventually(
          async () => {
            const rs = await replicas();
            return (
              rs.length === 2 &&
              rs.every((r) => r.phase === "running" && !r.nodeIds.includes(a)) &&
              fleet!.node(a)!.shardList().length === 0
            );
          },
          { what: `${a}'s replica moved to ${spare}`, timeoutMs: 30_000 },
        ),
      );
      const records = await readAll(log);
      const decisions = decisionsOf(records);
      const replacement = blocked.d.value.replacementId;
      const placed = decisions.findLast(
        (x) => x.d.case === "replicaPlaced" && x.d.value.replicaId === replacement,
      );
      assert.ok(placed?.d.case === "replicaPlaced");
      const runningAt = Math.max(
        ...placed.d.value.shards.map(
          (s) =>
            records.find(
              (r) =>
                r.event.body.case === "shardStatus" &&
                r.event.body.value.status?.shardId === s.shardId &&
                r.event.body.value.status.state === State.RUNNING,
            )?.seq ?? Number.POSITIVE_INFINITY,
        ),
      );
      const drained = decisions.find(
        (x) => x.d.case === "replicaDrainStarted" && x.d.value.replicaId === old.replicaId,
      );
      assert.ok(drained && drained.seq > runningAt, "the old replica drained after its replacement ran");
      assert.equal(
        decisions.filter((x) => x.d.case === "disruptionBlocked").length,
        1,
        "the wait was recorded once, not every pass",
      );
      // Never fewer ready than minAvailable, from the moment both first ran.
      let state = initialFleet();
      for (const r of records) {
        state = evolveFleet(state, r.event, { seq: r.seq, timeMs: r.timeMs });
        if (r.seq < allRunningSeq) continue;
        const ready = readyCounts(state.replicas)[MODEL]?.ready ?? 0;
        assert.ok(ready >= 2, `${MODEL} had ${ready} ready < minAvailable 2 at seq ${r.seq}`);
      }
      const done = await cli("drain", a, "--status");
      assert.ok(done.stdout.includes(`${a}: nothing left on the node`), done.stdout);

      // Scaling: the API names what is wrong.
      const bad = await fetch(`${api.url}/v1/models/${MODEL}`, {
        method: "PATCH",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ replicas: -1 }),
      });
      assert.equal(bad.status, 400);
      assert.deepEqual(
        ((await bad.json()) as any).error.issues.map((i: any) => i.path),
        ["replicas"],
      );
      const unknown = await cli("scale", "no-such-model", "3");
      assert.equal(unknown.code, 2, "a model not in the catalog is the caller's mistake");
      assert.match(unknown.stderr, /no-such-model is not in the catalog/);

      // Scale up through the CLI: a (uncordoned again) takes the third replica.
      await call("POST", `/v1/nodes/${a}/uncordon`, {});
      const up = await cli("scale", MODEL, "3");
      assert.equal(up.code, 0, up.stderr);
      assert.match(
        up.stdout,
        new RegExp(`^${MODEL} scaled from 2 to 3 replica\\(s\\) \\(catalog at log sequence \\d+\\)`),
      );
      assert.equal(
        (await call("GET", "/v1/catalog")).appliedBy,
        "dev",
        "the operator recorded is the token's name",
      );
      await explained(
        eventually(
          async () => {
            const rs = await replicas();
            return rs.length === 3 && rs.every((r) => r.phase === "running");
          },
          { what: "three replicas running", timeoutMs: 30_000 },
        ),
      );
      const three = (await replicas()).map((r) => r.replicaId as string);

      // Scale down to 1: two replicas leave the routing table, then drain.
      const down = await cli("scale", MODEL, "1");
      assert.equal(down.code, 0, down.stderr);
      await explained(
        eventually(
          async () => {
            const rs = await replicas();
            return rs.length === 1 && rs[0].phase === "running";
          },
          { what: "one replica left", timeoutMs: 30_000 },
        ),
      );
      const kept = (await replicas())[0].replicaId as string;
      const gone = three.filter((id) => id !== kept);
      assert.equal(gone.length, 2);
      const all = await readAll(log);
      let folded = initialFleet();
      for (const r of all) {
        const body = r.event.body;
        const before = folded.replicas.endpoints[MODEL] ?? [];
        folded = evolveFleet(folded, r.event, { seq: r.seq, timeMs: r.timeMs });
        if (body.case !== "reconcilePass") continue;
        for (const c of body.value.commands) {
          if (c.action.case !== "drain" || !gone.includes(c.replicaId)) continue;
          const after = folded.replicas.endpoints[MODEL] ?? [];
          assert.ok(
            !after.some((e) => e.replicaId === c.replicaId),
            `${c.replicaId} is out of the routing table in the pass (seq ${r.seq}) that drains it`,
          );
          const left = body.value.decisions.some(
            (d) =>
              d.kind.case === "endpointsChanged" &&
              !d.kind.value.endpoints.some((e) => e.replicaId === c.replicaId),
          );
          assert.ok(
            left || !before.some((e) => e.replicaId === c.replicaId),
            `the pass at seq ${r.seq} takes ${c.replicaId} out of the table before any gateway relays its drain`,
          );
        }
      }
      const drainedGone = decisionsOf(all).filter(
        (x) => x.d.case === "replicaDrainStarted" && gone.includes(x.d.value.replicaId),
      );
      assert.equal(drainedGone.length, 2);
      for (const x of drainedGone)
        assert.ok(x.d.case === "replicaDrainStarted" && /scaled down to 1/.test(x.d.value.reason));
      assert.deepEqual(passViolations(all), []);
      // Every pass is what decide makes again (check-log --redecide).
      await stack.assertRedecided("a blocked drain and scaling");
    } finally {
      await fleet?.stop();
      await stack.close();
    }
  });
});
