import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { DecisionSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { Fleet, llama70b } from "../support/fleet.js";

describe("replicas fold: drain start time", () => {
  it("records the decision time of the pass that started a replica's drain", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.run();
    const [r] = f.replicasOf("llama-3.3-70b");
    assert.equal(r?.drainStartedMs, 0);
    f.advance(42_000);
    f.fold({
      decisions: [
        // biome-ignore lint/suspicious/noExplicitAny: a plain init, built like the log's own passes
        { kind: { case: "replicaDrainStarted", value: { replicaId: r?.replicaId, reason: "test" } } } as any,
      ],
      commands: [],
      truncated: false,
      nextDeadlineMs: null,
    });
    assert.equal(f.state.replicas.replicas.get(r?.replicaId as string)?.drainStartedMs, f.nowMs);
    assert.equal(f.state.replicas.replicas.get(r?.replicaId as string)?.phase, "draining");
  });

  it("a drain restated while the replica drains keeps its first start (the deadline agents were told)", () => {
    const f = new Fleet();
    f.connect("gpu-a1");
    f.catalog(llama70b(1));
    f.run();
    const [r] = f.replicasOf("llama-3.3-70b");
    const restate = () =>
      f.fold({
        decisions: [
          create(DecisionSchema, {
            kind: { case: "replicaDrainStarted", value: { replicaId: r?.replicaId ?? "", reason: "test" } },
          }),
        ],
        commands: [],
        truncated: false,
        nextDeadlineMs: null,
      });
    restate();
    const first = f.nowMs;
    f.advance(30_000);
    restate();
    assert.equal(f.state.replicas.replicas.get(r?.replicaId as string)?.drainStartedMs, first);
  });
});
