import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { runCli } from "../support/cli.js";

describe("llmgw command", () => {
  it("lists its commands in --help", async () => {
    const r = await runCli(["--help"]);
    assert.equal(r.code, 0);
    for (const c of [
      "dev",
      "gateway",
      "reconciler",
      "api",
      "router",
      "sim",
      "simulate",
      "replay",
      "events",
      "explain",
      "what-if",
      "check-log",
      "nodes",
      "replicas",
      "catalog",
      "scale",
      "drain",
      "gpu",
      "bench",
    ]) {
      assert.match(r.stdout, new RegExp(`^\\s+${c}\\b`, "m"), `--help does not list ${c}`);
    }
    assert.match(r.stdout, /--nats URL/);
  });

  it("rejects an unknown command with exit 2", async () => {
    const r = await runCli(["no-such-command"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown command/);
  });
});
