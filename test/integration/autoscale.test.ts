/**
 * Autoscaling end to end with every real part: nats-server, a gateway, a
 * `llmgw reconciler` process, the operator API and the simulator, whose
 * agents report a noisy load curve in their heartbeats over real Connect
 * streams. The gateway writes the load into the coalesced usage events; the
 * reconciler scales the model up when the load steps up and down when it
 * falls back, with a bounded number of decisions (no reversal inside a
 * cooldown), each explained in the log. `llmgw what-if --autoscale` then
 * replays that history with another setting.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { AutoscaleDecided } from "../../src/gen/llmgw/v1/events_pb.js";
import type { LogRecord } from "../../src/log/index.js";
import { SimFleet } from "../../src/sim/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { readAll } from "../support/gateway.js";
import { type Stack, startStack } from "../support/stack.js";

const MODEL = "llama-3.1-8b";
const UP_COOLDOWN_MS = 2_000;
const DOWN_COOLDOWN_MS = 6_000;
const USAGE_INTERVAL_MS = 250;

const catalog = {
  models: [
    {
      name: MODEL,
      replicas: 1,
      profiles: [{ name: "tp1", gpusPerShard: 1, memoryPerGpu: "20GiB", gpuProduct: "H100" }],
      autoscale: {
        min: 1,
        max: 4,
        metric: "queue_depth",
        target: 10,
        tolerance: 0.2,
        scaleUpCooldown: "2s",
        scaleDownCooldown: "6s",
        stabilization: "1500ms",
      },
    },
  ],
};

/**
 * Requests waiting across the model, split over its running replicas, ±30%
 * per replica and heartbeat: 5 (1 replica holds it), then 25 from 4 s (more
 * replicas: the scale-up acts on the lowest reading of its window, so 2 or
 * 3; single readings then leave the band both ways), then 3 from 22 s (1
 * replica again).
 */
const LOAD = `${MODEL}=steps:5@0s/25@4s/3@22s+noise=0.3`;

interface Decided {
  seq: number;
  nowMs: number;
  explanation: string;
  d: AutoscaleDecided;
}

function autoscaleDecisions(records: LogRecord[]): Decided[] {
  return records.flatMap((r) => {
    if (r.event.body.case !== "reconcilePass") return [];
    const pass = r.event.body.value;
    return pass.decisions.flatMap((d) =>
      d.kind.case === "autoscaleDecided"
        ? [{ seq: r.seq, nowMs: Number(pass.nowUnixMs), explanation: d.explanation, d: d.kind.value }]
        : [],
    );
  });
}

const loadEvents = (records: LogRecord[]) =>
  records.filter((r) => r.event.body.case === "usageChanged" && r.event.body.value.shardLoad.length > 0);

