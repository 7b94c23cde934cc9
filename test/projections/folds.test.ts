import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { EventSchema, Liveness, SessionClosed_Reason } from "../../src/gen/llmgw/v1/events_pb.js";
import {
  canonicalJson,
  evolveFleet,
  type FleetState,
  fleetProjection,
  foldFleet,
  initialFleet,
} from "../../src/projections/index.js";
import { fleetChurn } from "../support/fleet-churn.js";
import { command, decide, EventFactory, h100Node, llamaCatalog, s70 } from "../support/fleet-events.js";
import { given, timeOf } from "./gwt.js";

const M70 = "llama-3.3-70b";
/** Everything except the bookkeeping of where the fold is. */
const content = (s: FleetState) => canonicalJson({ ...s, seq: 0, timeMs: 0 });

/** a1 connected on s-1, the 70B catalog, and r1 placed on a1 gpus 0-3 with start command c-1. */
function placedOnA1(f = new EventFactory()) {
  return [
    f.catalog(llamaCatalog(1, 0)),
    f.sessionOpened("a1", "s-1", "gw-1"),
    f.pass(
      [
        decide.created("r1", M70),
        decide.placed("r1", M70, "tp4", [{ shard: "r1.0", node: "a1", session: "s-1", gpus: [0, 1, 2, 3] }]),
      ],
      [command.start("c-1", "a1", "s-1", s70("r1.0", "r1", [0, 1, 2, 3]))],
    ),
  ];
}

