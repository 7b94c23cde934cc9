import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type Log, openLog } from "../../src/log/index.js";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { runCli } from "../support/cli.js";
import { Fleet, llama8b, llama70b, ofKind } from "../support/fleet.js";

describe("llmgw explain and what-if against a real log", () => {
  let server: NatsServer & { close(): Promise<void> };
  let log: Log;
  let flags: string[];
  let replicaId = "";
  let placedSeq = 0;
  const dir = tempDir("what-if");

  before(async () => {
    server = await startServer();
    const prefix = `t${Math.random().toString(36).slice(2, 8)}.evt`;
    const stream = uniqueStream();
    log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    flags = ["--nats", server.url, "--stream", stream, "--subject-prefix", prefix];
    // A recorded history under binpack: gpu-b1 already runs a small model, so the 70B lands there too.
    const f = new Fleet({ policy: "binpack" });
    f.catalog(llama8b(1));
    f.connect("gpu-b1", {
      running: [{ shard: "x-s0", replica: "x", model: "llama-3.1-8b", profile: "tp1", gpus: [0] }],
    });
    f.connect("gpu-c1");
    f.run();
    f.catalog(llama8b(1), llama70b(1));
    const out = f.step();
    const placed = ofKind(out.decisions, "replicaPlaced")[0];
    assert.deepEqual(placed?.chosen?.nodeIds, ["gpu-b1"]);
    replicaId = placed?.replicaId as string;
    placedSeq = f.state.seq;
    for (const e of f.events) {
      const a = await log.append(e.event);
      assert.equal(a.seq, e.seq, "the stream's sequences are the fleet's");
    }
  });
  after(async () => {
    await log?.jsm.streams.delete(log.stream).catch(() => {});
    await log?.close();
    await server?.close();
  });

  it("explain replica prints the decisions and commands that touched it, with sequence and time", async () => {
    const r = await runCli(["explain", "replica", replicaId, ...flags]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      new RegExp(`#\\s*${placedSeq}\\s+\\S+Z\\s+replicaCreated\\s+${replicaId} created`),
    );
    assert.match(r.stdout, /replicaPlaced\s+placed .* on gpu-b1 \[1,2,3,4\], binpack score/);
    assert.match(r.stdout, /command\s+start /);

    const json = await runCli(["explain", "replica", replicaId, "--json", ...flags]);
    const parsed = JSON.parse(json.stdout) as { decisions: Array<{ seq: number; kind: string }> };
    assert.deepEqual(
      parsed.decisions.map((d) => d.kind),
      ["replicaCreated", "replicaPlaced", "command"],
    );

    const earlier = await runCli(["explain", "replica", replicaId, "--at", String(placedSeq - 1), ...flags]);
    assert.equal(earlier.code, 0);
    assert.match(earlier.stdout, /no decision touched replica/);
  });

  it("explain node prints its adoption and what was placed on it", async () => {
    const r = await runCli(["explain", "node", "gpu-b1", ...flags]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /shardsAdopted\s+gpu-b1 registered .*adopted x-s0 of x/);
    assert.match(r.stdout, /replicaPlaced/);
    const bad = await runCli(["explain", "node", "gpu-b1", "--at", "yesterday-ish", ...flags]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--at must be a sequence number or a time/);
  });

  it("what-if shows where another policy would have placed, and writes nothing", async () => {
    const file = join(dir, "spread.yaml");
    writeFileSync(file, "policy: spread\n");
    const lastBefore = await log.lastSeq();
    const r = await runCli(["what-if", "--config", file, ...flags]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      new RegExp(
        `replica ${replicaId}: created; placed on gpu-b1 \\[1,2,3,4\\] \\(tp4\\) \\(record\\) vs created; placed on gpu-c1 \\[0,1,2,3\\] \\(tp4\\) \\(alternative\\)`,
      ),
    );
    assert.match(r.stdout, /pass\(es\) compared, 1 differ/);
    assert.equal(await log.lastSeq(), lastBefore, "what-if appends nothing");

    const same = join(dir, "same.json");
    writeFileSync(same, JSON.stringify({ policy: "binpack" }));
    const s = await runCli(["what-if", "--config", same, "--json", ...flags]);
    assert.equal(s.code, 0, s.stderr);
    assert.equal((JSON.parse(s.stdout) as { differing: number }).differing, 0);
  });

  it("what-if rejects an invalid config naming the field, with exit 2", async () => {
    const file = join(dir, "bad.yaml");
    writeFileSync(file, "policy: fastest\nlostAfterMs: -1\n");
    const r = await runCli(["what-if", "--config", file, ...flags]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /policy: /);
    assert.match(r.stderr, /lostAfterMs: /);
  });
});
