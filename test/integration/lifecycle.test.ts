// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * A replica's life never lies, driven through every real part: nats-server,
 * a gateway, a `llmgw reconciler` process, the operator API and simulated
 * nodes over Connect. Four simulated faults — the agent refuses the start,
 * acknowledges it and never says STARTING, stays STARTING for ever, or its
 * engine exits on its own after RUNNING (which the real agent reports
 * FAILED: only a stop or a drain ends an engine as asked) — each fail their
 * replica with the reason named in the log; the model×node cooldown keeps the faulty node from
 * getting the model again, and the replacement runs on a healthy node.
 *
 * Each model is pinned by a node label to a pool of two nodes: the faulty
 * one connects first and is the only place the replica can go; the healthy
 * one connects once the failure is in the log, so where the replacement
 * lands says the cooldown worked.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ReplicaFailed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import { checkLog } from "../../src/invariants/index.js";
import type { LogRecord } from "../../src/log/index.js";
import { SimFleet } from "../../src/sim/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { readAll } from "../support/gateway.js";
import { startStack } from "../support/stack.js";

interface Case {
  fault: string;
  model: string;
  reason: ReplicaFailed_Reason;
  /** Profile overrides, as an operator writes them in the catalog. */
  profile?: Record<string, unknown>;
  /** What the failure's text must say. */
  error: RegExp;
}

const CASES: Case[] = [
  {
    fault: "refuse-start",
    model: "refused",
    reason: ReplicaFailed_Reason.START_REFUSED,
    error: /cannot launch engine/,
  },
  {
    fault: "never-starting",
    model: "silent",
    reason: ReplicaFailed_Reason.START_TIMEOUT,
    profile: { startTimeout: "400ms", startAttempts: 2 },
    error: /no STARTING from silent-1 .* after 2 start\(s\)/,
  },
  {
    fault: "stuck-starting",
    model: "stuck",
    reason: ReplicaFailed_Reason.READY_TIMEOUT,
    profile: { readyTimeout: "1s" },
    error: /STARTING for \d+s, past its ready timeout of 1s/,
  },
  {
    fault: "exit-after-running",
    model: "quitter",
    reason: ReplicaFailed_Reason.SHARD_FAILED,
    error: /the engine exited with code 0/,
  },
];

const catalog = () => ({
  models: CASES.map((c) => ({
    name: c.model,
    replicas: 1,
    profiles: [
      {
        name: "tp1",
        gpusPerShard: 1,
        memoryPerGpu: "20GiB",
        gpuProduct: "H100",
        nodeLabels: { pool: c.model },
        ...c.profile,
      },
    ],
  })),
});

function failures(records: LogRecord[]) {
  return records.flatMap((r) =>
    r.event.body.case === "reconcilePass"
      ? r.event.body.value.decisions.flatMap((d) =>
          d.kind.case === "replicaFailed" ? [{ seq: r.seq, ...d.kind.value }] : [],
        )
      : [],
  );
}

function cooldowns(records: LogRecord[]) {
  return records.flatMap((r) =>
    r.event.body.case === "reconcilePass"
      ? r.event.body.value.decisions.flatMap((d) =>
          d.kind.case === "cooldownStarted" ? [{ seq: r.seq, ...d.kind.value }] : [],
        )
      : [],
  );
}

/** Start commands per node, with their pass's sequence. */
function starts(records: LogRecord[], nodeId: string) {
  return records.flatMap((r) =>
    r.event.body.case === "reconcilePass"
      ? r.event.body.value.commands.flatMap((c) =>
          c.nodeId === nodeId && c.action.case === "start" ? [{ seq: r.seq, attempt: c.attempt }] : [],
        )
      : [],
  );
}