describe("autoscaling on simulated load", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("scales up and down with the load, without flapping, every decision explained in the log", async (t) => {
    const stack: Stack = await startStack(server.url, {
      name: "autosc",
      gateway: { usageIntervalMs: USAGE_INTERVAL_MS },
    });
    let fleet: SimFleet | undefined;
    const until = (what: string, cond: () => Promise<boolean>, timeoutMs = 60_000) =>
      eventually(cond, { what, timeoutMs, everyMs: 200 }).catch(async (err) => {
        throw new Error(`${(err as Error).message}${await stack.why()}`);
      });
    try {
      await stack.call("PUT", "/v1/catalog", catalog);
      fleet = new SimFleet({
        insecureDev: true,
        gateways: [stack.gw.url],
        nodes: 2,
        heartbeatMs: 100,
        startDelayMs: 300,
        drainMs: 100,
        reconnectMinMs: 50,
        reconnectMaxMs: 500,
        seed: 16,
        load: [LOAD],
      });
      await fleet.start();

      const decisions = async () => autoscaleDecisions(await readAll(stack.log));
      await until("a scale-up once the load stepped up", async () =>
        (await decisions()).some((x) => x.d.to > x.d.from),
      );
      await until("a scale-down once the load fell back", async () =>
        (await decisions()).some((x) => x.d.to < x.d.from),
      );
      await until(
        "one replica running again",
        async () => {
          const rs = (await stack.call("GET", "/v1/replicas")).replicas as Array<{ phase: string }>;
          return rs.length === 1 && rs[0]?.phase === "running";
        },
        30_000,
      );

      const records = await readAll(stack.log);
      const all = autoscaleDecisions(records);
      // Bounded: up, then down (a second step either way at most).
      assert.ok(
        all.length >= 2 && all.length <= 4,
        `decisions: ${JSON.stringify(all.map((x) => x.explanation))}`,
      );
      assert.ok(all[0]!.d.to > all[0]!.d.from, "the first decision scales up");
      assert.ok(all.at(-1)!.d.to < all.at(-1)!.d.from, "the last scales down");
      for (let i = 1; i < all.length; i++) {
        const gap = all[i]!.nowMs - all[i - 1]!.nowMs;
        assert.ok(gap >= UP_COOLDOWN_MS, `two decisions ${gap} ms apart`);
        if (all[i]!.d.to < all[i]!.d.from) assert.ok(gap >= DOWN_COOLDOWN_MS, `a scale-down ${gap} ms after`);
        // No up/down/up: a direction change never follows within the scale-down cooldown.
        const turned = all[i]!.d.to > all[i]!.d.from !== all[i - 1]!.d.to > all[i - 1]!.d.from;
        if (turned) assert.ok(gap >= DOWN_COOLDOWN_MS, `a reversal ${gap} ms after the last decision`);
      }

      // Every decision is explained, and the load it acted on is in the log before it.
      const loads = loadEvents(records);
      for (const x of all) {
        assert.equal(x.d.model, MODEL);
        assert.equal(x.d.metric, "queue_depth");
        assert.equal(x.d.target, 10);
        assert.ok(x.d.readyReplicas >= 1);
        assert.match(
          x.explanation,
          new RegExp(
            `^${MODEL} scaled (up|down) ${x.d.from} → ${x.d.to}: queue_depth per ready replica \\(\\d+ ready\\) stayed (above|below) target 10 ±20% for 1\\.5s`,
          ),
        );
        assert.equal(x.d.reason, x.d.to > x.d.from ? "above-target" : "below-target");
        assert.ok(
          loads.some((r) => r.seq < x.seq),
          `load reached the log before decision #${x.seq}`,
        );
      }
      const up = all[0]!;
      assert.ok(up.d.value > 10 * 1.2, `it scaled up on load above the band: ${up.d.value}`);

      // The log is not flooded: load events are coalesced per session, at most one per usage interval.
      const perSession = new Map<string, number[]>();
      for (const r of records)
        if (r.event.body.case === "usageChanged") {
          const k = r.event.body.value.sessionId;
          perSession.set(k, [...(perSession.get(k) ?? []), r.timeMs]);
        }
      for (const [session, times] of perSession) {
        const span = (times.at(-1)! - times[0]!) / USAGE_INTERVAL_MS;
        // Stream times are the server's receipt times: allow for publish jitter.
        assert.ok(
          times.length <= span * 1.5 + 2,
          `${session}: ${times.length} usage events over ${span} intervals`,
        );
      }
      const heartbeats = fleet.counters().heartbeatsSent;
      const usage = records.filter((r) => r.event.body.case === "usageChanged").length;
      assert.ok(usage < heartbeats, `${usage} usage events for ${heartbeats} heartbeats`);
      t.diagnostic(`decisions: ${all.map((x) => `${x.d.from}→${x.d.to}`).join(", ")}`);
      t.diagnostic(`${heartbeats} heartbeats, ${usage} usage events (${loads.length} with load)`);

      // what-if: the same history with half the target would have scaled up further at that pass.
      const w = await runCli([
        "what-if",
        "--autoscale",
        `${MODEL}=1:8:queue_depth:5:0.2`,
        "--json",
        ...stack.logFlags,
      ]);
      assert.equal(w.code, 0, w.stderr);
      const out = JSON.parse(w.stdout) as {
        passes: Array<{
          seq: number;
          differences: Array<{ subject: string; record: string; alternative: string }>;
        }>;
      };
      const atUp = out.passes
        .find((p) => p.seq === up.seq)
        ?.differences.find((d) => d.subject === `autoscale ${MODEL}`);
      assert.equal(
        atUp?.record,
        `${up.d.from} → ${up.d.to}`,
        JSON.stringify(out.passes.filter((p) => p.differences.length > 0)),
      );
      const alt = /^(\d+) → (\d+)$/.exec(atUp?.alternative ?? "");
      assert.ok(
        alt && Number(alt[1]) === up.d.from && Number(alt[2]) > up.d.to,
        `alternative: ${atUp?.alternative}`,
      );
      const bad = await runCli(["what-if", "--autoscale", `${MODEL}=1:2:tokens:10`, ...stack.logFlags]);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /autoscale\.llama-3\.1-8b\.metric/);
      // Every pass, the load-driven ones among them, is what decide makes again (check-log --redecide).
      await stack.assertRedecided("an autoscaled run");
    } finally {
      await fleet?.stop();
      await stack.close();
    }
  });
});
