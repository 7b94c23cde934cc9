/**
 * `llmgw agent install --root DIR` (a real `llmgw` process) into a temporary
 * root: the unit, the user, the config skeleton and the state directory with
 * their modes; the skeleton refused by the agent's config loader until its
 * placeholders are filled, then parsed; the unit accepted by
 * `systemd-analyze verify` where this machine has it, its keys checked
 * everywhere; a reinstall that keeps the operator's config.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { promisify } from "node:util";
import { AgentConfigError, loadAgentConfig } from "../../src/agent/index.js";
import { tempDir } from "../harness/nats.js";
import { assertVerifies, systemdAnalyze, unitKeys } from "../support/systemd-unit.js";

const ROOT = join(import.meta.dirname, "../..");
const LLMGW = join(ROOT, "bin/llmgw.js");
const run = promisify(execFile);
/** An executable that exists, for ExecStart (systemd-analyze checks it). */
const BIN = LLMGW;

const mode = (p: string) => statSync(p).mode & 0o7777;

async function install(root: string, ...args: string[]) {
  return run(process.execPath, [LLMGW, "agent", "install", "--root", root, "--bin", BIN, ...args]);
}

describe("llmgw agent install --root DIR", () => {
  it("lays out the unit, the user, the config skeleton and the state directory with their modes", async () => {
    const root = tempDir("agent-install");
    const { stdout } = await install(root);
    const expected: [string, number][] = [
      ["etc/systemd/system/llmgw-agent.service", 0o644],
      ["etc/sysusers.d/llmgw-agent.conf", 0o644],
      ["etc/llmgw/agent.yaml", 0o640],
      ["etc/llmgw/tls", 0o750],
      ["var/lib/llmgw-agent", 0o700],
    ];
    for (const [path, m] of expected) {
      assert.equal(mode(join(root, path)).toString(8), m.toString(8), `mode of /${path}`);
      assert.match(stdout, new RegExp(`(written|created) +/${path}\\n`), `the output names /${path}`);
    }
    assert.ok(statSync(join(root, "var/lib/llmgw-agent")).isDirectory());
    assert.equal(
      readFileSync(join(root, "etc/sysusers.d/llmgw-agent.conf"), "utf8").split("\n")[1],
      'u llmgw-agent - "llmgw node agent" /var/lib/llmgw-agent',
    );
    assert.match(stdout, /systemctl daemon-reload && systemctl enable --now llmgw-agent/);
  });

  it("writes a restricted unit whose engines outlive the agent, accepted by systemd-analyze verify", async (t) => {
    const root = tempDir("agent-install-unit");
    await install(root, "--config", "/etc/llmgw/node.yaml", "--metrics-listen", "127.0.0.1:9401");
    const unitPath = join(root, "etc/systemd/system/llmgw-agent.service");
    const keys = unitKeys(readFileSync(unitPath, "utf8"));
    const one = (k: string) => {
      const v = keys.get(k);
      assert.equal(v?.length, 1, `${k} is set once: ${JSON.stringify(v)}`);
      return v![0]!;
    };
    assert.equal(one("Service.User"), "llmgw-agent");
    assert.equal(one("Service.Group"), "llmgw-agent");
    // Engines run in their own process groups but in the unit's cgroup: only
    // KillMode=process leaves them running when the agent stops.
    assert.equal(one("Service.KillMode"), "process");
    assert.equal(one("Service.Restart"), "on-failure");
    assert.equal(one("Service.StateDirectory"), "llmgw-agent");
    assert.equal(one("Service.StateDirectoryMode"), "0700");
    assert.equal(one("Service.NoNewPrivileges"), "yes");
    assert.equal(one("Service.CapabilityBoundingSet"), "CAP_SYSLOG");
    assert.equal(one("Install.WantedBy"), "multi-user.target");
    assert.equal(
      one("Service.ExecStart"),
      `${BIN} agent --config /etc/llmgw/node.yaml --tls-cert /etc/llmgw/tls/node.crt --tls-key /etc/llmgw/tls/node.key --ca /etc/llmgw/tls/ca.crt --metrics-listen 127.0.0.1:9401`,
    );
    // The ExecStart is what `llmgw agent` accepts: every flag of it is one of the agent's.
    const help = await run(process.execPath, [LLMGW, "agent", "--help"]);
    for (const flag of one("Service.ExecStart").match(/--[a-z-]+/g) ?? [])
      assert.match(help.stdout, new RegExp(`^  ${flag} `, "m"), `llmgw agent has no ${flag}`);
    assert.ok(statSync(join(root, "etc/llmgw/node.yaml")).isFile(), "the config is where --config says");

    const analyze = systemdAnalyze();
    if (analyze) {
      assertVerifies(analyze, unitPath);
      t.diagnostic(`${analyze} verify accepted the unit`);
    } else {
      t.diagnostic("no systemd-analyze on this machine: the unit's keys were checked by parsing only");
    }
  });

  it("writes a config skeleton the agent refuses until its placeholders are filled, then parses", async () => {
    const root = tempDir("agent-install-config");
    await install(root);
    const path = join(root, "etc/llmgw/agent.yaml");
    await assert.rejects(loadAgentConfig(path), (err: Error) => {
      assert.ok(err instanceof AgentConfigError);
      assert.match(err.message, /still holds CHANGE-ME/);
      assert.match(err.message, /gateways\.0, gateways\.1, engines\.default\.command\.0/);
      return true;
    });
    // So does the agent itself: a clear error naming the fields, exit 2, nothing started.
    const refused = await run(process.execPath, [
      LLMGW,
      "agent",
      "--config",
      path,
      "--insecure-dev",
      "--gateway",
      "http://127.0.0.1:1",
    ]).then(
      () => assert.fail("the agent started with an unfilled config"),
      (err: { code: number; stderr: string }) => err,
    );
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /fill in gateways\.0/);

    const filled = readFileSync(path, "utf8")
      .replaceAll("https://CHANGE-ME-gateway-1.example:7443", "https://gw-1.llmgw.internal:7443")
      .replaceAll("https://CHANGE-ME-gateway-2.example:7443", "https://gw-2.llmgw.internal:7443")
      .replaceAll("/CHANGE-ME/bin/vllm", "/usr/local/bin/vllm");
    writeFileSync(path, filled);
    const config = await loadAgentConfig(path);
    assert.deepEqual(config.gateways, [
      "https://gw-1.llmgw.internal:7443",
      "https://gw-2.llmgw.internal:7443",
    ]);
    assert.equal(
      config.stateDir,
      "/var/lib/llmgw-agent",
      "the skeleton's stateDir is the unit's StateDirectory",
    );
    assert.deepEqual(config.engines.default?.command.slice(0, 3), [
      "/usr/local/bin/vllm",
      "serve",
      "{model}",
    ]);
  });

  it("a reinstall keeps the operator's config and rewrites the unit", async () => {
    const root = tempDir("agent-install-again");
    await install(root);
    const config = join(root, "etc/llmgw/agent.yaml");
    writeFileSync(config, "# the operator's\n");
    const unit = join(root, "etc/systemd/system/llmgw-agent.service");
    writeFileSync(unit, "stale\n");
    const { stdout } = await install(root);
    assert.match(stdout, /kept +\/etc\/llmgw\/agent\.yaml\n/);
    assert.equal(readFileSync(config, "utf8"), "# the operator's\n");
    assert.match(readFileSync(unit, "utf8"), /^KillMode=process$/m);
    assert.equal(mode(join(root, "var/lib/llmgw-agent")), 0o700);
  });

  it("refuses a path the unit cannot hold, naming the flag, and writes nothing", async () => {
    const root = tempDir("agent-install-bad");
    const r = await run(process.execPath, [LLMGW, "agent", "install", "--root", root, "--bin", "llmgw"]).then(
      () => assert.fail("a relative --bin was accepted"),
      (err: { code: number; stderr: string }) => err,
    );
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--bin must be an absolute path without spaces/);
    assert.throws(() => statSync(join(root, "etc")), /ENOENT/);
  });

  it("says which path it cannot write, and fails without a stack trace", async () => {
    const file = join(tempDir("agent-install-file"), "not-a-dir");
    writeFileSync(file, "");
    const r = await run(process.execPath, [LLMGW, "agent", "install", "--root", file, "--bin", BIN]).then(
      () => assert.fail("an install under a regular file succeeded"),
      (err: { code: number; stderr: string }) => err,
    );
    assert.equal(r.code, 1);
    assert.equal(r.stderr, `llmgw: cannot write ${file}/etc/llmgw (/etc/llmgw of the install): ENOTDIR\n`);
  });
});