describe("inventory fold", () => {
  it("an empty log is a fleet with no nodes, no gateways, no catalog", () => {
    const s = initialFleet();
    assert.deepEqual(JSON.parse(JSON.stringify(s.inventory)), { nodes: {}, gateways: {} });
    assert.deepEqual(s.replicas.catalog.models, []);
    assert.equal(s.seq, 0);
  });

  it("sessionOpened: a node that registers running nothing is connected with its GPUs and no shards", () => {
    const f = new EventFactory();
    const { after, whenSeq } = given().when(f.sessionOpened("a1", "s-1", "gw-1", h100Node("a1")));
    const n = after.inventory.nodes.get("a1")!;
    assert.equal(n.liveness, "connected");
    assert.equal(n.session?.sessionId, "s-1");
    assert.equal(n.session?.gatewayId, "gw-1");
    assert.equal(n.session?.openedSeq, whenSeq);
    assert.equal(n.session?.openedAtMs, timeOf(whenSeq));
    assert.deepEqual(n.session?.registeredShards, []);
    assert.equal(n.gpus.length, 8);
    assert.equal(n.gpus[0]?.memoryTotalMb, 80 * 1024);
    assert.deepEqual(
      n.fabrics.map((x) => x.kind),
      ["nvlink", "infiniband"],
    );
    assert.deepEqual(after.replicas.replicas.keys(), []);
  });

  it("sessionOpened: running shards are recorded as the adoption input; the fold adopts nothing itself", () => {
    const f = new EventFactory();
    const reg = h100Node("a1", { running: [{ ...s70("r9.0", "r9", [4, 5, 6, 7]) }] });
    const { after } = given().when(f.sessionOpened("a1", "s-1", "gw-1", reg));
    assert.deepEqual(after.inventory.nodes.get("a1")?.session?.registeredShards, [
      {
        shardId: "r9.0",
        replicaId: "r9",
        model: M70,
        profile: "tp4",
        gpuIndices: [4, 5, 6, 7],
        state: "running",
        endpoint: "",
      },
    ]);
    assert.equal(after.replicas.replicas.size, 0);
  });

  it("sessionClosed: the current session closing disconnects the node at the stream time", () => {
    const f = new EventFactory();
    const { after, whenSeq } = given(f.sessionOpened("a1", "s-1", "gw-1")).when(
      f.sessionClosed("a1", "s-1", "gw-1", SessionClosed_Reason.SILENT),
    );
    const n = after.inventory.nodes.get("a1")!;
    assert.equal(n.session, null);
    assert.equal(n.liveness, "disconnected");
    assert.equal(n.disconnectedSinceMs, timeOf(whenSeq));
    assert.equal(n.lastCloseReason, "silent");
    assert.equal(n.lastSessionId, "s-1");
  });

  describe("a session superseded mid-stream", () => {
    const f = new EventFactory();
    const history = [
      ...placedOnA1(f),
      f.sessionOpened("a1", "s-2", "gw-2", h100Node("a1", { usedGib: [1] })),
    ];

    it("the newest session is current", () => {
      const { after } = given(...history).when();
      assert.equal(after.inventory.nodes.get("a1")?.session?.sessionId, "s-2");
      assert.equal(after.inventory.nodes.get("a1")?.session?.gatewayId, "gw-2");
    });

    it("a late close of the old session does not disconnect the node", () => {
      const { before, after } = given(...history).when(
        f.sessionClosed("a1", "s-1", "gw-1", SessionClosed_Reason.SUPERSEDED),
      );
      assert.equal(after.inventory.nodes.get("a1")?.liveness, "connected");
      assert.equal(content(after), content(before));
    });

    it("events of the old session are ignored: usage, hardware, shard status, command result", () => {
      const { before, after } = given(...history).when(
        f.usage("a1", "s-1", [80, 80, 80, 80, 80, 80, 80, 80], ["stale problem"]),
        f.hardwareChanged("a1", "s-1", h100Node("a1", { gpuProblems: { 0: ["ecc"] } })),
        f.shardStatus("a1", "s-1", "r1", "r1.0", ShardStatus_State.FAILED, { error: "old", exitCode: 1 }),
        f.commandResult("a1", "s-1", "c-1"),
      );
      assert.equal(content(after), content(before));
    });
  });

  it("sessionOpened / hardwareChanged: the node's advertised address is its newest registration's, none for older agents", () => {
    const f = new EventFactory();
    const at = (address: string) => ({ ...h100Node("a1"), advertiseAddress: address });
    const first = given().when(f.sessionOpened("a1", "s-1", "gw-1", at("10.0.0.5")));
    assert.equal(first.after.inventory.nodes.get("a1")?.advertiseAddress, "10.0.0.5");
    const moved = given(f.sessionOpened("a1", "s-1", "gw-1", at("10.0.0.5"))).when(
      f.hardwareChanged("a1", "s-1", at("gpu-1.dc1.example.com")),
    );
    assert.equal(moved.after.inventory.nodes.get("a1")?.advertiseAddress, "gpu-1.dc1.example.com");
    const older = given(f.sessionOpened("a1", "s-1", "gw-1", at("10.0.0.5"))).when(
      f.sessionOpened("a1", "s-2", "gw-1", h100Node("a1")),
    );
    assert.equal(
      older.after.inventory.nodes.get("a1")?.advertiseAddress,
      "",
      "an agent that advertises none",
    );
    const stale = given(
      f.sessionOpened("a1", "s-1", "gw-1", at("10.0.0.5")),
      f.sessionOpened("a1", "s-2", "gw-1", at("10.0.0.6")),
    ).when(f.hardwareChanged("a1", "s-1", at("10.0.0.7")));
    assert.equal(
      stale.after.inventory.nodes.get("a1")?.advertiseAddress,
      "10.0.0.6",
      "an old session's is ignored",
    );
  });

  it("hardwareChanged: the current session's new registration replaces GPUs; node problems stay until cleared", () => {
    const f = new EventFactory();
    const reg = h100Node("a1", { gpuProblems: { 3: ["ecc"] } });
    reg.gpus = reg.gpus?.filter((g) => g.index !== 5);
    const { after } = given(
      f.sessionOpened("a1", "s-1", "gw-1"),
      f.usage("a1", "s-1", [0], ["Xid 48: double-bit ECC"]),
    ).when(f.hardwareChanged("a1", "s-1", reg));
    const n = after.inventory.nodes.get("a1")!;
    assert.deepEqual(n.nodeProblems, ["Xid 48: double-bit ECC"], "only an operator clear ends them");
    assert.deepEqual(n.gpus[3]?.problems, ["ecc"]);
    assert.deepEqual(
      n.gpus.map((g) => g.index),
      [0, 1, 2, 3, 4, 6, 7],
      "a GPU the agent no longer lists is gone",
    );
  });

  it("usageChanged: memory per GPU is updated; node-level problems accumulate and keep the node marked", () => {
    const f = new EventFactory();
    const { after } = given(f.sessionOpened("a1", "s-1", "gw-1")).when(
      f.usage("a1", "s-1", [71, 71, 0, 0, 0, 0, 0, 0], ["Xid 79: GPU has fallen off the bus"]),
      f.usage("a1", "s-1", [72, 72, 0, 0, 0, 0, 0, 0], []),
      f.usage("a1", "s-1", [72, 72, 0, 0, 0, 0, 0, 0], ["Xid 79: GPU has fallen off the bus", "NVLink down"]),
    );
    const n = after.inventory.nodes.get("a1")!;
    assert.equal(n.gpus[0]?.memoryUsedMb, 72 * 1024);
    assert.equal(n.gpus[2]?.memoryUsedMb, 0);
    assert.deepEqual(n.nodeProblems, ["Xid 79: GPU has fallen off the bus", "NVLink down"]);
  });

  it("usageChanged for more GPUs than the node has ignores the extra values", () => {
    const f = new EventFactory();
    const { after } = given(f.sessionOpened("a1", "s-1", "gw-1")).when(
      f.usage("a1", "s-1", Array(12).fill(5)),
    );
    assert.equal(after.inventory.nodes.get("a1")?.gpus.length, 8);
  });

  it("gatewayStarted / gatewayDraining / gatewayStopped track a gateway's status", () => {
    const f = new EventFactory();
    const started = given().when(f.gatewayStarted("gw-1"));
    assert.equal(started.after.inventory.gateways["gw-1"]?.status, "running");
    assert.equal(started.after.inventory.gateways["gw-1"]?.leaseTtlMs, 10_000);
    const draining = given(f.gatewayStarted("gw-1")).when(f.gatewayDraining("gw-1"));
    assert.equal(draining.after.inventory.gateways["gw-1"]?.status, "draining");
    const stopped = given(f.gatewayStarted("gw-1"), f.gatewayDraining("gw-1")).when(f.gatewayStopped("gw-1"));
    assert.equal(stopped.after.inventory.gateways["gw-1"]?.status, "stopped");
    // An unknown gateway draining is not invented.
    const unknown = given().when(f.gatewayDraining("gw-9"), f.gatewayStopped("gw-9"));
    assert.deepEqual(unknown.after.inventory.gateways, {});
  });

  it("nodeCordoned / nodeUncordoned / nodeDrainRequested: operator intent, kept across sessions", () => {
    const f = new EventFactory();
    const cordoned = given(f.sessionOpened("a1", "s-1", "gw-1")).when(f.cordon("a1", "firmware"));
    assert.equal(cordoned.after.inventory.nodes.get("a1")?.cordoned, true);
    assert.equal(cordoned.after.inventory.nodes.get("a1")?.cordonReason, "firmware");

    const drained = given(f.sessionOpened("a1", "s-1", "gw-1")).when(
      f.drain("a1", "RMA"),
      f.sessionClosed("a1", "s-1", "gw-1"),
      f.sessionOpened("a1", "s-2", "gw-1"),
    );
    const n = drained.after.inventory.nodes.get("a1")!;
    assert.equal(n.cordoned, true);
    assert.equal(n.draining, true);
    assert.equal(n.cordonReason, "RMA");

    const back = given(f.sessionOpened("a1", "s-1", "gw-1"), f.drain("a1")).when(f.uncordon("a1"));
    assert.equal(back.after.inventory.nodes.get("a1")?.cordoned, false);
    assert.equal(back.after.inventory.nodes.get("a1")?.draining, false);

    // Intent about a node not seen yet is kept for when it registers.
    const early = given().when(f.cordon("a9", "not racked yet"), f.sessionOpened("a9", "s-1", "gw-1"));
    assert.equal(early.after.inventory.nodes.get("a9")?.cordoned, true);
    assert.equal(early.after.inventory.nodes.get("a9")?.liveness, "connected");
  });

  describe("liveness is set only by reconciler decisions", () => {
    const f = new EventFactory();
    const closed = [f.sessionOpened("a1", "s-1", "gw-1"), f.sessionClosed("a1", "s-1", "gw-1")];

    it("a closed session is disconnected, never suspect or lost by itself, however long ago", () => {
      const { after } = given(...closed).when(f.gatewayStarted("gw-2"), f.cordon("a2"));
      assert.equal(after.inventory.nodes.get("a1")?.liveness, "disconnected");
    });

    it("a nodeLiveness decision moves it to suspect, then lost", () => {
      const suspect = given(...closed).when(f.pass([decide.liveness("a1", Liveness.SUSPECT, "s-1")]));
      assert.equal(suspect.after.inventory.nodes.get("a1")?.liveness, "suspect");
      const lost = given(...closed, f.pass([decide.liveness("a1", Liveness.SUSPECT, "s-1")])).when(
        f.pass([decide.liveness("a1", Liveness.LOST, "s-1")]),
      );
      assert.equal(lost.after.inventory.nodes.get("a1")?.liveness, "lost");
    });

    it("a decision about an older session does not touch a node that came back", () => {
      const { after } = given(...closed, f.sessionOpened("a1", "s-2", "gw-1")).when(
        f.pass([decide.liveness("a1", Liveness.LOST, "s-1")]),
      );
      assert.equal(after.inventory.nodes.get("a1")?.liveness, "connected");
      const reclosed = given(
        ...closed,
        f.sessionOpened("a1", "s-2", "gw-1"),
        f.sessionClosed("a1", "s-2", "gw-1"),
      ).when(f.pass([decide.liveness("a1", Liveness.LOST, "s-1")]));
      assert.equal(reclosed.after.inventory.nodes.get("a1")?.liveness, "disconnected");
    });

    it("a session opening makes a lost node connected again", () => {
      const { after } = given(...closed, f.pass([decide.liveness("a1", Liveness.LOST, "s-1")])).when(
        f.sessionOpened("a1", "s-2", "gw-1"),
      );
      assert.equal(after.inventory.nodes.get("a1")?.liveness, "connected");
      assert.equal(after.inventory.nodes.get("a1")?.disconnectedSinceMs, null);
    });
  });

  it("sessionsExpired: a lost gateway's named sessions close; a node already on another gateway stays", () => {
    const f = new EventFactory();
    const { after, whenSeq } = given(
      f.gatewayStarted("gw-1"),
      f.sessionOpened("a1", "s-1", "gw-1"),
      f.sessionOpened("a2", "s-2", "gw-1"),
      f.sessionOpened("a2", "s-3", "gw-2"),
    ).when(
      f.pass([
        decide.sessionsExpired("gw-1", [
          { node: "a1", session: "s-1" },
          { node: "a2", session: "s-2" },
        ]),
      ]),
    );
    assert.equal(after.inventory.gateways["gw-1"]?.status, "lost");
    assert.equal(after.inventory.nodes.get("a1")?.liveness, "disconnected");
    assert.equal(after.inventory.nodes.get("a1")?.lastCloseReason, "gateway-lost");
    assert.equal(after.inventory.nodes.get("a1")?.disconnectedSinceMs, timeOf(whenSeq));
    assert.equal(after.inventory.nodes.get("a2")?.session?.sessionId, "s-3");
  });
});

