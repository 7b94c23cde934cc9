/**
 * The simulated gateway publishes through the gateway's own ordered
 * pipeline and retry loop (src/gateway/ordered.ts, append-retry.ts): under
 * the log's ack loss a publish whose ack was lost is retried with its
 * message id and stored once by the in-memory log's message-id dedupe. The
 * run's check-log rules (stored-twice, acked-lost) hold, and the seed
 * replays to the same digest.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseFaultList, parseSimulationOptions, runSeed } from "../../src/simulation/index.js";

/** Log faults (half of them ack loss) while operator moves, engine faults and agent restarts keep agents talking. */
const opts = (seed: number) =>
  parseSimulationOptions({
    seed,
    minutes: 30,
    nodes: 20,
    faults: parseFaultList("log,agent-crash,operator,engine"),
    convergeMinutes: 10,
  });

describe("llmgw simulate: retried appends", () => {
  it("stores a retried publish once (message-id dedupe) with no violation, and replays it to the same digest", async () => {
    let found: { seed: number; digest: string; duplicates: number } | undefined;
    for (let seed = 1; seed <= 12 && found === undefined; seed++) {
      const r = await runSeed(opts(seed));
      assert.equal(r.failure, undefined, `seed ${seed}: ${r.failure?.invariant}: ${r.failure?.message}`);
      if (r.duplicates > 0) found = { seed, digest: r.digest, duplicates: r.duplicates };
    }
    assert.ok(found, "no seed in 1..12 had a retried append deduplicated by the log");
    const again = await runSeed(opts(found.seed));
    assert.equal(again.digest, found.digest);
    assert.equal(again.duplicates, found.duplicates);
  });
});
