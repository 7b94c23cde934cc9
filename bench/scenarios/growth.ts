/**
 * Growth: how fast the log grows, per node and day, for a stated churn,
 * measured with the simulator and extrapolated.
 *
 * The fleet: 1,000 simulated H100 nodes (8 GPUs; 40 in --quick) over
 * Connect to a real gateway, a `llmgw reconciler` process and the API on a
 * real nats-server, run ACCELERATION times faster than a real fleet:
 * heartbeats every 3 s / ACCELERATION (a real agent's 3 s), the gateway's
 * usage coalescing window 3 s / ACCELERATION (its default 3 s), and load
 * curves whose period is a real hour / ACCELERATION, so every
 * interval-driven event comes ACCELERATION times as often. The churn:
 *   - steady state: heartbeats (coalesced: they reach the log only as usage
 *     changes past the gateway's thresholds), usage changes of a model
 *     whose demand follows a sine (8 ± 6 queued requests per replica over
 *     an hour, 20 % noise), shard status, reconciler passes; one replica
 *     per node (half its GPUs);
 *   - per node and day: one agent restart (a session closed and opened,
 *     with its whole registration);
 *   - per day: one node drained and undrained (its replicas moved) and one
 *     rollout of the model (every replica replaced).
 * What is measured: the stream's bytes (JetStream's own count, message and
 * headers) and events over a steady window and over each one-off step;
 * the model adds them up per node per day, at ACCELERATION's real pace.
 * 10,000 nodes: every per-node term scales linearly with the nodes; the
 * rollout's and the drain's bytes scale with the replicas moved, taken as
 * proportional to the fleet too.
 */
import { SimFleet } from "../../src/sim/index.js";
import { startServer } from "../../test/harness/nats.js";
import { startStack } from "../../test/support/stack.js";
import { figure, type Scenario } from "../support/result.js";

const ACCELERATION = 10;
const DAY_S = 86_400;
const MODEL = "llama-3.3-70b";