describe("replicas fold", () => {
  it("catalogChanged: the whole catalog replaces the previous one, an empty one included", () => {
    const f = new EventFactory();
    const { after, whenSeq } = given().when(f.catalog(llamaCatalog(2, 1)));
    const cat = after.replicas.catalog;
    assert.equal(cat.seq, whenSeq);
    assert.deepEqual(
      cat.models.map((m) => [
        m.name,
        m.replicas,
        m.profiles.map((p) => `${p.name}:${p.shards}x${p.gpusPerShard}`),
      ]),
      [
        [M70, 2, ["tp4:1x4"]],
        ["llama-3.1-405b", 1, ["tp8-pp2:2x8"]],
      ],
    );
    assert.equal(cat.models[1]?.profiles[0]?.fabricKind, "infiniband");
    assert.deepEqual(Object.keys(cat.models[1]?.profiles[0]?.engineEnv ?? {}), [
      "NCCL_IB_HCA",
      "VLLM_USE_V1",
    ]);

    assert.deepEqual(
      cat.models.flatMap((m) => m.profiles.map((p) => p.engine)),
      ["default", "default"],
      "a profile naming no engine runs the default one",
    );
    const named = llamaCatalog(1, 0);
    named[0]!.profiles![0]!.engine = "vllm-nightly";
    assert.equal(
      given().when(f.catalog(named)).after.replicas.catalog.models[0]?.profiles[0]?.engine,
      "vllm-nightly",
    );

    const emptied = given(f.catalog(llamaCatalog())).when(f.catalog([], "bob"));
    assert.deepEqual(emptied.after.replicas.catalog.models, []);
    assert.equal(emptied.after.replicas.catalog.appliedBy, "bob");
  });

  it("replicaCreated + replicaPlaced + start command: a placed replica with pending shards and a command in flight", () => {
    const f = new EventFactory();
    const { after, whenSeq } = given().when(...placedOnA1(f));
    const r = after.replicas.replicas.get("r1")!;
    assert.equal(r.phase, "placed");
    assert.equal(r.profile, "tp4");
    assert.deepEqual(
      r.shards.map((s) => [s.shardId, s.nodeId, s.sessionId, s.gpuIndices, s.state, s.desired]),
      [["r1.0", "a1", "s-1", [0, 1, 2, 3], "pending", "running"]],
    );
    const c = after.replicas.commands["c-1"]!;
    assert.equal(c.kind, "start");
    assert.equal(c.replicaId, "r1");
    assert.equal(c.issuedSeq, whenSeq + 2);
    assert.equal(after.replicas.passes, 1);
    assert.equal(after.replicas.lastPass?.leaderId, "rec-1");
  });

  it("a 2-node replica placed across an InfiniBand pod keeps its shards in rank order", () => {
    const f = new EventFactory();
    const { after } = given(f.sessionOpened("a1", "s-1", "gw-1"), f.sessionOpened("a2", "s-2", "gw-1")).when(
      f.pass([
        decide.placed("big", "llama-3.1-405b", "tp8-pp2", [
          { shard: "big.0", node: "a1", session: "s-1", gpus: [0, 1, 2, 3, 4, 5, 6, 7], rank: 0 },
          { shard: "big.1", node: "a2", session: "s-2", gpus: [0, 1, 2, 3, 4, 5, 6, 7], rank: 1 },
        ]),
      ]),
    );
    assert.deepEqual(
      after.replicas.replicas.get("big")?.shards.map((s) => [s.rank, s.nodeId]),
      [
        [0, "a1"],
        [1, "a2"],
      ],
    );
  });

  it("shardStatus: starting then running makes the replica running", () => {
    const f = new EventFactory();
    const { after } = given(...placedOnA1(f)).when(
      f.shardStatus("a1", "s-1", "r1", "r1.0", ShardStatus_State.STARTING),
      f.shardStatus("a1", "s-1", "r1", "r1.0", ShardStatus_State.RUNNING),
    );
    assert.equal(after.replicas.replicas.get("r1")?.shards[0]?.state, "running");
    assert.equal(after.replicas.replicas.get("r1")?.phase, "running");
  });

  it("shardStatus failed: keeps the error and marks the wanted shard faulty (the pass that fails it counts the failure)", () => {
    const f = new EventFactory();
    const { after } = given(...placedOnA1(f)).when(
      f.shardStatus("a1", "s-1", "r1", "r1.0", ShardStatus_State.FAILED, { error: "CUDA OOM", exitCode: 1 }),
    );
    const shard = after.replicas.replicas.get("r1")?.shards[0];
    assert.equal(shard?.state, "failed");
    assert.equal(shard?.lastError, "CUDA OOM");
    assert.equal(shard?.exitCode, 1);
    assert.deepEqual(shard?.fault, { kind: "failed", message: "CUDA OOM" });
    assert.equal(after.replicas.failures[`${M70}@a1`], undefined);
    assert.equal(after.replicas.replicas.get("r1")?.phase, "placed");
  });

  it("shardStatus about a shard the replica does not have on that node is ignored", () => {
    const f = new EventFactory();
    const { before, after } = given(...placedOnA1(f), f.sessionOpened("a2", "s-2", "gw-1")).when(
      f.shardStatus("a2", "s-2", "r1", "r1.0", ShardStatus_State.RUNNING),
      f.shardStatus("a1", "s-1", "r-unknown", "x.0", ShardStatus_State.RUNNING),
    );
    assert.equal(content(after), content(before));
  });

  it("commandResult: an answer clears the command; a failure leaves its error on the shard", () => {
    const f = new EventFactory();
    const ok = given(...placedOnA1(f)).when(f.commandResult("a1", "s-1", "c-1"));
    assert.deepEqual(ok.after.replicas.commands, {});
    const failed = given(...placedOnA1(f)).when(f.commandResult("a1", "s-1", "c-1", false, "no such GPU"));
    assert.deepEqual(failed.after.replicas.commands, {});
    assert.equal(failed.after.replicas.replicas.get("r1")?.shards[0]?.lastError, "no such GPU");
    const unknown = given(...placedOnA1(f)).when(f.commandResult("a1", "s-1", "c-404"));
    assert.ok(unknown.after.replicas.commands["c-1"]);
  });

  it("commandResult from another node or session than the command's: refused, counted, nothing else changes", () => {
    const f = new EventFactory();
    const base = [...placedOnA1(f), f.sessionOpened("a2", "s-2", "gw-1")];
    const other = given(...base).when(f.commandResult("a2", "s-2", "c-1", false, "forged"));
    const { refusedResults, ...rest } = other.after.replicas;
    assert.equal(content({ ...other.after, replicas: { ...rest } }), content(other.before));
    assert.ok(other.after.replicas.commands["c-1"], "the command still waits for its own node");
    assert.equal(other.after.replicas.replicas.get("r1")?.shards[0]?.lastError, "");
    assert.deepEqual(refusedResults, {
      a2: {
        nodeId: "a2",
        count: 1,
        lastSeq: base.length + 1,
        lastCommandId: "c-1",
        lastSessionId: "s-2",
        addressedNodeId: "a1",
        addressedSessionId: "s-1",
      },
    });
    const twice = given(...base).when(
      f.commandResult("a2", "s-2", "c-1", false, "forged"),
      f.commandResult("a2", "s-2", "c-1", true),
    );
    assert.equal(twice.after.replicas.refusedResults?.["a2"]?.count, 2);
    assert.ok(twice.after.replicas.commands["c-1"]);
    const own = given(...base).when(f.commandResult("a1", "s-1", "c-1"));
    assert.deepEqual(own.after.replicas.commands, {}, "its own node's answer binds");
    assert.equal(own.after.replicas.refusedResults, undefined, "nothing counted when none is refused");
  });

  it("replicaPending: the explanation is kept as the pending reason", () => {
    const f = new EventFactory();
    const why = "0/3 nodes fit: 2 too few healthy GPUs, 1 cordoned";
    const { after } = given().when(f.pass([decide.created("r2", M70), decide.pending("r2", M70, why)]));
    assert.equal(after.replicas.replicas.get("r2")?.phase, "pending");
    assert.equal(after.replicas.replicas.get("r2")?.pendingReason, why);
  });

  it("shardsAdopted: running shards become a running replica on that session", () => {
    const f = new EventFactory();
    const reg = h100Node("a1", { running: [{ ...s70("r9.0", "r9", [0, 1, 2, 3]) }] });
    const { after } = given(f.sessionOpened("a1", "s-1", "gw-1", reg)).when(
      f.pass([
        decide.adopted("a1", "s-1", [
          { shard: "r9.0", replica: "r9", model: M70, profile: "tp4", gpus: [0, 1, 2, 3] },
        ]),
      ]),
    );
    const r = after.replicas.replicas.get("r9")!;
    assert.equal(r.phase, "running");
    assert.equal(r.profile, "tp4");
    assert.equal(r.shards[0]?.adopted, true);
    assert.equal(r.shards[0]?.sessionId, "s-1");
  });

  it("shardUnclaimed, commandReissued and duplicateStopped are explanations: their commands carry the effect", () => {
    const f = new EventFactory();
    const { before, after } = given(...placedOnA1(f)).when(
      f.pass([
        decide.unclaimed("a1", "s-1", "x.0", "x", "old-model"),
        decide.reissued("c-1", 2, 0),
        decide.duplicateStopped("a1", "x.0", "x"),
      ]),
    );
    assert.equal(canonicalJson(after.replicas.replicas), canonicalJson(before.replicas.replicas));
    assert.equal(canonicalJson(after.inventory), canonicalJson(before.inventory));
    assert.equal(after.replicas.passes, before.replicas.passes + 1);
  });

  it("replicaDrainStarted + drain command: shards want draining, the replacement is named", () => {
    const f = new EventFactory();
    const { after } = given(...placedOnA1(f)).when(
      f.pass([decide.drainStarted("r1", "r2", "node draining")], [command.drain("c-2", "a1", "s-1", "r1.0")]),
    );
    const r = after.replicas.replicas.get("r1")!;
    assert.equal(r.phase, "draining");
    assert.equal(r.replacedBy, "r2");
    assert.equal(r.drainReason, "node draining");
    assert.equal(r.shards[0]?.desired, "draining");
    assert.equal(after.replicas.commands["c-2"]?.replicaId, "r1");
  });

  it("replicaCreated with replaces links both replicas", () => {
    const f = new EventFactory();
    const { after } = given(...placedOnA1(f)).when(f.pass([decide.created("r2", M70, "r1")]));
    assert.equal(after.replicas.replicas.get("r2")?.replaces, "r1");
    assert.equal(after.replicas.replicas.get("r1")?.replacedBy, "r2");
  });

  it("replicaRemoved with a stop command in the same pass: the replica goes, the command keeps its replica id", () => {
    const f = new EventFactory();
    const { after } = given(...placedOnA1(f)).when(
      f.pass([decide.removed("r1", M70)], [command.stop("c-9", "a1", "s-1", "r1.0")]),
    );
    assert.equal(after.replicas.replicas.get("r1"), undefined);
    assert.equal(after.replicas.commands["c-9"]?.kind, "stop");
    assert.equal(after.replicas.commands["c-9"]?.replicaId, "r1");
  });

  it("replicaFailed: shards are dropped and the replica waits to be placed again", () => {
    const f = new EventFactory();
    const { after } = given(...placedOnA1(f)).when(
      f.pass([decide.failed("r1", "r1.0", "a1", "OOM")], [command.stop("c-9", "a1", "s-1", "r1.0")]),
    );
    assert.equal(after.replicas.replicas.get("r1")?.phase, "pending");
    assert.deepEqual(after.replicas.replicas.get("r1")?.shards, []);
    assert.equal(after.replicas.commands["c-9"]?.replicaId, "r1");
  });

  it("shardBackoff and cooldownStarted: restart backoff and a model/node cooldown (which resets the failure count)", () => {
    const f = new EventFactory();
    const { after } = given(
      ...placedOnA1(f),
      f.shardStatus("a1", "s-1", "r1", "r1.0", ShardStatus_State.FAILED, { error: "x", exitCode: 1 }),
    ).when(
      f.pass([decide.backoff("r1", 2, 1_790_000_090_000), decide.cooldown(M70, "a1", 3, 1_790_000_600_000)]),
    );
    assert.equal(after.replicas.replicas.get("r1")?.restarts, 2);
    assert.equal(after.replicas.replicas.get("r1")?.backoffUntilMs, 1_790_000_090_000);
    assert.deepEqual(after.replicas.cooldowns[`${M70}@a1`], {
      model: M70,
      nodeId: "a1",
      failures: 3,
      untilMs: 1_790_000_600_000,
    });
    assert.equal(after.replicas.failures[`${M70}@a1`], 0);
  });

  it("a command whose session closed before it was answered is dropped; other sessions' commands stay", () => {
    const f = new EventFactory();
    const { before, after } = given(
      ...placedOnA1(f),
      f.sessionOpened("a2", "s-2", "gw-1"),
      f.pass([], [command.stop("c-2", "a1", "s-1", "r1.0"), command.stop("c-3", "a2", "s-2", "x.0")]),
    ).when(f.sessionClosed("a1", "s-1", "gw-1", SessionClosed_Reason.DISCONNECTED));
    assert.ok(before.replicas.commands["c-2"]);
    assert.equal(after.replicas.commands["c-1"], undefined);
    assert.equal(after.replicas.commands["c-2"], undefined);
    assert.ok(after.replicas.commands["c-3"], "a2's command stays");
  });

  it("a new session of a node drops the commands of its earlier session (they can never be answered)", () => {
    const f = new EventFactory();
    const { after } = given(...placedOnA1(f)).when(f.sessionOpened("a1", "s-9", "gw-2"));
    assert.deepEqual(after.replicas.commands, {});
  });

  it("sessions expired with their gateway drop their commands", () => {
    const f = new EventFactory();
    const { after } = given(...placedOnA1(f)).when(
      f.pass([decide.sessionsExpired("gw-1", [{ node: "a1", session: "s-1" }])]),
    );
    assert.deepEqual(after.replicas.commands, {});
  });

  it("a stop command marks the shard's desired state", () => {
    const f = new EventFactory();
    const { after } = given(...placedOnA1(f)).when(f.pass([], [command.stop("c-2", "a1", "s-1", "r1.0")]));
    assert.equal(after.replicas.replicas.get("r1")?.shards[0]?.desired, "stopped");
  });
});

