// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * `llmgw check-log --redecide` over the logs of real runs: nats-server, a
 * gateway, a `llmgw reconciler` process, the operator API and a simulated
 * fleet over Connect, driven through placements, a scale-up, a node drain,
 * a rollout, a rollout whose engine fails to start (stalled, then undone)
 * and a node restart that keeps its shards (adoption). The real CLI then
 * re-runs decide for every pass the reconciler appended: clean with the
 * reconciler's config, read from NATS and through the API; with the
 * defaults instead, the passes differ and it says so.
 *
 * And a planted nondeterminism: a decide whose decisions name how often it
 * ran in its process (test/support/planted-decide, swapped in by a module
 * hook in both the reconciler's and the checker's process; nothing in src
 * changes). The check names the pass and the decision that differ.
 *
 * The golden log's passes were written by hand (test/support/golden-log.ts),
 * not by decide: the check reports every one of them.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type LogRecord, openLog } from "../../src/log/index.js";
import type { SimFleet } from "../../src/sim/index.js";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { readAll } from "../support/gateway.js";
import { appendRaw, readGoldenLog } from "../support/golden-log.js";
import { type Stack, startStack, withConnectedFleet } from "../support/stack.js";

const QWEN = "qwen-2.5-7b";
const LLAMA = "llama-3.3-70b";
const V1 = ["--max-model-len=8192"];
const V2 = ["--max-model-len=16384"];
/** The simulator fails every start with this argument (`fail@arg=--broken`). */
const BROKEN = [...V2, "--broken"];

const catalog = (qwenReplicas: number, args: string[]) => ({
  models: [
    {
      name: QWEN,
      replicas: qwenReplicas,
      minAvailable: "50%",
      profiles: [
        { name: "tp1", gpusPerShard: 1, memoryPerGpu: "20GiB", gpuProduct: "H100", engineArgs: args },
      ],
      rollout: { maxSurge: 1, maxUnavailable: 0, progressDeadline: "2m" },
    },
    {
      name: LLAMA,
      replicas: 1,
      profiles: [{ name: "tp4", gpusPerShard: 4, memoryPerGpu: "64GiB", gpuProduct: "H100" }],
    },
  ],
});

const RECONCILER_CONFIG = {
  commandTimeoutMs: 5000,
  suspectAfterMs: 10_000,
  lostAfterMs: 20_000,
  drainDeadlineMs: 30_000,
  // Short, so the node where the broken rollout failed takes replicas again soon.
  cooldownMs: 2000,
};

const PLANTED = join(import.meta.dirname, "../support/planted-decide/register.mjs");
const plantedEnv = { NODE_OPTIONS: `--import ${PLANTED}` };

const decisionKinds = (records: LogRecord[]) =>
  new Set(
    records.flatMap((r) =>
      r.event.body.case === "reconcilePass" ? r.event.body.value.decisions.map((d) => d.kind.case) : [],
    ),
  );

