// biome-ignore-all lint/suspicious/noExplicitAny: response bodies are loosely typed JSON, checked by the assertions
/**
 * The API endpoints the web UI uses, against a real nats-server: the fleet at
 * a sequence or a time (FleetHistory), the live position stream, filtered
 * and decoded events, a replica's history and the decision behind it,
 * what-if, the static UI files; and bad input answered with 400 and a message.
 */
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { FleetHistory } from "../../src/operator/index.js";
import { canonicalJson, foldFleet } from "../../src/projections/index.js";
import { tempDir } from "../harness/nats.js";
import { apiSuite, TOKEN } from "../support/operator-api.js";

describe("the UI's API endpoints against a real nats-server", () => {
  const uiDir = tempDir("ui");
  mkdirSync(join(uiDir, "assets"));
  writeFileSync(join(uiDir, "index.html"), "<!doctype html><title>llmgw fleet</title>");
  writeFileSync(join(uiDir, "assets", "index-abc.js"), "console.log('ui')");
  const api = apiSuite({ uiDir });

  it("answers the fleet at a sequence and at a time, and refuses bad positions", async () => {
    const at4 = await api.fx.call("/v1/fleet?at=4");
    assert.equal(at4.status, 200);
    assert.equal(at4.body.seq, 4);
    assert.equal(at4.body.lastSeq, api.last);
    assert.deepEqual(
      at4.body.nodes.map((n: any) => n.nodeId),
      ["gpu-a1", "gpu-a2", "gpu-b1"],
    );
    assert.deepEqual(at4.body.replicas, []);
    // The time of event 6 (the pass) gives the fleet after it, with its placements.
    const ev = await api.fx.call("/v1/events?from=6&to=6");
    const t6 = new Date(ev.body.events[0].timeMs).toISOString();
    const byTime = await api.fx.call(`/v1/fleet?time=${encodeURIComponent(t6)}`);
    assert.equal(byTime.status, 200);
    assert.ok(byTime.body.seq >= 6, `seq at ${t6} is ${byTime.body.seq}`);
    assert.equal(byTime.body.replicas.length, 3);

    for (const [q, field] of [
      ["at=-1", "at"],
      ["at=x", "at"],
      ["time=yesterday", "time"],
      ["at=3&time=2026-01-01T00:00:00Z", "either"],
      ["seq=3", "seq"],
    ] as const) {
      const r = await api.fx.call(`/v1/fleet?${q}`);
      assert.equal(r.status, 400, q);
      assert.equal(r.body.error.code, "invalid-argument");
      assert.match(r.body.error.message, new RegExp(field), q);
    }
  });

  it("folds a jump from the nearest state it already has, with the same state as a fresh fold", async () => {
    const history = new FleetHistory(api.fx.log, { checkpointEvery: 2, maxAnchors: 2, maxRecent: 2 });
    const records = [];
    for await (const r of api.fx.log.read({ untilSeq: api.last })) records.push(r);
    for (const seq of [5, 3, 7, 6, 5, 99]) {
      const state = await history.at(seq);
      const want = foldFleet(records.slice(0, Math.min(seq, api.last)));
      assert.equal(canonicalJson(state), canonicalJson(want), `at ${seq}`);
    }
    assert.equal(history.stats.fromStart, 1, "only the first jump folds from the start");
    // Anchors at 2, 4, then 6: one too many, so the spacing doubled and only 4 is kept.
    assert.equal(history.spacing, 4);
    // 5 folds 5 events; 3 one from the anchor at 2; 7 two from 5; 6 two from 4; 5 at most one; 99 is 7, held.
    assert.ok(history.stats.folded <= 11, `folded ${history.stats.folded} events`);
  });

  it("streams the live position as server-sent events", async () => {
    const ctl = new AbortController();
    const res = await fetch(`${api.fx.api.url}/v1/stream`, {
      headers: { authorization: `Bearer ${TOKEN}` },
      signal: ctl.signal,
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let text = "";
    while (!text.includes("\n\n")) text += new TextDecoder().decode((await reader.read()).value);
    ctl.abort();
    assert.match(text, new RegExp(`^event: position\\ndata: \\{"seq":${api.last},"timeMs":\\d+\\}`));
    assert.equal((await api.fx.call("/v1/stream", { token: null })).status, 401);
  });

  it("filters and decodes events by node, replica and kind", async () => {
    const byNode = await api.fx.call("/v1/events?node=gpu-b1&limit=1000");
    assert.equal(byNode.status, 200);
    assert.deepEqual(
      byNode.body.events.map((e: any) => e.kind),
      ["sessionOpened", "reconcilePass", "shardStatus"],
    );
    assert.ok(byNode.body.events.every((e: any) => e.nodeIds.includes("gpu-b1")));
    const byReplica = await api.fx.call("/v1/events?replica=r-70b-2");
    assert.deepEqual(
      byReplica.body.events.map((e: any) => e.seq),
      [6],
    );
    const byKind = await api.fx.call("/v1/events?kind=shardStatus,catalogChanged");
    assert.deepEqual(
      byKind.body.events.map((e: any) => e.kind),
      ["catalogChanged", "shardStatus"],
    );
    assert.equal(byKind.body.events[1].text, "gpu-b1 shard r-70b-1.0 of r-70b-1: running");
    const range = await api.fx.call("/v1/events?from=2&to=3");
    assert.deepEqual(
      range.body.events.map((e: any) => e.seq),
      [2, 3],
    );
    assert.match(range.body.events[0].text, /^gpu-a1 session \S+ on gw-1 \(.*\): 8 GPU\(s\)/);

    for (const [q, word] of [
      ["kind=bogus", 'unknown event kind "bogus"'],
      ["node=a_b", 'node: "a_b" must be a DNS name'],
      ["node=A.b", 'node: "A.b" must be a DNS name'],
      ["replica=%20", "replica"],
      ["from=5&to=2", "from \\(5\\) must not be after to \\(2\\)"],
    ] as const) {
      const r = await api.fx.call(`/v1/events?${q}`);
      assert.equal(r.status, 400, q);
      assert.match(r.body.error.message, new RegExp(word), q);
    }
  });

  it("explains a placement with its runners-up and a pending replica with the nodes ruled out per reason", async () => {
    const placed = await api.fx.call("/v1/replicas/r-405b-1/explain");
    assert.equal(placed.status, 200);
    assert.deepEqual(placed.body.placement.chosen, { nodeIds: ["gpu-a1", "gpu-a2"], score: 0.75 });
    assert.equal(placed.body.placement.policy, "binpack");
    assert.equal(placed.body.pending, null);
    const pending = await api.fx.call("/v1/replicas/r-70b-2/explain");
    assert.equal(pending.body.replica.phase, "pending");
    assert.deepEqual(pending.body.pending.ruledOut, [{ reason: "cordoned", nodes: 3 }]);
    assert.equal(pending.body.pending.nodesConsidered, 3);
    // Before the pass that created it, the log up to there does not know the replica.
    const before = await api.fx.call("/v1/replicas/r-70b-2/explain?at=5");
    assert.equal(before.status, 404);
    const atPass = await api.fx.call("/v1/replicas/r-70b-2/explain?at=6");
    assert.equal(atPass.body.seq, 6);
    assert.equal(atPass.body.pending.nodesFit, 0);
    assert.equal((await api.fx.call("/v1/replicas/r-70b-2/explain?at=x")).status, 400);
    assert.equal((await api.fx.call("/v1/replicas/nope/explain")).status, 404);
  });

  it("tells a replica's history: created, placed, running", async () => {
    const h = await api.fx.call("/v1/replicas/r-70b-1/history");
    assert.equal(h.status, 200);
    assert.deepEqual(
      h.body.history.map((e: any) => e.kind),
      ["created", "placed", "running"],
    );
    assert.equal(h.body.history[2].nodeId, "gpu-b1");
    assert.equal((await api.fx.call("/v1/replicas/nope/history")).status, 404);
    assert.equal((await api.fx.call("/v1/replicas/bad%20id/history")).status, 400);
  });

  it("runs what-if over the history and refuses a bad config with the field named", async () => {
    const ok = await api.fx.call("/v1/what-if", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ config: { policy: "spread" }, fromSeq: 1 }),
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.compared, 1);
    assert.equal(ok.body.config.policy, "spread");
    assert.ok(ok.body.passes.length <= 1);
    for (const d of ok.body.passes.flatMap((p: any) => p.differences)) assert.ok(Array.isArray(d.nodes));

    for (const [body, word] of [
      [{ config: { policy: "fastest" } }, "config.policy"],
      [{ config: { polcy: "spread" } }, "polcy"],
      [{ config: {}, fromSeq: 9, toSeq: 2 }, "fromSeq \\(9\\) must not be after toSeq \\(2\\)"],
      [{ config: {}, fromSeq: "one" }, "fromSeq"],
      [{ config: {}, extra: 1 }, "extra"],
    ] as const) {
      const r = await api.fx.call("/v1/what-if", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.match(r.body.error.message, new RegExp(word), JSON.stringify(r.body));
    }
  });

  it("serves the built UI without a token, and nothing else without one", async () => {
    const page = await api.fx.call("/", { token: null });
    assert.equal(page.status, 200);
    assert.match(page.body, /llmgw fleet/);
    const asset = await api.fx.call("/assets/index-abc.js", { token: null });
    assert.equal(asset.status, 200);
    assert.match(asset.headers.get("cache-control") ?? "", /immutable/);
    assert.equal((await api.fx.call("/assets/missing.js", { token: null })).status, 404);
    assert.equal((await api.fx.call("/v1/nodes", { token: null })).status, 401);
  });
});
