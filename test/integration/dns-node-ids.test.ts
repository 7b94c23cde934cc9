// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * Node ids are DNS names, end to end: simulated agents named
 * `gpu-1.dc1.example.com` and `gpu-2.dc1.example.com` register over mutual
 * TLS (certificate CN = that name, made by `llmgw certs`), a replica is
 * placed, the operator drains the first node by its name with the CLI, and
 * the log is replayed, listed and explained by that name. Every real part:
 * nats-server, a gateway, a `llmgw reconciler` process, the operator API and
 * the CLI. The dots never become subject levels.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { certsLayout, createCerts, type SimFleet } from "../../src/sim/index.js";
import { type NatsServer, startServer, tempDir } from "../harness/nats.js";
import { runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { readAll } from "../support/gateway.js";
import { eventually as eventualValue } from "../support/operator-api.js";
import { passViolations } from "../support/pass-invariants.js";
import { h100Profile, stackFleet, startStack } from "../support/stack.js";

const N1 = "gpu-1.dc1.example.com";
const N2 = "gpu-2.dc1.example.com";
const CATALOG = {
  models: [
    {
      name: "llama-3.1-8b",
      replicas: 1,
      profiles: [h100Profile("tp2", 2)],
    },
  ],
};

describe("node ids that are DNS names", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("register over mTLS, are placed, drained, replayed and filtered by, the id as typed", async () => {
    const certsDir = tempDir("dns-certs");
    await createCerts({ out: certsDir, nodes: [N1, N2] });
    const files = certsLayout(certsDir);
    const stack = await startStack(server.url, {
      name: "dns",
      gateway: {
        insecureDev: false,
        tls: {
          cert: await readFile(files.gatewayCert, "utf8"),
          key: await readFile(files.gatewayKey, "utf8"),
          clientCa: await readFile(files.ca, "utf8"),
        },
      },
      reconciler: { policy: "spread", commandTimeoutMs: 5000, suspectAfterMs: 10_000, lostAfterMs: 20_000 },
    });
    const { log, prefix, logFlags, why } = stack;
    const call = stack.request;
    let fleet: SimFleet | undefined;
    const ok = async (path: string): Promise<any> => {
      const r = await call(path);
      assert.equal(r.status, 200, `${path}: ${JSON.stringify(r.body)}`);
      return r.body;
    };
    const apiEnv = () => ({ LLMGW_API_URL: stack.api.url });
    try {
      fleet = stackFleet(stack.gw.url, {
        insecureDev: false,
        certsDir,
        nodes: 0,
        nodeIds: [N1, N2],
        gpusPerNode: 8,
        seed: 13,
      });
      await fleet.start();
      await eventually(
        async () => (await ok("/v1/nodes")).nodes.filter((n: any) => n.liveness === "connected").length === 2,
        { what: "both nodes connected" },
      );

      // Registered over mTLS under its own name, on one subject level.
      let records = await readAll(log);
      const opened = records.find(
        (r) => r.event.body.case === "sessionOpened" && r.event.body.value.nodeId === N1,
      );
      assert.ok(opened?.event.body.case === "sessionOpened");
      assert.equal(opened.event.body.value.identity, "mtls");
      assert.equal(opened.subject, `${prefix}.session.gpu-1_dc1_example_com`);
      assert.equal((await ok(`/v1/nodes/${N1}`)).node.nodeId, N1);

      // Placed: spread puts the one replica on the first of two empty nodes.
      const put = await call("/v1/catalog", {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(CATALOG),
      });
      assert.ok(put.status < 300, JSON.stringify(put.body));
      const running = async (on: string) => {
        const rs = (await ok("/v1/replicas")).replicas as any[];
        return rs.length === 1 && rs[0].phase === "running" && rs[0].nodeIds.join() === on
          ? rs[0]
          : undefined;
      };
      const waitFor = <T>(what: string, check: () => Promise<T | undefined>): Promise<T> =>
        eventualValue(check, what, 30_000).catch(async (err) => {
          throw new Error(`${(err as Error).message}${await why()}`);
        });
      const first = await waitFor(`the replica running on ${N1}`, () => running(N1));
      assert.equal(fleet.node(N1)!.shardList().length, 1);

      // Drained by name with the CLI: the replica moves to the other node, make-before-break.
      const drained = await runCli(["drain", N1, "--reason", "kernel upgrade"], { env: apiEnv() });
      assert.equal(drained.code, 0, drained.stderr);
      // The first line acknowledges the request; what the drain waits on may follow.
      assert.match(drained.stdout, /^gpu-1\.dc1\.example\.com draining \(log sequence \d+\)\n/);
      const moved = await waitFor(`the replica moved to ${N2}`, async () => {
        const r = await running(N2);
        return r && r.replicaId !== first.replicaId && fleet!.node(N1)!.shardList().length === 0
          ? r
          : undefined;
      });
      const view = (await ok(`/v1/nodes/${N1}`)).node;
      assert.equal(view.draining, true);
      assert.deepEqual(view.replicaIds, []);

      records = await readAll(log);
      const reportSeq = (replicaId: string, states: State[]) =>
        records.find(
          (r) =>
            r.event.body.case === "shardStatus" &&
            r.event.body.value.status?.replicaId === replicaId &&
            states.includes(r.event.body.value.status.state),
        )?.seq ?? Number.POSITIVE_INFINITY;
      const newRunning = reportSeq(moved.replicaId, [State.RUNNING]);
      const oldStopping = reportSeq(first.replicaId, [State.DRAINING, State.STOPPED]);
      assert.ok(Number.isFinite(oldStopping), `${first.replicaId} drained or stopped`);
      assert.ok(
        newRunning < oldStopping,
        `${moved.replicaId} ran (${newRunning}) before ${first.replicaId} stopped serving (${oldStopping})`,
      );
      const drainEvent = records.find((r) => r.event.body.case === "nodeDrainRequested");
      assert.equal(drainEvent?.subject, `${prefix}.operator.gpu-1_dc1_example_com`);
      // No subject ever got a level from a node id's dots.
      for (const r of records) {
        const levels = r.subject.slice(prefix.length + 1).split(".");
        assert.ok(levels.length <= 2, `${r.subject} has ${levels.length} levels`);
      }
      assert.deepEqual(passViolations(records), []);

      // Replayed by name: the node, drained, empty; the replica elsewhere.
      const replayed = await runCli(["replay", "--json", "--node", N1, ...logFlags]);
      assert.equal(replayed.code, 0, replayed.stderr);
      const state = JSON.parse(replayed.stdout).state;
      assert.deepEqual(Object.keys(state.inventory.nodes), [N1]);
      const whole = JSON.parse((await runCli(["replay", "--json", "--node", N2, ...logFlags])).stdout).state;
      assert.ok(whole.replicas.replicas[moved.replicaId], `${moved.replicaId} is listed under ${N2}`);

      // Filtered by name: the API's event list, the CLI's events and explain.
      const listed = (await ok(`/v1/events?node=${N1}&limit=1000`)).events as any[];
      const kinds = new Set(listed.map((e) => e.kind));
      for (const k of ["sessionOpened", "nodeDrainRequested", "reconcilePass", "shardStatus"]) {
        assert.ok(kinds.has(k), `${k} listed under node=${N1} (got ${[...kinds].join(", ")})`);
      }
      assert.ok(listed.every((e) => e.nodeIds.includes(N1)));
      assert.ok(!listed.some((e) => e.kind === "sessionOpened" && e.event.sessionOpened.nodeId === N2));

      const events = await runCli(["events", "--json", "--node", N1, ...logFlags]);
      assert.equal(events.code, 0, events.stderr);
      const lines = events.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      assert.ok(lines.length > 0);
      assert.ok(lines.every((l) => l.subject.endsWith(".gpu-1_dc1_example_com")));
      assert.ok(lines.some((l) => l.kind === "nodeDrainRequested"));

      const explained = await runCli(["explain", "node", N1, "--json", ...logFlags]);
      assert.equal(explained.code, 0, explained.stderr);
      const touches = JSON.parse(explained.stdout);
      assert.equal(touches.node, N1);
      assert.ok(touches.decisions.length > 0, "explain lists the decisions about the node");

      // Ids that are not DNS names: 400 from the API, exit 2 from the CLI, naming the rule; nothing written.
      const before = await log.lastSeq();
      for (const bad of ["a*b", "a>b", "a b", "UPPER", "g".repeat(254)]) {
        const path = `/v1/nodes/${encodeURIComponent(bad)}/cordon`;
        const r = await call(path, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{}",
        });
        assert.equal(r.status, 400, `${path}: ${JSON.stringify(r.body)}`);
        assert.match(r.body.error.message, /node id .*must be a DNS name \(RFC 1123\)/);
        const f = await call(`/v1/events?node=${encodeURIComponent(bad)}`);
        assert.equal(f.status, 400);
        assert.match(f.body.error.message, /node: .*must be a DNS name/);
      }
      const cli = await Promise.all([
        runCli(["cordon", "UPPER"], { env: apiEnv() }),
        runCli(["events", "--node", "a*b", ...logFlags]),
        runCli(["replay", "--node", "a b", ...logFlags]),
        runCli(["explain", "node", "a>b", ...logFlags]),
      ]);
      for (const [r, flag] of cli.map((r, i) => [r, ["<node>", "--node", "--node", "<id>"][i]] as const)) {
        assert.equal(r.code, 2, r.stderr);
        assert.equal(r.stderr.split("\n").filter(Boolean).length, 1, r.stderr);
        assert.ok(r.stderr.includes(`invalid ${flag}: node id`), r.stderr);
        assert.match(r.stderr, /must be a DNS name \(RFC 1123\)/);
      }
      assert.equal(await log.lastSeq(), before);
    } finally {
      await fleet?.stop();
      await stack.close();
    }
  });
});