export const growth: Scenario = {
  name: "growth",
  describe:
    "log bytes and events per node per day for a stated churn, measured with 1,000 simulated nodes at 10× pace",
  async run(ctx) {
    const nodes = ctx.quick ? 40 : 1_000;
    // Half the GPUs serve (two tp4 slots per node, one used): usage moves on every node.
    const replicas = nodes;
    const steadyS = ctx.quick ? 3 : 30;
    const server = await startServer();
    const stack = await startStack(server.url, {
      name: "growth",
      gateway: {
        usageIntervalMs: Math.round(3_000 / ACCELERATION),
        heartbeatTimeoutMs: 10_000,
        // Every simulated node connects from loopback.
        connectionLimits: { maxConnections: nodes + 256, maxConnectionsPerAddress: nodes + 64 } as never,
      },
      reconciler: { policy: "spread", suspectAfterMs: 15_000, lostAfterMs: 45_000 },
    });
    const catalog = (revision: string) => ({
      models: [
        {
          name: MODEL,
          replicas,
          rollout: { maxSurge: Math.ceil(replicas / 2) },
          profiles: [
            {
              name: "tp4",
              gpusPerShard: 4,
              memoryPerGpu: "64GiB",
              gpuProduct: "H100",
              engineArgs: [`--revision=${revision}`],
            },
          ],
        },
      ],
    });
    const fleet = new SimFleet({
      gateways: [stack.gw.url],
      insecureDev: true,
      nodes,
      gpusPerNode: 8,
      seed: 35,
      heartbeatMs: Math.round(3_000 / ACCELERATION),
      startDelayMs: 200,
      drainMs: 200,
      reconnectMinMs: 100,
      reconnectMaxMs: 2_000,
      // Demand for the whole model: 8 ± 6 queued requests per replica over an hour, with 20 % noise.
      load: [`${MODEL}=sine:${8 * replicas}~${6 * replicas}@${Math.round(3_600 / ACCELERATION)}s+noise=0.2`],
    });
    const running = async () =>
      ((await stack.call("GET", "/v1/replicas")).replicas as Array<{ phase: string }>).filter(
        (r) => r.phase === "running",
      ).length;
    const waitFor = async (what: string, cond: () => Promise<boolean>, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      while (!(await cond())) {
        if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs / 1000} s`);
        await new Promise((r) => setTimeout(r, 500));
      }
    };
    const mark = async () => {
      const b = await stack.log.bounds();
      return { seq: b.lastSeq, bytes: b.bytes, at: performance.now() };
    };
    type Mark = Awaited<ReturnType<typeof mark>>;
    const kinds = async (from: Mark, to: Mark) => {
      const out: Record<string, number> = {};
      for await (const r of stack.log.read({ fromSeq: from.seq + 1, untilSeq: to.seq })) {
        const k = r.event.body.case ?? "unknown";
        out[k] = (out[k] ?? 0) + 1;
      }
      return out;
    };
    try {
      ctx.progress(`connecting ${nodes} nodes`);
      await fleet.start();
      await waitFor(
        "every node connected",
        async () => ((await stack.call("GET", "/v1/nodes")).nodes as unknown[]).length >= nodes,
        120_000,
      );
      const registered = await mark();
      const sessionBytes = registered.bytes / Math.max(1, registered.seq);
      await stack.call("PUT", "/v1/catalog", catalog("r1"));
      ctx.progress(`placing ${replicas} replicas`);
      await waitFor("every replica running", async () => (await running()) >= replicas, 120_000);

      ctx.progress(`steady state for ${steadyS} s`);
      const s0 = await mark();
      await new Promise((r) => setTimeout(r, steadyS * 1000));
      const s1 = await mark();
      const steadyKinds = await kinds(s0, s1);
      const steadySeconds = (s1.at - s0.at) / 1000;

      ctx.progress("a drain");
      const node = ((await stack.call("GET", "/v1/replicas")).replicas as Array<{ nodeIds: string[] }>)[0]
        ?.nodeIds[0];
      if (!node) throw new Error("no replica to drain a node of");
      const d0 = await mark();
      await stack.call("POST", `/v1/nodes/${node}/drain`, { reason: "growth model" });
      await waitFor(
        "the drained node empty and every replica running",
        async () =>
          (await running()) >= replicas &&
          !((await stack.call("GET", "/v1/replicas")).replicas as Array<{ nodeIds: string[] }>).some((r) =>
            r.nodeIds.includes(node),
          ),
        120_000,
      );
      await stack.call("POST", `/v1/nodes/${node}/uncordon`, {});
      const d1 = await mark();

      ctx.progress("a rollout");
      const r0 = await mark();
      await stack.call("PUT", "/v1/catalog", catalog("r2"));
      await waitFor(
        "the rollout done",
        async () => {
          const views = (await stack.call("GET", "/v1/rollouts")).rollouts as Array<{
            active: boolean;
            outdated: { replicas: number };
            draining: number;
          }>;
          return (
            (await running()) >= replicas &&
            views.every((v) => !v.active && v.outdated.replicas === 0 && v.draining === 0)
          );
        },
        180_000,
      );
      const r1 = await mark();

      // Per node and day at a real fleet's pace.
      const steadyBytesPerNodeDay = ((s1.bytes - s0.bytes) / nodes / steadySeconds) * (DAY_S / ACCELERATION);
      const steadyEventsPerNodeDay = ((s1.seq - s0.seq) / nodes / steadySeconds) * (DAY_S / ACCELERATION);
      const restartBytes = 2 * sessionBytes; // SessionClosed is small; SessionOpened carries the registration.
      const drainBytesPerNode = (d1.bytes - d0.bytes) / nodes;
      const rolloutBytesPerNode = (r1.bytes - r0.bytes) / nodes;
      const bytesPerNodeDay = steadyBytesPerNodeDay + restartBytes + drainBytesPerNode + rolloutBytesPerNode;
      const eventsPerNodeDay =
        steadyEventsPerNodeDay + 2 + (d1.seq - d0.seq) / nodes + (r1.seq - r0.seq) / nodes;
      const gib = 2 ** 30;
      return {
        params: {
          nodes,
          replicas,
          acceleration: ACCELERATION,
          steadySeconds: Math.round(steadySeconds),
          steadyEvents: s1.seq - s0.seq,
          steadyKinds,
          drainEvents: d1.seq - d0.seq,
          rolloutEvents: r1.seq - r0.seq,
          bytesPerSessionEvent: Math.round(sessionBytes),
        },
        figures: [
          figure("log growth per node per day", bytesPerNodeDay / 1024, "KiB"),
          figure("events per node per day", eventsPerNodeDay, "events"),
          figure("  of which steady state (usage, status, passes)", steadyBytesPerNodeDay / 1024, "KiB"),
          figure("  of which one agent restart", restartBytes / 1024, "KiB"),
          figure(
            "  of which the day's drain and rollout (per node)",
            (drainBytesPerNode + rolloutBytesPerNode) / 1024,
            "KiB",
          ),
          figure(
            `log growth per day, ${nodes.toLocaleString("en")} nodes`,
            (bytesPerNodeDay * nodes) / gib,
            "GiB",
          ),
          figure("log growth per day, 10,000 nodes (extrapolated)", (bytesPerNodeDay * 10_000) / gib, "GiB"),
        ],
        notes: [
          `${nodes} nodes at ${ACCELERATION}× pace; steady window ${Math.round(steadySeconds)} s (${Math.round(steadySeconds * ACCELERATION)} s of a real fleet): ${JSON.stringify(steadyKinds)}`,
          `a drain: ${d1.seq - d0.seq} events, ${d1.bytes - d0.bytes} bytes; a rollout of ${replicas} replicas: ${r1.seq - r0.seq} events, ${r1.bytes - r0.bytes} bytes`,
        ],
      };
    } finally {
      await fleet.stop().catch(() => {});
      await stack.close();
      await server.close();
    }
  },
};
