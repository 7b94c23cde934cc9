// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * Draining a node, driven through the operator API and observed through to
 * its replicas moving, with every real part: nats-server, a gateway, a
 * `llmgw reconciler` process, the operator API, and a simulated fleet over
 * Connect. The log is then read back to check that the move was
 * make-before-break: no model ever had fewer serving replicas than it wants.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import type { LogRecord } from "../../src/log/index.js";
import { evolveFleet, type FleetState, initialFleet } from "../../src/projections/index.js";
import type { SimEvent, SimFleet } from "../../src/sim/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { eventually } from "../support/eventually.js";
import { readAll } from "../support/gateway.js";
import { passViolations } from "../support/pass-invariants.js";
import { h100Profile, type Stack, stackFleet, startStack } from "../support/stack.js";

/** 14 of the fleet's 32 GPUs: room for any node's replicas to move elsewhere. */
const CATALOG = {
  models: [
    { name: "llama-3.1-8b", replicas: 3, profiles: [h100Profile("tp2", 2)] },
    { name: "llama-3.3-70b", replicas: 2, profiles: [h100Profile("tp4", 4)] },
  ],
};
const WANTED: Record<string, number> = { "llama-3.1-8b": 3, "llama-3.3-70b": 2 };
/** The reconciler's drain deadline in this test. */
const DRAIN_DEADLINE_MS = 120_000;

/** A replica serves when it has shards and every one reports running. */
function serving(state: FleetState): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of state.replicas.replicas.values()) {
    if (r.shards.length > 0 && r.shards.every((s) => s.state === "running")) {
      out[r.model] = (out[r.model] ?? 0) + 1;
    }
  }
  return out;
}

const decisionsOf = (records: LogRecord[]) =>
  records.flatMap((r) =>
    r.event.body.case === "reconcilePass"
      ? r.event.body.value.decisions.map((d) => ({ seq: r.seq, d: d.kind }))
      : [],
  );

const commandsOf = (records: LogRecord[]) =>
  records.flatMap((r) =>
    r.event.body.case === "reconcilePass" ? r.event.body.value.commands.map((c) => ({ seq: r.seq, c })) : [],
  );

/** Sequence of the first report of `state` for a shard. */
function firstReport(records: LogRecord[], shardId: string, state: State): number | undefined {
  return records.find(
    (r) =>
      r.event.body.case === "shardStatus" &&
      r.event.body.value.status?.shardId === shardId &&
      r.event.body.value.status.state === state,
  )?.seq;
}

