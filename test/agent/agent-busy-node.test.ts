// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * A busy node, with every real part of the control plane (nats-server, a
 * gateway, a `llmgw reconciler` process, the operator API) and a real
 * `llmgw agent` process on a fake nvidia-smi and the fake engine:
 *
 * - four shards placed on one node in one pass all start, each on its own
 *   port (one another program holds is skipped), and reach RUNNING: no
 *   FAILED status, no EADDRINUSE in any engine log;
 * - each engine's environment holds none of the agent's variables beyond
 *   PATH, HOME and LANG (its credentials included), and the engine's own.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { engineRecord, fakeGpuUuid, shardStatuses, until } from "../support/agent-process.js";
import { startNode, tp1Catalog, withAgentWorld } from "../support/agent-world.js";
import { readAll } from "../support/gateway.js";

const NODE = "gpu-busy1";

/** A port "another program" listens on, with the free ones after it. */
async function foreignListener(): Promise<{ port: number; server: Server }> {
  for (;;) {
    const port = 21000 + Math.floor(Math.random() * 30000);
    const server = createServer();
    const ok = await new Promise<boolean>((r) => {
      server.once("error", () => r(false));
      server.listen(port, "0.0.0.0", () => r(true));
    });
    if (ok) return { port, server };
  }
}

/** Variables the agent process has that an engine must not get. */
const AGENT_ONLY: Record<string, string> = {
  LLMGW_AGENT_ENROLL_TOKEN: "agent-credential",
  NATS_TOKEN: "agent-credential",
  AWS_SECRET_ACCESS_KEY: "agent-credential",
  FAKE_ENGINE_FROM_AGENT: "not for engines",
};

describe("llmgw agent on a busy node (real processes)", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("starts four shards placed in one pass on four ports, all RUNNING, from a clean environment", async () => {
    const foreign = await foreignListener();
    try {
      await withAgentWorld(server, { name: "agbusy" }, async (w) => {
        const { dir, stack: s, why } = w;
        await startNode(w, NODE, {
          gpus: [{}, {}, {}, {}],
          config: { startDelayMs: 800, portRange: [foreign.port, foreign.port + 20] },
          env: AGENT_ONLY,
        });
        await s.call("PUT", "/v1/catalog", tp1Catalog(4, { engineEnv: { FAKE_ENGINE_PROFILE: "tp1" } }));

        const running = await until(
          "four shards RUNNING",
          async () => {
            const st = shardStatuses(await readAll(s.log), NODE).filter(
              (x) => x.status.state === State.RUNNING,
            );
            const byShard = new Map(st.map((x) => [x.status.shardId, x.status]));
            return byShard.size >= 4 ? [...byShard.values()] : undefined;
          },
          { timeoutMs: 40_000, why },
        );
        const records = await readAll(s.log);
        const passes = records.flatMap((r) =>
          r.event.body.case === "reconcilePass"
            ? [r.event.body.value.commands.filter((c) => c.action.case === "start")]
            : [],
        );
        assert.ok(
          passes.some((starts) => starts.length === 4),
          `the four starts were sent in one pass (starts per pass: ${passes.map((p) => p.length).join(", ")})`,
        );
        const ports = running.map((st) => new URL(st.endpoint).port);
        assert.equal(new Set(ports).size, 4, `four ports: ${ports.join(", ")}`);
        assert.ok(!ports.includes(String(foreign.port)), "the port another program holds was skipped");
        const failed = shardStatuses(records, NODE).filter((x) => x.status.state === State.FAILED);
        assert.deepEqual(
          failed.map((x) => x.status.error),
          [],
          "no shard FAILED",
        );
        const logs = join(dir, "state", "logs");
        for (const f of readdirSync(logs))
          assert.doesNotMatch(readFileSync(join(logs, f), "utf8"), /EADDRINUSE/, `engine log ${f}`);

        // What each engine got of the environment: the list, and nothing of the agent's beyond it.
        const allowed = new Set([
          "PATH",
          "HOME",
          "LANG",
          "CUDA_VISIBLE_DEVICES",
          "CUDA_DEVICE_ORDER",
          "FAKE_ENGINE_PROFILE",
          // Set by the shell that records the engine's exit status, not inherited.
          "PWD",
          "OLDPWD",
          "SHLVL",
          "_",
        ]);
        const agentEnv = { ...process.env, ...AGENT_ONLY };
        for (const st of running) {
          const env = engineRecord(dir, st.shardId).env as Record<string, string>;
          const extra = Object.keys(env).filter((k) => !allowed.has(k));
          assert.deepEqual(extra, [], `${st.shardId}: variables beyond the list`);
          const leaked = Object.keys(agentEnv).filter(
            // PWD: the shell sets it to its working directory, the agent's.
            (k) =>
              !["PATH", "HOME", "LANG", "PWD"].includes(k) && env[k] !== undefined && env[k] === agentEnv[k],
          );
          assert.deepEqual(leaked, [], `${st.shardId}: the agent's variables reached the engine`);
          assert.equal(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
          assert.equal(env["FAKE_ENGINE_PROFILE"], "tp1");
        }
        // By UUID, each a GPU of its own.
        const gpus = running.map((st) => engineRecord(dir, st.shardId).env.CUDA_VISIBLE_DEVICES).sort();
        assert.deepEqual(gpus, [0, 1, 2, 3].map(fakeGpuUuid), "a GPU each");
      });
    } finally {
      foreign.server.close();
    }
  });
});
