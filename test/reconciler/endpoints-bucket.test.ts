import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { jetstream } from "@nats-io/jetstream";
import { DecisionSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { EndpointsBucket, endpointsKey, modelOfEndpointsKey } from "../../src/reconciler/runner/index.js";
import { connectionSuite } from "../support/suites.js";

const entry = (replicaId: string) => ({ replicaId, url: `http://n1:8000/${replicaId}`, nodeId: "n1" });

describe("the endpoints bucket (KV, one key per model)", () => {
  const env = connectionSuite();

  it("keys a model by its name, or by = and base64url when a KV key cannot be the name", () => {
    assert.equal(endpointsKey("llama-3.3-70b"), "llama-3.3-70b");
    assert.equal(endpointsKey("Qwen2.5_7B"), "Qwen2.5_7B");
    for (const odd of ["v1.", "a..b"]) {
      const key = endpointsKey(odd);
      assert.match(key, /^=[A-Za-z0-9_-]+$/);
      assert.equal(modelOfEndpointsKey(key), odd);
    }
    assert.equal(modelOfEndpointsKey("llama-3.3-70b"), "llama-3.3-70b");
  });

  it("sync makes the bucket equal to a table; a pass's changes write or delete one key each", async () => {
    const bucket = await EndpointsBucket.open(jetstream(env.nc), {
      bucket: `endp_${Date.now().toString(36)}`,
    });
    await bucket.kv.put("gone-model", JSON.stringify([entry("old")]));
    await bucket.kv.put("llama-3.3-70b", JSON.stringify([entry("stale")]));

    await bucket.sync({ "llama-3.3-70b": [entry("r1")], "v1.": [entry("r2")] });
    assert.deepEqual(await bucket.read(), { "llama-3.3-70b": [entry("r1")], "v1.": [entry("r2")] });

    const changed = (model: string, ids: string[]) =>
      create(DecisionSchema, {
        explanation: "",
        kind: { case: "endpointsChanged", value: { model, endpoints: ids.map(entry) } },
      });
    await bucket.publish([
      changed("llama-3.3-70b", ["r1", "r3"]),
      changed("v1.", []),
      create(DecisionSchema, { kind: { case: "replicaRemoved", value: { replicaId: "x" } } }),
    ]);
    assert.deepEqual(await bucket.read(), { "llama-3.3-70b": [entry("r1"), entry("r3")] });
    assert.equal(await bucket.kv.get(endpointsKey("v1.")).then((e) => e?.operation), "DEL");
  });
});