describe("check-log --redecide over the logs of real runs", () => {
  let server: NatsServer & { close(): Promise<void> };
  let configFile: string;
  before(async () => {
    server = await startServer();
    configFile = join(tempDir("redecide"), "reconciler.json");
    writeFileSync(configFile, JSON.stringify(RECONCILER_CONFIG));
  });
  after(async () => {
    await server?.close();
  });

  async function withFleet(
    name: string,
    o: { reconcilerEnv?: Record<string, string> },
    fn: (s: Stack, fleet: SimFleet) => Promise<void>,
  ): Promise<void> {
    const stack = await startStack(server.url, {
      name,
      reconciler: RECONCILER_CONFIG,
      ...(o.reconcilerEnv ? { reconcilerEnv: o.reconcilerEnv } : {}),
    });
    try {
      const fleet = { nodes: 3, gpusPerNode: 8, seed: 36, drainMs: 200, faults: ["fail@arg=--broken"] };
      await withConnectedFleet(stack, fleet, (f) => fn(stack, f));
    } finally {
      await stack.close();
    }
  }

  const replicas = async (s: Stack, model: string) =>
    (await s.call("GET", `/v1/replicas?model=${model}`)).replicas as any[];

  async function settled(s: Stack, what: string, check: () => Promise<boolean>): Promise<void> {
    await eventually(check, { what, timeoutMs: 40_000 }).catch(async (err) => {
      throw new Error(`${(err as Error).message}${await s.why()}`);
    });
  }

  const allReady = async (s: Stack, qwen: number, args: string[]) => {
    const q = await replicas(s, QWEN);
    const l = await replicas(s, LLAMA);
    const rollout = (await s.call("GET", `/v1/rollouts/${QWEN}`)).rollout;
    return (
      q.length === qwen &&
      q.every((r) => r.ready) &&
      l.length === 1 &&
      l.every((r) => r.ready) &&
      !rollout.active &&
      rollout.draining === 0 &&
      JSON.stringify((await s.call("GET", "/v1/catalog")).catalog.models[0].profiles[0].engineArgs) ===
        JSON.stringify(args)
    );
  };

  it("is clean after placements, scale, a drain, rollouts (one stalled and undone) and a restart with adoption", async () => {
    await withFleet("redecide", {}, async (s, fleet) => {
      await s.call("PUT", "/v1/catalog", catalog(4, V1));
      await settled(s, "4 + 1 ready replicas", () => allReady(s, 4, V1));

      const scaled = await runCli(["scale", QWEN, "6", "--api", s.api.url], { timeoutMs: 60_000 });
      assert.equal(scaled.code, 0, scaled.stderr);
      await settled(s, "6 + 1 ready replicas after the scale-up", () => allReady(s, 6, V1));

      const busy = (await replicas(s, QWEN))[0].nodeIds[0] as string;
      await s.call("POST", `/v1/nodes/${busy}/drain`, { reason: "kernel upgrade" });
      await settled(s, `every replica off ${busy}`, async () => {
        const all = [...(await replicas(s, QWEN)), ...(await replicas(s, LLAMA))];
        return (await allReady(s, 6, V1)) && all.every((r) => !r.nodeIds.includes(busy));
      });
      await s.call("POST", `/v1/nodes/${busy}/uncordon`, { reason: "upgraded" });

      await s.call("PUT", "/v1/catalog", catalog(6, V2));
      await settled(s, "the rollout to V2 done", () => allReady(s, 6, V2));

      await s.call("PUT", "/v1/catalog", catalog(6, BROKEN));
      await settled(
        s,
        "the broken rollout stalled",
        async () => (await s.call("GET", `/v1/rollouts/${QWEN}`)).rollout.stalled !== null,
      );
      await s.call("POST", `/v1/rollouts/${QWEN}/undo`, {});
      await settled(s, "the undo done", () => allReady(s, 6, V2));

      const holder = (await replicas(s, LLAMA))[0].nodeIds[0] as string;
      const adoptedBefore = (await readAll(s.log)).length;
      fleet.restartNode(holder, { keepShards: true });
      await settled(s, `${holder}'s shards adopted`, async () =>
        (await readAll(s.log))
          .slice(adoptedBefore)
          .some(
            (r) =>
              r.event.body.case === "reconcilePass" &&
              r.event.body.value.decisions.some((d) => d.kind.case === "shardsAdopted"),
          ),
      );
      await settled(s, "all ready after the restart", () => allReady(s, 6, V2));

      const records = await readAll(s.log);
      const kinds = decisionKinds(records);
      for (const k of [
        "replicaPlaced",
        "replicaDrainStarted",
        "rolloutStarted",
        "rolloutStalled",
        "replicaFailed",
        "shardsAdopted",
        "endpointsChanged",
      ] as const)
        assert.ok(kinds.has(k), `the run recorded a ${k} decision: ${[...kinds].join(", ")}`);
      const passes = records.filter((r) => r.event.body.case === "reconcilePass").length;

      // Read from NATS, with the reconciler's config.
      const viaNats = await runCli(["check-log", "--redecide", "--config", configFile, ...s.logFlags], {
        timeoutMs: 120_000,
      });
      assert.equal(viaNats.code, 0, `${viaNats.stdout}\n${viaNats.stderr}`);
      const m = /, (\d+) passes re-decided \((\d+) the same\): every invariant holds/.exec(viaNats.stdout);
      assert.ok(m, viaNats.stdout);
      assert.ok(Number(m[1]) >= passes, `${m[1]} passes re-decided of ${passes} read before`);
      assert.equal(m[2], m[1]);
      assert.match(viaNats.stdout, /redecide: not in the log: the reconciler config/);
      assert.match(viaNats.stdout, /redecide: not in the log: the live-gateway set/);

      // Through the operator API, as JSON.
      const viaApi = await runCli(
        ["check-log", "--redecide", "--config", configFile, "--json", "--api", s.api.url],
        { timeoutMs: 120_000 },
      );
      assert.equal(viaApi.code, 0, `${viaApi.stdout}\n${viaApi.stderr}`);
      const json = JSON.parse(viaApi.stdout);
      assert.deepEqual(json.violations, []);
      assert.ok(json.redecide.passes >= passes);
      assert.deepEqual(json.redecide.differing, []);
      assert.equal(json.redecide.notRederived.length, 2);

      // Without the config the reconciler ran with, its passes are not what decide makes.
      const defaults = await runCli(["check-log", "--redecide", ...s.logFlags], { timeoutMs: 120_000 });
      assert.equal(defaults.code, 1, defaults.stdout);
      assert.match(
        defaults.stdout,
        /^seq \d+ \[redecide\] pass pass-\S+ by rec-redecide on the state at seq \d+: /m,
      );
      assert.match(defaults.stdout, /redecide config: the defaults \(no --config\)/);
      assert.match(
        defaults.stdout,
        /redecide: \d+ of \d+ passes differ; another config than the reconciler's/,
      );
    });
  });

  it("reports a planted nondeterminism (a decide that reads a counter), naming the pass and the decision", async () => {
    await withFleet("plant", { reconcilerEnv: plantedEnv }, async (s) => {
      await s.call("PUT", "/v1/catalog", catalog(4, V1));
      await settled(s, "4 + 1 ready replicas", () => allReady(s, 4, V1));
      const records = await readAll(s.log);
      const passes = records.filter((r) => r.event.body.case === "reconcilePass");
      assert.ok(passes.length >= 2);
      // The planted decide did run in the reconciler: its passes carry the counter.
      for (const p of passes)
        if (p.event.body.case === "reconcilePass")
          for (const d of p.event.body.value.decisions) assert.match(d.explanation, / \(call \d+\)$/);

      // The same planted code in the checker: its counter counts other calls.
      const out = await runCli(["check-log", "--redecide", "--config", configFile, ...s.logFlags], {
        env: plantedEnv,
        timeoutMs: 120_000,
      });
      assert.equal(out.code, 1, `${out.stdout}\n${out.stderr}`);
      const lines = out.stdout.split("\n").filter((l) => l.includes("[redecide]"));
      assert.ok(lines.length > 0, out.stdout);
      const m =
        /^seq (\d+) \[redecide\] pass (\S+) by rec-plant on the state at seq (\d+): decision (\d+) \((\w+)\) differs at explanation: recorded "(.*)", re-decided "(.*)"/.exec(
          lines[0]!,
        );
      assert.ok(m, lines[0]);
      const [, seq, id, , index, kind, recorded, redecided] = m;
      const pass = passes.find((p) => p.seq === Number(seq));
      assert.ok(pass, `seq ${seq} is a pass of the log`);
      assert.equal(pass.event.id, id);
      if (pass.event.body.case !== "reconcilePass") return;
      const d = pass.event.body.value.decisions[Number(index) - 1]!;
      assert.equal(d.kind.case, kind);
      assert.equal(recorded, d.explanation);
      // The checker decides each recorded pass once, in log order: its counter is the pass's place among them.
      const place = passes.indexOf(pass) + 1;
      assert.equal(redecided, d.explanation.replace(/ \(call \d+\)$/, ` (call ${place})`));
    });
  });

  it("reports every pass of the golden log, whose passes were written by hand, not by decide", async () => {
    const stream = uniqueStream("GOLDEN");
    const log = await openLog({ url: server.url, clientName: "test", name: stream });
    try {
      await appendRaw(log, readGoldenLog());
      const passes = (await readAll(log)).filter((r) => r.event.body.case === "reconcilePass");
      assert.ok(passes.length > 5);
      const out = await runCli(["check-log", "--redecide", "--nats", server.url, "--stream", stream], {
        timeoutMs: 120_000,
      });
      assert.equal(out.code, 1, `${out.stdout}\n${out.stderr}`);
      const reported = out.stdout
        .split("\n")
        .filter((l) => l.includes("[redecide]"))
        .map((l) => Number(/^seq (\d+) /.exec(l)?.[1]));
      assert.deepEqual(
        reported,
        passes.map((p) => p.seq),
      );
      assert.match(out.stdout, new RegExp(`, ${passes.length} passes re-decided \\(0 the same\\)`));
    } finally {
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
    }
  });

  it("refuses bad usage before reading: --config without --redecide, a config field out of range (exit 2)", async () => {
    const flags = ["--nats", server.url, "--stream", "NO_SUCH_STREAM"];
    const alone = await runCli(["check-log", ...flags, "--config", configFile]);
    assert.equal(alone.code, 2, alone.stdout + alone.stderr);
    assert.match(alone.stderr, /--config is the reconciler's config for --redecide/);
    const bad = join(tempDir("redecide-bad"), "bad.json");
    writeFileSync(bad, JSON.stringify({ suspectAfterMs: -1 }));
    const wrong = await runCli(["check-log", ...flags, "--redecide", "--config", bad]);
    assert.equal(wrong.code, 2, wrong.stdout + wrong.stderr);
    assert.match(wrong.stderr, /--config .*bad\.json: suspectAfterMs/);
  });
});
