import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { openLog } from "../../src/log/index.js";
import { startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { runCli } from "../support/cli.js";
import { EventFactory } from "../support/fleet-events.js";

describe("--config-file", () => {
  it("fills what flags and the environment leave unset: file < env < flag", async () => {
    const server = await startServer();
    const stream = uniqueStream("CF");
    const log = await openLog({ url: server.url, clientName: "config-file-test", name: stream });
    try {
      await log.append(new EventFactory("cf").cordon("gpu-1", "from the config test"));
      const dir = tempDir("config-file");
      const file = join(dir, "llmgw.yaml");
      writeFileSync(file, `nats: ${server.url}\nstream: ${stream}\n`);
      // Unset, not empty: an empty variable still counts as set.
      const noEnv = { LLMGW_NATS_URL: undefined, LLMGW_STREAM: undefined, LLMGW_CONFIG_FILE: undefined };
      const bad = "nats://127.0.0.1:1";

      const fromFile = await runCli(["events", "--config-file", file], { env: noEnv });
      assert.equal(fromFile.code, 0, fromFile.stderr);
      assert.match(fromFile.stdout, /from the config test/);

      const envWins = await runCli(["events", "--config-file", file], {
        env: { ...noEnv, LLMGW_NATS_URL: bad },
      });
      assert.equal(envWins.code, 1);
      assert.match(envWins.stderr, /127\.0\.0\.1:1/);

      const flagWins = await runCli(["events", "--config-file", file, "--nats", server.url], {
        env: { ...noEnv, LLMGW_NATS_URL: bad },
      });
      assert.equal(flagWins.code, 0, flagWins.stderr);

      // The file can also be named by the environment.
      const viaEnv = await runCli(["events"], { env: { ...noEnv, LLMGW_CONFIG_FILE: file } });
      assert.equal(viaEnv.code, 0, viaEnv.stderr);
    } finally {
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
      await server.close();
    }
  });

  it("names the field and the expected form of a bad file, and exits 2", async () => {
    const dir = tempDir("config-file");
    const cases: Array<[string, string, RegExp]> = [
      ["unknown.yaml", "gateway:\n  lissten: 0.0.0.0:8443\n", /unknown field gateway\.lissten/],
      ["top.yaml", "natz: nats://x\n", /unknown field natz/],
      ["type.yaml", "sim:\n  heartbeatMs: soon\n", /--heartbeat-ms.*expected an integer/],
      ["bool.yaml", "gateway:\n  insecureDev: 3\n", /gateway\.insecureDev: expected true or false/],
      [
        "choice.yaml",
        "reconciler:\n  policy: random\n",
        /reconciler\.policy: expected one of binpack, spread/,
      ],
      ["broken.yaml", "gateway: [\n", /not valid YAML/],
    ];
    for (const [name, text, expected] of cases) {
      const file = join(dir, name);
      writeFileSync(file, text);
      const cmd = name === "type.yaml" ? "sim" : name === "choice.yaml" ? "reconciler" : "gateway";
      const r = await runCli(["--config-file", file, cmd]);
      assert.equal(r.code, 2, `${name}: ${r.stderr}`);
      assert.match(r.stderr, expected, name);
    }
    const missing = await runCli(["--config-file", join(dir, "nope.yaml"), "events"]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /cannot read/);
  });
});