describe("drain a node through the operator API", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("moves its replicas make-before-break, empties it, and uncordon lets it take work again", async () => {
    let stack: Stack | undefined;
    let fleet: SimFleet | undefined;
    try {
      stack = await startStack(server.url, {
        name: "drain",
        // Spread: replicas go to the emptiest node, so where they land is predictable.
        reconciler: {
          policy: "spread",
          commandTimeoutMs: 5000,
          suspectAfterMs: 10_000,
          lostAfterMs: 20_000,
          drainDeadlineMs: DRAIN_DEADLINE_MS,
        },
      });
      const { log, call, why } = stack;
      const replicas = async (): Promise<any[]> => (await call("GET", "/v1/replicas")).replicas;
      fleet = stackFleet(stack.gw.url, { nodes: 4, gpusPerNode: 8, seed: 5 });
      const drainsReceived: Array<Extract<SimEvent, { type: "command" }>> = [];
      fleet.on((e) => {
        if (e.type === "command" && e.command === "drain") drainsReceived.push(e);
      });
      await fleet.start();
      await eventually(
        async () =>
          (await call("GET", "/v1/nodes")).nodes.filter((n: any) => n.liveness === "connected").length === 4,
        { what: "four connected nodes in the API" },
      );

      await call("PUT", "/v1/catalog", CATALOG);
      await eventually(
        async () => {
          const rs = await replicas();
          return rs.length === 5 && rs.every((r) => r.phase === "running");
        },
        { what: "five replicas running", timeoutMs: 30_000 },
      ).catch(async (err) => {
        throw new Error(`${(err as Error).message}${await why()}`);
      });
      const before = await replicas();
      const allRunningSeq = await log.lastSeq();

      // The node holding the most replicas (the lowest id among equals).
      const perNode = new Map<string, string[]>();
      for (const r of before)
        for (const n of r.nodeIds as string[]) perNode.set(n, [...(perNode.get(n) ?? []), r.replicaId]);
      const [node, moving] = [...perNode.entries()].sort(
        (a, b) => b[1].length - a[1].length || a[0].localeCompare(b[0]),
      )[0]!;
      assert.ok(moving.length >= 1);

      const drained = await call("POST", `/v1/nodes/${node}/drain`, { reason: "kernel upgrade" });
      assert.equal(drained.node.draining, true);
      assert.equal(drained.node.cordoned, true);

      // Moved: five running replicas, none on the node, none of the old ones left; the node runs nothing.
      await eventually(
        async () => {
          const rs = await replicas();
          return (
            rs.length === 5 &&
            rs.every(
              (r) => r.phase === "running" && !r.nodeIds.includes(node) && !moving.includes(r.replicaId),
            ) &&
            fleet!.node(node)!.shardList().length === 0
          );
        },
        { what: `${node}'s replicas moved`, timeoutMs: 30_000 },
      ).catch(async (err) => {
        throw new Error(`${(err as Error).message}${await why()}`);
      });
      const view = (await call("GET", `/v1/nodes/${node}`)).node;
      assert.deepEqual(view.replicaIds, []);
      assert.equal(view.gpusUsed, 0);
      assert.equal(view.draining, true);

      // Make-before-break, read from the log.
      const records = await readAll(log);
      const decisions = decisionsOf(records);
      const commands = commandsOf(records);
      for (const old of moving) {
        const created = decisions.find((x) => x.d.case === "replicaCreated" && x.d.value.replaces === old);
        assert.ok(created?.d.case === "replicaCreated", `a replacement for ${old} was created`);
        const replacement = created.d.value.replicaId;
        // The last placement: a replacement that failed to start is placed again.
        const placed = decisions.findLast(
          (x) => x.d.case === "replicaPlaced" && x.d.value.replicaId === replacement,
        );
        assert.ok(placed?.d.case === "replicaPlaced", `${replacement} was placed`);
        assert.ok(
          placed.d.value.shards.every((s) => s.nodeId !== node),
          `${replacement} placed off ${node}`,
        );
        const runningAt = Math.max(
          ...placed.d.value.shards.map(
            (s) => firstReport(records, s.shardId, State.RUNNING) ?? Number.POSITIVE_INFINITY,
          ),
        );
        assert.ok(Number.isFinite(runningAt), `${replacement} reported running`);

        const drainStarted = decisions.find(
          (x) => x.d.case === "replicaDrainStarted" && x.d.value.replicaId === old,
        );
        assert.ok(drainStarted, `${old} drained`);
        assert.ok(
          drainStarted.seq > runningAt,
          `${old}'s drain (seq ${drainStarted.seq}) after ${replacement} ran (seq ${runningAt})`,
        );
        const oldShards = before
          .find((r) => r.replicaId === old)!
          .shards.map((s: any) => s.shardId as string);
        const toOld = commands.filter(
          (x) => x.c.action.case !== "start" && oldShards.includes(x.c.action.value?.shardId ?? ""),
        );
        assert.ok(toOld.length > 0, `drain or stop commands sent to ${old}'s shards`);
        for (const x of toOld)
          assert.ok(x.seq > runningAt, `no ${x.c.action.case} of ${old} before its replacement ran`);
        // The operator's event list, filtered by the old replica, shows every pass that drained or stopped its shards.
        const listed = (
          await call("GET", `/v1/events?replica=${old}&kind=reconcilePass&limit=1000`)
        ).events.map((e: any) => e.seq as number);
        for (const x of toOld)
          assert.ok(
            listed.includes(x.seq),
            `the pass at seq ${x.seq} (${x.c.action.case} of ${old}'s shard) is listed under replica=${old}`,
          );
        assert.ok(
          toOld.every((x) => x.c.replicaId === old),
          `every drain or stop of ${old}'s shards names ${old}`,
        );
        for (const s of oldShards) {
          const draining = firstReport(records, s, State.DRAINING) ?? firstReport(records, s, State.STOPPED);
          assert.ok(
            draining !== undefined && draining > runningAt,
            `${s} stopped serving only after ${replacement} ran`,
          );
        }
        const removed = decisions.find((x) => x.d.case === "replicaRemoved" && x.d.value.replicaId === old);
        assert.ok(removed && removed.seq > drainStarted.seq, `${old} removed after its drain`);

        // Drain deadlines on the wire: every drain carries the drain's end
        // (the pass that started it + drainDeadlineMs), after its own pass
        // time, and the agent received exactly that.
        const drainPass = records.find((r) => r.seq === drainStarted.seq)!.event.body;
        assert.ok(drainPass.case === "reconcilePass");
        const end = drainPass.value.nowUnixMs + BigInt(DRAIN_DEADLINE_MS);
        const drains = toOld.filter((x) => x.c.action.case === "drain");
        assert.ok(drains.length > 0, `drain commands sent to ${old}'s shards`);
        for (const x of drains) {
          assert.ok(x.c.action.case === "drain");
          const pass = records.find((r) => r.seq === x.seq)!.event.body;
          assert.ok(pass.case === "reconcilePass");
          assert.equal(x.c.action.value.deadlineUnixMs, end, `${x.c.commandId} carries the drain's end`);
          assert.ok(end > pass.value.nowUnixMs, `${x.c.commandId}'s deadline is after its pass time`);
          const got = drainsReceived.find((e) => e.commandId === x.c.commandId);
          assert.equal(
            got?.deadlineUnixMs,
            Number(end),
            `the agent received ${x.c.commandId} with its deadline`,
          );
        }
      }

      // At no point of the log after everything first ran did a model serve fewer replicas than wanted.
      let state = initialFleet();
      for (const r of records) {
        state = evolveFleet(state, r.event, { seq: r.seq, timeMs: r.timeMs });
        if (r.seq < allRunningSeq) continue;
        const now = serving(state);
        for (const [model, wanted] of Object.entries(WANTED)) {
          assert.ok(
            (now[model] ?? 0) >= wanted,
            `${model} served by ${now[model] ?? 0} < ${wanted} at seq ${r.seq}`,
          );
        }
      }
      assert.deepEqual(passViolations(records), []);

      // Uncordon, then grow the catalog: the now empty node is the spread policy's first choice.
      const back = await call("POST", `/v1/nodes/${node}/uncordon`, {});
      assert.equal(back.node.cordoned, false);
      assert.equal(back.node.draining, false);
      await call("PUT", "/v1/catalog", {
        models: [...CATALOG.models, { name: "qwen-2.5-7b", replicas: 1, profiles: [h100Profile("tp1", 1)] }],
      });
      await eventually(
        async () => {
          const rs = await replicas();
          const q = rs.find((r) => r.model === "qwen-2.5-7b");
          return q?.phase === "running" && q.nodeIds.includes(node);
        },
        { what: `the new replica running on ${node}`, timeoutMs: 30_000 },
      ).catch(async (err) => {
        throw new Error(`${(err as Error).message}${await why()}`);
      });
      assert.equal(fleet.node(node)!.shardList().length, 1);
      // Every pass is what decide makes again (check-log --redecide).
      await stack.assertRedecided("a drain and an uncordon");
    } finally {
      await fleet?.stop();
      await stack?.close();
    }
  });
});