describe("the fleet fold", () => {
  it("an event of an unknown future kind is ignored (only the position moves)", () => {
    const f = new EventFactory();
    const future = create(EventSchema, { id: "future-1", timeUnixMs: 1n, body: { case: undefined } });
    const { before, after, whenSeq } = given(...placedOnA1(f)).when(future);
    assert.equal(content(after), content(before));
    assert.equal(after.seq, whenSeq);
  });

  it("an empty catalog and a fleet with no nodes fold to empty records", () => {
    const f = new EventFactory();
    const { after } = given().when(f.catalog([]), f.gatewayStarted("gw-1"), f.pass([], []));
    assert.equal(after.inventory.nodes.size, 0);
    assert.equal(after.replicas.replicas.size, 0);
    assert.deepEqual(after.replicas.catalog.models, []);
  });

  it("folding the same log twice gives byte-identical state", () => {
    const events = [...fleetChurn({ nodes: 7, events: 2000 })];
    const records = events.map((event, i) => ({ event, seq: i + 1, timeMs: timeOf(i + 1) }));
    assert.equal(canonicalJson(foldFleet(records)), canonicalJson(foldFleet(records)));
  });

  it("a state restored from its canonical JSON folds on to the same state as a full fold (what snapshots rely on)", () => {
    const events = [...fleetChurn({ nodes: 5, events: 1500 })];
    const records = events.map((event, i) => ({ event, seq: i + 1, timeMs: timeOf(i + 1) }));
    const full = foldFleet(records);
    const restored = fleetProjection.revive(JSON.parse(canonicalJson(foldFleet(records.slice(0, 700)))));
    let s = restored;
    for (const r of records.slice(700)) s = evolveFleetFrom(s, r);
    assert.equal(canonicalJson(s), canonicalJson(full));
  });
});

function evolveFleetFrom(
  s: FleetState,
  r: { event: Parameters<typeof evolveFleet>[1]; seq: number; timeMs: number },
) {
  return evolveFleet(s, r.event, { seq: r.seq, timeMs: r.timeMs });
}
