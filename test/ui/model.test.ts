/** The UI's state-to-view logic: pure functions of the API's answers. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, toJson } from "@bufbuild/protobuf";
import { EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import {
  cellView,
  eventWindow,
  mapRows,
  markLeft,
  nodeBadges,
  nvlinkDomainOfGpu,
  parseSse,
  podOf,
  positionLabel,
  replicaTraffic,
  rolloutLine,
  scaleMarks,
  shortModel,
  sortReplicas,
  stepSeq,
  summarize,
  trafficLine,
  visibleWindow,
  whatIfHighlights,
} from "../../src/operator/ui/model.ts";
import type { Gpu, Node, Replica } from "../../src/operator/ui/types.ts";

function gpu(index: number, shards: Gpu["shards"] = [], problems: string[] = []): Gpu {
  return {
    index,
    uuid: `GPU-${index}`,
    product: "NVIDIA H100 80GB HBM3",
    memoryTotalMb: 81920,
    memoryUsedMb: shards.length > 0 ? 73728 : 0,
    problems,
    faults: [],
    cordoned: false,
    cordonReason: "",
    shards,
  };
}

function node(id: string, over: Partial<Node> = {}, pod: string | null = "ib-pod-1"): Node {
  const gpus = over.gpus ?? Array.from({ length: 8 }, (_, i) => gpu(i));
  return {
    nodeId: id,
    liveness: "connected",
    agentVersion: "llmgw-sim/0.1.0",
    advertiseAddress: "",
    labels: {},
    cordoned: false,
    cordonReason: "",
    draining: false,
    nodeProblems: [],
    fabrics: [
      { name: `${id}-nvl`, kind: "nvlink", gpuIndices: gpus.map((g) => g.index) },
      ...(pod ? [{ name: pod, kind: "infiniband", gpuIndices: gpus.map((g) => g.index) }] : []),
    ],
    gpus,
    gpusTotal: gpus.length,
    gpusUsed: gpus.filter((g) => g.shards.length > 0).length,
    replicaIds: [],
    waitingOn: [],
    session: null,
    disconnectedSinceMs: null,
    lastCloseReason: "",
    lastChangeSeq: 1,
    ...over,
  };
}

const shard = (replicaId: string, state: string, model = "llama-3.3-70b") => ({
  replicaId,
  shardId: `${replicaId}.0`,
  model,
  state,
});

describe("UI model", () => {
  it("colours a GPU cell by its shard's state and labels it with model and replica", () => {
    const free = cellView(gpu(0));
    assert.equal(free.state, "free");
    assert.equal(free.label, "free");
    assert.deepEqual(free.replicaIds, []);

    const running = cellView(gpu(3, [shard("llama-3-3-70b-2", "running")]));
    assert.equal(running.state, "running");
    assert.equal(running.label, "llama 70b");
    assert.equal(running.sublabel, "…3-3-70b-2");
    assert.match(
      running.title,
      /GPU 3 · NVIDIA H100 80GB HBM3 · 72\/80 GiB\nllama-3.3-70b · llama-3-3-70b-2/,
    );

    // Make-before-break: the old shard draining and the new one starting on one GPU.
    const both = cellView(gpu(1, [shard("r-1", "draining"), shard("r-2", "starting")]));
    assert.equal(both.state, "draining");
    assert.equal(both.shared, true);
    assert.deepEqual(both.replicaIds, ["r-1", "r-2"]);

    assert.equal(cellView(gpu(0, [shard("r", "exploded")])).state, "other");
    const sick = cellView(gpu(2, [], ["Xid 79"]));
    assert.equal(sick.problem, true);
    assert.equal(sick.label, "problem");
    assert.match(sick.title, /problems: Xid 79/);
  });

  it("shortens model names to their family and size", () => {
    assert.equal(shortModel("llama-3.1-405b"), "llama 405b");
    assert.equal(shortModel("mixtral-8x22b"), "mixtra 8x22b");
    assert.equal(shortModel("embedder"), "embedder");
  });

  it("badges nodes for liveness, cordon, drain and GPU problems", () => {
    assert.deepEqual(nodeBadges(node("a")), []);
    assert.deepEqual(
      nodeBadges(node("a", { liveness: "suspect", cordoned: true, cordonReason: "firmware" })).map((b) => [
        b.kind,
        b.title,
      ]),
      [
        ["suspect", "no session for a while: takes no new work"],
        ["cordoned", "firmware"],
      ],
    );
    // A draining node is also cordoned; one badge says both.
    assert.deepEqual(
      nodeBadges(node("a", { cordoned: true, draining: true })).map((b) => b.text),
      ["draining"],
    );
    const sick = node("a", {
      liveness: "lost",
      gpus: [gpu(0, [], ["Xid 79"]), gpu(1, [], ["ECC"]), gpu(2)],
      nodeProblems: ["nvlink down"],
    });
    assert.deepEqual(
      nodeBadges(sick).map((b) => b.text),
      ["lost", "2 GPU problems", "node problem"],
    );
    assert.equal(nodeBadges(sick)[1]?.title, "GPU 0: Xid 79\nGPU 1: ECC");
  });

  it("shows a GPU's reported faults and its cordon on its cell and as node badges", () => {
    const faulty: Gpu = { ...gpu(3), faults: [{ kind: "xid", message: "Xid 79" }] };
    const fenced = { ...gpu(5), cordoned: true, cordonReason: "fan" };
    const n = node("a", { gpus: [gpu(0), faulty, fenced] });
    assert.deepEqual(
      nodeBadges(n).map((b) => [b.text, b.title]),
      [
        ["1 GPU problem", "GPU 3: xid: Xid 79"],
        ["1 GPU cordoned", "GPU 5: fan"],
      ],
    );
    assert.equal(cellView(faulty).label, "problem");
    assert.equal(cellView(faulty).problem, true);
    assert.equal(cellView(fenced).label, "cordoned");
    assert.match(cellView(fenced).title, /cordoned: fan/);
  });

  it("groups nodes by InfiniBand fabric with a header row each, nodes without one last", () => {
    const nodes = [
      node("b2", {}, "ib-pod-2"),
      node("solo", {}, null),
      node("a2"),
      node("a1", { gpus: [gpu(0, [shard("r", "running")]), gpu(1)] }),
      node("b1", {}, "ib-pod-2"),
    ];
    assert.equal(podOf(nodes[0] as Node), "ib-pod-2");
    assert.equal(podOf(nodes[1] as Node), "");
    assert.deepEqual(
      mapRows([node("n10", {}, "pod-10"), node("n9", {}, "pod-9"), node("n2", {}, "pod-9")]).map((r) =>
        r.type === "fabric" ? r.name : r.node.nodeId,
      ),
      ["pod-9", "n2", "n9", "pod-10", "n10"],
    );
    const rows = mapRows(nodes);
    assert.deepEqual(
      rows.map((r) =>
        r.type === "fabric" ? `[${r.name} ${r.nodes} ${r.gpusUsed}/${r.gpus}]` : r.node.nodeId,
      ),
      [
        "[ib-pod-1 2 1/10]",
        "a1",
        "a2",
        "[ib-pod-2 2 0/16]",
        "b1",
        "b2",
        "[no inter-node fabric 1 0/8]",
        "solo",
      ],
    );
    // Filtering by replica, model or node id; flagged nodes only.
    assert.deepEqual(
      mapRows(nodes, { text: "llama-3.3" }).flatMap((r) => (r.type === "node" ? [r.node.nodeId] : [])),
      ["a1"],
    );
    assert.deepEqual(
      mapRows([...nodes, node("c1", { cordoned: true })], { problemsOnly: true }).map((r) =>
        r.type === "node" ? r.node.nodeId : r.name,
      ),
      ["ib-pod-1", "c1"],
    );
  });

  it("tells which NVLink domain each GPU is in", () => {
    const n = node("a", {
      fabrics: [
        { name: "nvl-0", kind: "nvlink", gpuIndices: [3, 2, 1, 0] },
        { name: "nvl-1", kind: "nvlink", gpuIndices: [4, 5, 6] },
      ],
    });
    const d = nvlinkDomainOfGpu(n);
    assert.deepEqual(
      [0, 3, 4, 6, 7].map((i) => d.get(i) ?? -1),
      [0, 0, 1, 1, -1],
    );
  });

  it("renders only the rows in view, so 1,000 nodes stay a few dozen elements", () => {
    const rows = mapRows(
      Array.from({ length: 1000 }, (_, i) => node(`n${String(i).padStart(4, "0")}`, {}, `pod-${i % 10}`)),
    );
    assert.equal(rows.length, 1010);
    const top = visibleWindow(0, 700, 44, rows.length);
    assert.deepEqual(top, { start: 0, end: 23, padTop: 0, padBottom: (1010 - 23) * 44 });
    const mid = visibleWindow(44 * 500 + 10, 700, 44, rows.length);
    assert.equal(mid.start, 494);
    assert.equal(mid.end, 523);
    assert.equal(mid.padTop + (mid.end - mid.start) * 44 + mid.padBottom, rows.length * 44);
    const end = visibleWindow(44 * 2000, 700, 44, rows.length);
    assert.equal(end.end, 1010);
    assert.ok(end.start < end.end);
    assert.deepEqual(visibleWindow(0, 700, 44, 0), { start: 0, end: 0, padTop: 0, padBottom: 0 });
  });

  it("summarizes the fleet and lists replicas needing a look first", () => {
    const r = (replicaId: string, phase: Replica["phase"], model = "m"): Replica => ({
      replicaId,
      model,
      profile: "p",
      revision: "",
      createdMs: 0,
      phase,
      createdSeq: 1,
      shards: [],
      ready: phase === "running",
      lastFailure: null,
      pendingReason: "",
      replaces: "",
      replacedBy: "",
      drainReason: "",
      drainStartedMs: 0,
      restarts: 0,
      backoffUntilMs: 0,
      lastChangeSeq: 1,
      nodeIds: [],
      disruptionBlocked: "",
    });
    const replicas = [
      r("b", "running"),
      r("a", "running"),
      r("z", "pending"),
      r("c", "draining", "a"),
      r("d", "placed"),
    ];
    assert.deepEqual(
      sortReplicas(replicas).map((x) => x.replicaId),
      ["z", "c", "d", "a", "b"],
    );
    const s = summarize({
      nodes: [node("a", { gpus: [gpu(0, [shard("a", "running")]), gpu(1)] })],
      replicas,
    });
    assert.deepEqual(s, {
      nodes: 1,
      gpus: 2,
      gpusUsed: 1,
      replicas: { pending: 1, placed: 1, running: 2, draining: 1 },
    });
  });

  it("maps what-if differences onto the nodes they involve", () => {
    assert.equal(whatIfHighlights(null).size, 0);
    const h = whatIfHighlights({
      config: {},
      compared: 3,
      differing: 1,
      passes: [
        {
          seq: 10,
          nowMs: 0,
          differences: [
            {
              subject: "replica r-1",
              record: "placed on gpu-1",
              alternative: "placed on gpu-4",
              nodes: ["gpu-1", "gpu-4"],
            },
            { subject: "gateway gw", record: "x", alternative: "nothing", nodes: [] },
          ],
        },
      ],
    });
    assert.deepEqual([...h.keys()], ["gpu-1", "gpu-4"]);
    assert.deepEqual(h.get("gpu-4"), ["#10 replica r-1: placed on gpu-1 → placed on gpu-4"]);
  });

  it("steps and labels positions on the slider, and windows the event list", () => {
    assert.equal(stepSeq(5, -1, 10), 4);
    assert.equal(stepSeq(0, -1, 10), 0);
    assert.equal(stepSeq(10, 1, 10), 10);
    const t = Date.UTC(2026, 11, 1, 10, 0, 0, 123);
    assert.equal(positionLabel(7, t, 28), "#7 of 28 · 2026-12-01 10:00:00Z");
    assert.equal(positionLabel(28, t, 28), "#28 (live end) · 2026-12-01 10:00:00Z");
    assert.equal(positionLabel(0, 0, 0), "#0 (live end) · —");
    assert.deepEqual(eventWindow(50), { from: 1, to: 50 });
    assert.deepEqual(eventWindow(1000, 200), { from: 801, to: 1000 });
    assert.deepEqual(eventWindow(0), { from: 1, to: 1 });
  });

  it("parses server-sent events split across reads", () => {
    const a = parseSse('event: position\ndata: {"seq":1}\n\n: keepalive\n\nevent: position\ndata: {"se');
    assert.deepEqual(a.events, [{ event: "position", data: '{"seq":1}' }]);
    const b = parseSse(`${a.rest}q":2}\n\n`);
    assert.deepEqual(b.events, [{ event: "position", data: '{"seq":2}' }]);
    assert.equal(b.rest, "");
  });

  it("finds the autoscale decisions in a page of passes, as the API writes them (protobuf JSON)", () => {
    const pass = (seq: number, decisions: Array<{ explanation: string; kind: unknown }>) => ({
      seq,
      timeMs: 0,
      subject: "llmgw.evt.reconciler",
      kind: "reconcilePass",
      event: toJson(
        EventSchema,
        create(EventSchema, {
          id: `p-${seq}`,
          body: { case: "reconcilePass", value: { decisions: decisions as never } },
        }),
      ) as Record<string, unknown>,
    });
    const up = { model: "chat", from: 1, to: 3, metric: "queue_depth", value: 25, target: 10 };
    const rows = [
      pass(4, [
        {
          explanation: "created",
          kind: { case: "replicaCreated", value: { replicaId: "r", model: "chat" } },
        },
      ]),
      pass(9, [{ explanation: "chat scaled up 1 → 3: …", kind: { case: "autoscaleDecided", value: up } }]),
      pass(20, [
        {
          explanation: "chat scaled down 3 → 0",
          kind: { case: "autoscaleDecided", value: { model: "chat", from: 3 } },
        },
      ]),
    ];
    assert.deepEqual(scaleMarks(rows), [
      { seq: 9, model: "chat", from: 1, to: 3, explanation: "chat scaled up 1 → 3: …" },
      { seq: 20, model: "chat", from: 3, to: 0, explanation: "chat scaled down 3 → 0" },
    ]);
    assert.equal(markLeft(5, 20), 25);
    assert.equal(markLeft(30, 20), 100);
    assert.equal(markLeft(1, 0), 0);
  });
});

describe("rollout line", () => {
  const base = {
    model: "m",
    revision: "abcd1234",
    desired: 8,
    ready: 8,
    policy: { maxSurge: 1, maxUnavailable: 0, progressDeadlineMs: 600_000 },
    active: true,
    paused: false,
    pausedBy: "",
    pauseReason: "",
    stalled: null,
    startedSeq: 10,
    completedSeq: 0,
    current: { replicas: 3, ready: 2 },
    outdated: { replicas: 6, ready: 6 },
    draining: 1,
  };
  it("says new and old counts, and why a rollout waits; nothing when none runs", () => {
    assert.equal(rolloutLine(base), "m → abcd1234: 3 new (2 ready) / 6 old (6 ready), 1 draining · rolling");
    assert.match(
      rolloutLine({ ...base, stalled: { replicaId: "r", reason: "new replica r failed", seq: 12 } }) ?? "",
      /· stalled: new replica r failed$/,
    );
    assert.match(rolloutLine({ ...base, active: false, paused: true }) ?? "", /· paused$/);
    assert.equal(rolloutLine({ ...base, active: false }), null);
  });

  it("gives each replica its requests through the routers, and the rate between two reads", () => {
    const row = (replicaId: string, model: string, requests: number, inFlight: number, errors = 0) => ({
      replicaId,
      model,
      requests,
      inFlight,
      errors,
    });
    const first = {
      routers: [{ url: "http://r1", readAtMs: 10_000 }],
      replicas: [row("a", "m", 100, 2), row("b", "m", 50, 0)],
    };
    const once = replicaTraffic(first, null);
    assert.deepEqual(once.get("a"), { inFlight: 2, total: 100, errors: 0, perSecond: null });
    assert.equal(trafficLine(once.get("a")!), "2 in flight · 100 req");
    const second = {
      routers: [
        { url: "http://r1", readAtMs: 12_000 },
        { url: "http://r2", readAtMs: 11_000, error: "cannot read" },
      ],
      // b's counter went down (its router restarted): no negative rate.
      replicas: [row("a", "m", 120, 3, 1), row("b", "m", 10, 0), row("c", "m", 4, 1)],
    };
    const t = replicaTraffic(second, first);
    assert.deepEqual(t.get("a"), { inFlight: 3, total: 120, errors: 1, perSecond: 10 });
    assert.equal(t.get("b")?.perSecond, 0);
    assert.equal(t.get("c")?.perSecond, 2);
    assert.equal(trafficLine(t.get("a")!), "3 in flight · 120 req · 10/s · 1 failed");
    assert.equal(trafficLine(t.get("c")!), "1 in flight · 4 req · 2.0/s");
  });
});
