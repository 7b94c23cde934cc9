// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * The real node agent when things go wrong, with every real part of the
 * control plane (nats-server, gateways, a `llmgw reconciler` process, the
 * operator API): an engine that crashes is reported FAILED with its exit
 * code and last output and replaced; memory a foreign process holds keeps
 * placement off that GPU until it is freed; an Xid in the kernel log takes
 * the GPU out of service and its replica moves; a node drain asks the
 * engine's drain hook and ends at the deadline, an engine that ignores
 * SIGTERM killed after the grace; a gateway killed or drained and the agent
 * goes on at the next one, its engine untouched.
 */
import assert from "node:assert/strict";
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import {
  commandsFor,
  engineGpus,
  engineRecord,
  firstStatus,
  pidAlive,
  shardStatuses,
  startAgent,
  until,
  writeAgentCerts,
  writeAgentConfig,
  writeGpus,
} from "../support/agent-process.js";
import {
  addAgent,
  MODEL,
  nodeView,
  registered,
  runningShards,
  startNode,
  tp1Catalog,
  withAgentWorld,
} from "../support/agent-world.js";
import { makeTestCerts, type TestCerts } from "../support/certs.js";
import { type GatewayProcess, readAll, spawnGateway } from "../support/gateway.js";

describe("llmgw agent under faults (real processes)", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("reports a crashed engine FAILED with its exit code and last output; the replacement runs", async () => {
    await withAgentWorld(
      server,
      { name: "agcrash", reconciler: { crashBackoffBaseMs: 500, cooldownMs: 0 } },
      async (w) => {
        const node = "gpu-crash";
        await startNode(w, node, { gpus: [{}, {}], config: { startDelayMs: 300 } });
        // The first engine crashes 300 ms after it is ready; the next one finds the marker and runs.
        await w.stack.call(
          "PUT",
          "/v1/catalog",
          tp1Catalog(1, {
            engineArgs: [
              "--crash-after-ms",
              "300",
              "--exit-code",
              "134",
              "--crash-once",
              join(w.dir, "crashed"),
            ],
          }),
        );
        const failed = await until(
          "the crashed shard FAILED in the log",
          async () => firstStatus(await readAll(w.stack.log), node, State.FAILED),
          { timeoutMs: 30_000, why: w.why },
        );
        const crashed = failed.status.shardId;
        assert.equal(failed.status.exitCode, 134, "the engine's exit code");
        assert.match(failed.status.lastOutput, /CUDA error: an illegal memory access was encountered/);
        assert.ok(
          firstStatus(await readAll(w.stack.log), node, State.RUNNING, crashed),
          "the engine had been RUNNING before it crashed",
        );
        assert.ok(!pidAlive(engineRecord(w.dir, crashed).pid), "the crashed engine is gone");

        const replacement = await until(
          "a replacement shard RUNNING",
          async () => (await runningShards(w, node)).find((x) => x.status.shardId !== crashed),
          { timeoutMs: 40_000, why: w.why },
        );
        assert.ok(replacement.seq > failed.seq, "the replacement runs after the crash");
        assert.ok(pidAlive(engineRecord(w.dir, replacement.status.shardId).pid));
        const recs = await readAll(w.stack.log);
        assert.equal(
          commandsFor(recs, replacement.status.shardId, failed.seq).filter((c) => c.action.case === "start")
            .length,
          1,
          "one start for the replacement, after the failure",
        );
        const replicas = (await w.stack.call("GET", "/v1/replicas")).replicas as any[];
        const live = replicas.filter((r) => r.model === MODEL);
        assert.equal(live.length, 1, "one replica: the crashed one was replaced, not added to");
        assert.ok(live[0].restarts >= 1 || live[0].lastFailure, JSON.stringify(live[0]));
      },
    );
  });

  it("keeps placement off memory a foreign process holds, and uses the GPU once it is freed", async () => {
    await withAgentWorld(server, { name: "agmem" }, async (w) => {
      const node = "gpu-mem";
      // 70,000 of 81,559 MiB held by a process the agent did not start: 16 GiB does not fit.
      await startNode(w, node, { gpus: [{ memoryUsedMb: 70_000 }, {}], config: { startDelayMs: 200 } });
      assert.equal((await nodeView(w.stack, node)).gpus[0].memoryUsedMb, 70_000);
      await w.stack.call("PUT", "/v1/catalog", tp1Catalog(2));
      const first = await until("one shard RUNNING", async () => (await runningShards(w, node))[0], {
        timeoutMs: 30_000,
        why: w.why,
      });
      assert.deepEqual(engineGpus(w.dir, first.status.shardId), [1]);
      const pending = await until(
        "the second replica pending for want of memory",
        async () =>
          ((await w.stack.call("GET", "/v1/replicas")).replicas as any[]).find(
            (r) => r.model === MODEL && r.phase === "pending" && r.pendingReason !== "",
          ),
        { timeoutMs: 20_000, why: w.why },
      );
      assert.equal((await runningShards(w, node)).length, 1, "nothing started on the occupied GPU");

      // The foreign process exits; the next samples say so and the replica is placed there.
      writeGpus(w.dir, [{ memoryUsedMb: 0 }, {}]);
      const second = await until(
        "a second shard RUNNING",
        async () => (await runningShards(w, node)).find((x) => x.status.shardId !== first.status.shardId),
        { timeoutMs: 30_000, why: async () => `\npending was: ${pending.pendingReason}${await w.why()}` },
      );
      assert.deepEqual(engineGpus(w.dir, second.status.shardId), [0]);
    });
  });

  it("takes a GPU with an Xid in the kernel log out of service; its replica moves to the other GPU", async () => {
    // A drain without a drain hook lets the engine serve until the deadline: a short one.
    await withAgentWorld(server, { name: "agxid", reconciler: { drainDeadlineMs: 1500 } }, async (w) => {
      const node = "gpu-xid";
      writeFileSync(join(w.dir, "kmsg"), "6,1,1,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n");
      await startNode(w, node, { gpus: [{}, {}], config: { startDelayMs: 200 } });
      await w.stack.call("PUT", "/v1/catalog", tp1Catalog(1));
      const first = await until("the shard RUNNING", async () => (await runningShards(w, node))[0], {
        timeoutMs: 30_000,
        why: w.why,
      });
      const gpu = engineGpus(w.dir, first.status.shardId)[0]!;
      // The fake nvidia-smi puts GPU i on bus 0x18 + 0x10·i.
      const bus = (0x18 + gpu * 0x10).toString(16);
      appendFileSync(
        join(w.dir, "kmsg"),
        `4,2,2,-;NVRM: Xid (PCI:0000:${bus}:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n`,
      );
      const faulty = await until(
        `GPU ${gpu} reported with the Xid`,
        async () => {
          const g = (await nodeView(w.stack, node)).gpus[gpu];
          return g.faults.some(
            (f: any) => f.kind === "xid" && /Xid 79: GPU has fallen off the bus/.test(f.message),
          )
            ? g
            : undefined;
        },
        { timeoutMs: 20_000, why: w.why },
      );
      assert.ok(faulty);
      const moved = await until(
        "a shard RUNNING on the other GPU",
        async () => (await runningShards(w, node)).find((x) => x.status.shardId !== first.status.shardId),
        { timeoutMs: 40_000, why: w.why },
      );
      assert.deepEqual(engineGpus(w.dir, moved.status.shardId), [1 - gpu]);
      await until(
        "the shard on the faulty GPU stopped",
        async () =>
          shardStatuses(await readAll(w.stack.log), node).some(
            (x) =>
              x.status.shardId === first.status.shardId &&
              (x.status.state === State.STOPPED || x.status.state === State.FAILED),
          )
            ? true
            : undefined,
        { timeoutMs: 30_000, why: w.why },
      );
    });
  });

  it("drains a node: the engine's drain hook, then at the deadline SIGTERM, ignored, and SIGKILL after the grace", async () => {
    const drainDeadlineMs = 4000;
    await withAgentWorld(server, { name: "agdrain", reconciler: { drainDeadlineMs } }, async (w) => {
      const nodes = ["gpu-drain-a", "gpu-drain-b"];
      for (const node of nodes) {
        const dir = join(w.dir, node);
        mkdirSync(dir);
        writeGpus(dir, [{}]);
        writeAgentConfig(dir, { startDelayMs: 200, drainHook: true, stopGraceSeconds: 1 });
        addAgent(w, { nodeId: node }, dir);
      }
      for (const node of nodes) await registered(w, node, 1);
      // A request waiting that never ends: the drain runs to its deadline.
      await w.stack.call(
        "PUT",
        "/v1/catalog",
        tp1Catalog(1, { engineArgs: ["--ignore-sigterm", "--waiting", "1"] }),
      );
      const running = await until(
        "the shard RUNNING",
        async () => {
          for (const node of nodes) {
            const r = (await runningShards(w, node))[0];
            if (r) return { node, ...r };
          }
          return undefined;
        },
        { timeoutMs: 30_000, why: w.why },
      );
      const from = running.node;
      const to = nodes.find((n) => n !== from)!;
      const enginePid = engineRecord(join(w.dir, from), running.status.shardId).pid;
      await w.stack.call("POST", `/v1/nodes/${from}/drain`, {});

      // Make-before-break: the replacement on the other node runs first.
      await until("the replacement RUNNING on the other node", async () => (await runningShards(w, to))[0], {
        timeoutMs: 30_000,
        why: w.why,
      });
      const drainCmd = await until(
        "a drain command for the old shard",
        async () => {
          for (const r of await readAll(w.stack.log)) {
            if (r.event.body.case !== "reconcilePass") continue;
            const c = r.event.body.value.commands.find(
              (c) => c.action.case === "drain" && c.action.value.shardId === running.status.shardId,
            );
            if (c?.action.case === "drain") return c.action.value;
          }
          return undefined;
        },
        { timeoutMs: 20_000, why: w.why },
      );
      const deadline = Number(drainCmd.deadlineUnixMs);
      const ended = await until(
        "the drained shard's engine ended",
        async () =>
          shardStatuses(await readAll(w.stack.log), from).find(
            (x) =>
              x.status.shardId === running.status.shardId &&
              (x.status.state === State.STOPPED || x.status.state === State.FAILED),
          ),
        { timeoutMs: drainDeadlineMs + 20_000, why: w.why },
      );
      assert.ok(!pidAlive(enginePid), "the engine that ignored SIGTERM is gone");
      assert.match(ended.status.lastOutput, /fake-engine: draining/, "the drain hook was asked first");
      assert.match(ended.status.lastOutput, /ignoring SIGTERM/, "SIGTERM came, and was ignored");
      // It served until the deadline, then had its grace; liveness only past that.
      assert.ok(
        ended.ms >= deadline + 1000 - 250,
        `the engine ended ${deadline + 1000 - ended.ms} ms before the deadline plus the 1 s grace`,
      );
      assert.ok(ended.ms <= deadline + 1000 + 10_000, "the drain hung well past its deadline and grace");
    });
  });

  describe("gateways", () => {
    let certs: TestCerts;
    before(() => {
      certs = makeTestCerts();
    });

    it("goes on at the next gateway when one is killed or drained, its engine untouched; a rotated certificate is used without a restart", async () => {
      await withAgentWorld(server, { name: "aggw" }, async (w) => {
        const node = "gpu-gw";
        const s = w.stack;
        const retryAfterMs = 3000;
        const gws = new Map<string, GatewayProcess>();
        try {
          for (const id of ["gw-a", "gw-b", "gw-c"])
            gws.set(
              id,
              await spawnGateway(
                [
                  "--id",
                  id,
                  "--nats",
                  s.logFlags[1]!,
                  "--stream",
                  s.stream,
                  "--subject-prefix",
                  s.prefix,
                  "--lease-bucket",
                  s.gatewaysBucket,
                  "--reconnect-after",
                  String(retryAfterMs),
                ],
                certs,
              ),
            );
          const urls = [...gws.values()].map((g) => g.url);
          writeGpus(w.dir, [{}]);
          writeAgentConfig(w.dir, { startDelayMs: 200 });
          // A certificate the gateways' CA did not sign: refused until the files are replaced.
          const tls = writeAgentCerts(w.dir, certs.foreignClient(node), certs.ca);
          const agent = startAgent(w.dir, { gateways: urls, nodeId: node, tls });
          w.agents.push(agent);
          const why = async () =>
            `${[...gws].map(([id, g]) => `\n${id}:\n${g.output().slice(-1500)}`).join("")}${await w.why()}`;
          await until(
            "the agent refused for its certificate",
            async () => (/unauthenticated.*did not verify/.test(agent.output()) ? true : undefined),
            { timeoutMs: 20_000, why },
          );
          assert.equal(await nodeView(s, node), undefined, "no registration with an unverified certificate");
          writeAgentCerts(w.dir, certs.client(node), certs.ca);
          const sessionOn = async (afterSeq: number, what: string, pred: (gatewayId: string) => boolean) =>
            until(
              what,
              async () =>
                (await readAll(s.log)).find(
                  (r) =>
                    r.seq > afterSeq &&
                    r.event.body.case === "sessionOpened" &&
                    r.event.body.value.nodeId === node &&
                    pred(r.event.body.value.gatewayId),
                ),
              { timeoutMs: 40_000, why },
            );
          const first = await sessionOn(0, "the agent registered with the rotated certificate", () => true);
          assert.equal(agent.proc.exitCode, null, "the same agent process");
          const gatewayOf = (r: typeof first) =>
            r.event.body.case === "sessionOpened" ? r.event.body.value.gatewayId : "";

          await s.call("PUT", "/v1/catalog", tp1Catalog(1));
          const running = await until("the shard RUNNING", async () => (await runningShards(w, node))[0], {
            timeoutMs: 30_000,
            why,
          });
          const shardId = running.status.shardId;
          const enginePid = engineRecord(w.dir, shardId).pid;

          // The agent's gateway dies without a word: the agent goes on at another.
          const killed = gatewayOf(first);
          gws.get(killed)!.proc.kill("SIGKILL");
          await gws.get(killed)!.exited;
          const second = await sessionOn(
            first.seq,
            "the agent's session on another gateway",
            (id) => id !== killed,
          );
          const reg =
            second.event.body.case === "sessionOpened" ? second.event.body.value.registration! : undefined;
          assert.deepEqual(
            reg!.runningShards.map((x) => [x.shardId, x.state]),
            [[shardId, State.RUNNING]],
            "the new session registers the running shard",
          );

          // That gateway drains (SIGTERM): Reconnect with retry_after; the agent waits that long,
          // then goes on at the one left.
          const drained = gatewayOf(second);
          const drainedAt = Date.now();
          gws.get(drained)!.proc.kill("SIGTERM");
          const third = await sessionOn(
            second.seq,
            "the agent's session on the last gateway",
            (id) => id !== killed && id !== drained,
          );
          const back = Number(third.event.timeUnixMs) - drainedAt;
          assert.ok(
            back >= retryAfterMs - 100,
            `the agent came back ${back} ms after the Reconnect, sooner than its retry_after of ${retryAfterMs} ms`,
          );
          await until(
            "a reconcile pass after the last session",
            async () =>
              (await readAll(s.log)).some((r) => r.seq > third.seq && r.event.body.case === "reconcilePass")
                ? true
                : undefined,
            { timeoutMs: 30_000, why },
          );
          assert.deepEqual(
            commandsFor(await readAll(s.log), shardId, running.seq),
            [],
            "no start, stop or drain for the shard across two gateway changes",
          );
          assert.equal(engineRecord(w.dir, shardId).pid, enginePid, "the engine was not started again");
          assert.ok(pidAlive(enginePid), "the same engine still runs");
          const r = ((await s.call("GET", "/v1/replicas")).replicas as any[]).find((x) => x.model === MODEL);
          assert.equal(r.ready, true, "the replica is still ready");
        } finally {
          for (const g of gws.values()) g.proc.kill("SIGKILL");
        }
      });
    });
  });
});
