/**
 * describeEvent: which nodes and replicas an event concerns (what the event
 * list filters on). Given a reconcile pass → when described → then its
 * commands' replicas are named, stops and drains included.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  type CommandSchema,
  CommandUndeliverable_Action,
  CommandUndeliverable_Reason,
  EventSchema,
} from "../../src/gen/llmgw/v1/events_pb.js";
import { describeEvent } from "../../src/reconciler/index.js";

function pass(commands: MessageInitShape<typeof CommandSchema>[]) {
  return create(EventSchema, {
    id: "p-1",
    body: {
      case: "reconcilePass",
      value: { leaderId: "rec-1", trigger: "tick", commands },
    },
  });
}

describe("describeEvent", () => {
  it("names the replica of a stop or drain command, as the command says", () => {
    const d = describeEvent(
      pass([
        {
          commandId: "c1",
          nodeId: "gpu-a",
          replicaId: "r-1",
          action: { case: "stop", value: { commandId: "c1", shardId: "s-9" } },
        },
        {
          commandId: "c2",
          nodeId: "gpu-b",
          replicaId: "r-2",
          action: { case: "drain", value: { commandId: "c2", shardId: "s-8" } },
        },
        {
          commandId: "c3",
          nodeId: "gpu-c",
          replicaId: "r-3",
          action: { case: "start", value: { commandId: "c3", shardId: "s-7", replicaId: "r-3" } },
        },
      ]),
    );
    assert.equal(d.kind, "reconcilePass");
    assert.deepEqual(d.replicaIds, ["r-1", "r-2", "r-3"]);
    assert.deepEqual(d.nodeIds, ["gpu-a", "gpu-b", "gpu-c"]);
  });

  it("names no replica for a stop from a log written before commands named theirs", () => {
    const d = describeEvent(
      pass([
        {
          commandId: "c1",
          nodeId: "gpu-a",
          action: { case: "stop", value: { commandId: "c1", shardId: "s-9" } },
        },
      ]),
    );
    assert.deepEqual(d.replicaIds, []);
    assert.deepEqual(d.nodeIds, ["gpu-a"]);
  });

  it("names the node and replica of an undeliverable command, and says what it was", () => {
    const e = create(EventSchema, {
      id: "u-1",
      body: {
        case: "commandUndeliverable",
        value: {
          commandId: "c-9-1",
          attempt: 1,
          nodeId: "gpu-a",
          sessionId: "s-1",
          gatewayId: "gw-1",
          reason: CommandUndeliverable_Reason.SESSION_CLOSED,
          detail: "session s-1 of gpu-a ended on gateway gw-1: the connection ended",
          action: CommandUndeliverable_Action.START,
          shardId: "r-1-s0-9",
          replicaId: "r-1",
        },
      },
    });
    const d = describeEvent(e);
    assert.equal(d.kind, "commandUndeliverable");
    assert.deepEqual(d.nodeIds, ["gpu-a"]);
    assert.deepEqual(d.replicaIds, ["r-1"]);
    assert.equal(
      d.text,
      "gpu-a start c-9-1 (attempt 1) undeliverable on gw-1: session_closed (session s-1 of gpu-a ended on gateway gw-1: the connection ended)",
    );
  });
});
