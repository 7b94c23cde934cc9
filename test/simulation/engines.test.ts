/**
 * The simulation's engines (src/simulation/engines.ts) on the simulation's
 * scheduler: each fault follows `engineCourse`, the course the simulator's
 * engine host follows under the real supervisor; a launch that never comes
 * back is never answered, as the real supervisor's start is not.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CommandOutcome, ShardEvent, ShardStartSpec } from "../../src/agent/node-agent.js";
import { parseSimConfig } from "../../src/sim/config.js";
import { engineCourse, type ShardFault } from "../../src/sim/faults.js";
import { SimEngines } from "../../src/simulation/engines.js";
import { Scheduler } from "../../src/simulation/scheduler.js";

const T0 = Date.UTC(2027, 0, 15);

function machine(fault: ShardFault | undefined) {
  const scheduler = new Scheduler(T0);
  const config = parseSimConfig({ gateways: ["http://gw:1"], insecureDev: true, nodes: 1 });
  let n = 0;
  const engines = new SimEngines({
    nodeId: "node-1",
    position: 0,
    config,
    faults: { nodeFaults: new Set(), shardFault: () => fault },
    clock: scheduler.clock(() => `id-${++n}`),
  });
  const events: ShardEvent[] = [];
  const { supervisor } = engines.supervisorFor((e) => events.push(e));
  /** Runs the scheduler up to `ms` after the start, and lets the promise jobs it started finish. */
  const runFor = async (ms: number) => {
    const until = scheduler.now + ms;
    for (let fn = scheduler.next(until); fn !== undefined; fn = scheduler.next(until)) fn();
    await new Promise((r) => setImmediate(r));
  };
  return { engines, supervisor, events, runFor, config };
}

const spec: ShardStartSpec = {
  shardId: "sh-1",
  replicaId: "r-1",
  model: "m",
  profile: "tp1",
  engine: "default",
  gpuIndices: [3],
  gpuUuids: ["GPU-3"],
  engineArgs: [],
  engineEnv: {},
  rank: 0,
  worldSize: 1,
  masterAddr: "",
  masterPort: 0,
};

/** What a promise has settled to now, or "pending". */
async function settled<T>(p: Promise<T>): Promise<T | "pending"> {
  return Promise.race([p, new Promise<"pending">((r) => setImmediate(() => r("pending")))]);
}

describe("the simulation's engines", () => {
  it("never-starting: the start is never answered, a re-sent start and a stop are accepted, the machine's restart answers it", async () => {
    const m = machine("never-starting");
    const first = m.supervisor.start(spec);
    await m.runFor(10 * 60_000);
    assert.equal(await settled(first), "pending");
    assert.deepEqual(m.events, [], "nothing is said of the shard");
    assert.deepEqual(m.supervisor.shards(), []);
    assert.deepEqual(await m.supervisor.start(spec), { ok: true }, "a re-sent start: the first one reports");
    assert.deepEqual(await m.supervisor.stop(spec.shardId), { ok: true });
    assert.deepEqual(await m.supervisor.stop("sh-unknown"), {
      ok: false,
      error: 'unknown shard "sh-unknown"',
    });
    m.engines.clear();
    assert.deepEqual(await first, {
      ok: false,
      error: "the machine restarted during the launch",
    } satisfies CommandOutcome);
  });

  it("never-starting: a new agent process knows nothing of the launch the one before waits for", async () => {
    const m = machine("never-starting");
    const first = m.supervisor.start(spec);
    const { supervisor: next } = m.engines.supervisorFor(() => {});
    assert.deepEqual(await next.stop(spec.shardId), { ok: false, error: 'unknown shard "sh-1"' });
    // Its own start launches anew (and, drawn never-starting again, hangs too).
    const again = next.start(spec);
    assert.equal(await settled(again), "pending");
    m.engines.clear();
    const lost = { ok: false, error: "the machine restarted during the launch" };
    assert.deepEqual([await first, await again], [lost, lost]);
  });

  for (const fault of [
    undefined,
    "slow-start",
    "crash-loop",
    "exit-after-running",
    "fail",
    "hang",
  ] as const) {
    it(`${fault ?? "no fault"}: the shard goes through engineCourse's course`, async () => {
      const m = machine(fault);
      const course = engineCourse(fault, m.config, 3);
      assert.equal(course.launch, "launched");
      if (course.launch !== "launched") return;
      assert.deepEqual(await m.supervisor.start(spec), { ok: true });
      const states = () => m.events.map((e) => e.state);
      assert.deepEqual(states(), ["starting"]);
      if (course.readyAfterMs === undefined) {
        await m.runFor((course.exit?.afterMs ?? 60_000) + 1);
        if (course.exit === undefined) {
          assert.deepEqual(states(), ["starting"], "stuck loading");
          return;
        }
        assert.deepEqual(states(), ["starting", "failed"]);
      } else {
        await m.runFor(course.readyAfterMs - 1);
        assert.deepEqual(states(), ["starting"]);
        await m.runFor(1);
        assert.deepEqual(states(), ["starting", "running"]);
        if (course.exit === undefined) return;
        await m.runFor(course.exit.afterMs);
        assert.deepEqual(states(), [
          "starting",
          "running",
          course.exit.exitCode === 0 ? "stopped" : "failed",
        ]);
      }
      const last = m.events.at(-1)!;
      assert.equal(last.exitCode, course.exit!.exitCode);
      assert.equal(last.lastOutput, course.exit!.output);
      assert.equal(last.error, course.exit!.error || undefined);
    });
  }
});