describe("replica lifecycle through the real stream and the real log", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("refused, never started, stuck starting and unasked exits fail with their reason; the replacement runs elsewhere", async () => {
    const fleets: SimFleet[] = [];
    // The defaults (60 s, 20 min) are overridden per profile in the catalog above; the backoff is short.
    const stack = await startStack(server.url, {
      name: "life",
      reconciler: { crashBackoffBaseMs: 200, crashBackoffMaxMs: 400 },
    });
    const { log, call, why } = stack;
    const pool = async (suffix: string, c: Case, faulty: boolean) => {
      const f = new SimFleet({
        gateways: [stack.gw.url],
        insecureDev: true,
        nodes: 1,
        nodePrefix: `${c.model}-${suffix}`,
        gpusPerNode: 2,
        labels: { pool: c.model },
        faults: faulty ? [`${c.fault}@${c.model}-${suffix}1`] : [],
        seed: 3,
        heartbeatMs: 500,
        startDelayMs: 200,
        crashAfterMs: 300,
        reconnectMinMs: 50,
        reconnectMaxMs: 500,
      });
      fleets.push(f);
      await f.start();
    };
    try {
      // The faulty node of each pool ("<model>-1"), alone in its pool.
      for (const c of CASES) await pool("", c, true);
      await call("PUT", "/v1/catalog", catalog());

      let records: LogRecord[] = [];
      await eventually(
        async () => {
          records = await readAll(log);
          const failed = failures(records);
          return CASES.every((c) => failed.some((f) => f.nodeId === `${c.model}-1`));
        },
        { what: "a failure of each model on its faulty node", timeoutMs: 30_000 },
      ).catch(async (err) => {
        throw new Error(`${(err as Error).message}${await why()}`);
      });

      for (const c of CASES) {
        const node = `${c.model}-1`;
        const f = failures(records).find((x) => x.nodeId === node)!;
        assert.equal(
          f.reason,
          c.reason,
          `${c.fault}: reason ${ReplicaFailed_Reason[f.reason]}, want ${ReplicaFailed_Reason[c.reason]}`,
        );
        assert.match(f.error, c.error, `${c.fault}: the failure names what happened`);
        const cd = cooldowns(records).find((x) => x.nodeId === node && x.model === c.model);
        assert.ok(
          cd && cd.seq === f.seq,
          `${c.fault}: the failure put ${c.model}×${node} on cooldown at once`,
        );
      }
      // never-starting: the start went out once more before the placement failed, with the same command id.
      assert.deepEqual(
        starts(records, "silent-1").map((s) => s.attempt),
        [1, 2],
      );

      // The failures as operators see them: the reason, the exit code and the engine's last lines.
      const quitter = (await call("GET", "/v1/replicas?model=quitter")).replicas[0];
      assert.equal(quitter.lastFailure.reason, "shard-failed");
      assert.match(quitter.lastFailure.lastOutput, /Shutting down: received SIGTERM from outside the agent/);
      assert.equal(quitter.ready, false);
      const explained = await runCli(["explain", "replica", quitter.replicaId, ...stack.logFlags]);
      assert.equal(explained.code, 0, explained.stderr);
      assert.match(explained.stdout, /replicaFailed .*the engine exited with code 0/);
      assert.match(explained.stdout, /reason shard-failed\n/);
      assert.match(
        explained.stdout,
        /last output:\n.*INFO Shutting down: received SIGTERM from outside the agent/,
      );

      // Healthy nodes join each pool: the replacements run there, and the faulty nodes get nothing more.
      const failedAt = await log.lastSeq();
      for (const c of CASES) await pool("ok-", c, false);
      await eventually(
        async () => {
          const body = await call("GET", "/v1/replicas");
          return (
            body.models.length === CASES.length &&
            body.models.every((m: any) => m.ready === 1 && m.desired === 1) &&
            body.replicas.every((r: any) => r.ready && r.nodeIds[0] === `${r.model}-ok-1`)
          );
        },
        { what: "every model ready on its healthy node", timeoutMs: 30_000 },
      ).catch(async (err) => {
        throw new Error(`${(err as Error).message}${await why()}`);
      });
      const listed = await runCli(["replicas", "--api", stack.api.url]);
      assert.equal(listed.code, 0, listed.stderr);
      for (const c of CASES) assert.match(listed.stdout, new RegExp(`^${c.model}\\s+1/1\\s+-$`, "m"));
      assert.match(listed.stdout, /shard-failed on quitter-1: .*the engine exited with code 0/);
      records = await readAll(log);
      for (const c of CASES)
        assert.deepEqual(
          starts(records, `${c.model}-1`).filter((s) => s.seq > failedAt),
          [],
          `no new start for ${c.model} on its faulty node during the cooldown`,
        );
      // Every invariant holds over the whole history, failure reasons backed by the log included.
      assert.deepEqual(checkLog(records).violations, []);
      // And every pass is what decide makes again (check-log --redecide).
      await stack.assertRedecided("four failures and their replacements");
    } finally {
      await Promise.allSettled(fleets.map((f) => f.stop()));
      await stack.close();
    }
  });
});
