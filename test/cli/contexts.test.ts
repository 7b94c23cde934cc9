/**
 * Contexts and output formats in a real shell: `llmgw` as a child process
 * with HOME and XDG_CONFIG_HOME in a temporary directory, against a real
 * `llmgw api` process over a real nats-server. Contexts are written,
 * chosen and used (flag > environment > context), a bad file is refused
 * naming the field, and the lists print as YAML, JSON and wide tables,
 * describe shows one object, and `nodes --watch` prints again on a change.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { type Log, openLog } from "../../src/log/index.js";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { spawnLlmgw, until } from "../harness/proc.js";
import {
  OPERATOR_TOKEN,
  startApiProcess,
  type TokenedApiProcess,
  VIEWER_TOKEN,
} from "../support/api-process.js";
import { runCli } from "../support/cli.js";
import { EventFactory, ShardStatus_State } from "../support/fleet-events.js";
import { rand } from "../support/gateway.js";
import { appendAll, smallFleet } from "../support/operator-api.js";
import { sideBySide } from "../support/side-by-side.js";
import { type UnreachablePort, unreachablePort } from "../support/unreachable.js";

describe("llmgw config contexts and -o formats in a real shell", () => {
  let server: NatsServer & { close(): Promise<void> };
  let log: Log;
  let api: TokenedApiProcess;
  let dead: UnreachablePort;
  const stream = uniqueStream("CTX");
  const prefix = `t${rand()}.evt`;
  const home = tempDir("home");
  const xdg = join(home, "xdg");
  const tokenFile = join(home, "viewer.token");

  /** A shell of the operator: only HOME and XDG_CONFIG_HOME, no API or NATS settings. */
  const shellEnv = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
    HOME: home,
    XDG_CONFIG_HOME: xdg,
    LLMGW_CONFIG: undefined,
    LLMGW_API_URL: undefined,
    LLMGW_API_TOKEN: undefined,
    LLMGW_NATS_URL: undefined,
    LLMGW_NATS_CREDS: undefined,
    ...extra,
  });
  const sh = (args: string[], extra: NodeJS.ProcessEnv = {}) => runCli(args, { env: shellEnv(extra) });

  before(async () => {
    server = await startServer();
    log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    await appendAll(log, smallFleet());
    api = await startApiProcess({ nats: server.url, stream, prefix });
    dead = await unreachablePort();
    writeFileSync(tokenFile, `${VIEWER_TOKEN}\n`);
  });
  after(async () => {
    await api?.stop();
    await dead?.close();
    await log?.close();
    await server?.close();
  });

  it("set-context, use-context, current-context and get-contexts keep $XDG_CONFIG_HOME/llmgw/config.yaml", async () => {
    const none = await sh(["config", "current-context"]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /no current context .*use-context/);

    const bad = await sh(["config", "set-context", "prod", "--api", "ftp://x", "--token-file", tokenFile]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--api: must be an http:\/\/ or https:\/\/ URL/);
    const noFile = await sh([
      "config",
      "set-context",
      "prod",
      "--api",
      api.url,
      "--token-file",
      join(home, "nope"),
    ]);
    assert.equal(noFile.code, 2);
    assert.match(noFile.stderr, /--token-file .*nope: cannot read it/);
    const badName = await sh(["config", "set-context", "-x/y", "--api", api.url]);
    assert.notEqual(badName.code, 0);

    const set = await sh(["config", "set-context", "prod", "--api", api.url, "--token-file", tokenFile]);
    assert.equal(set.code, 0, set.stderr);
    const file = join(xdg, "llmgw", "config.yaml");
    assert.ok(existsSync(file), set.stdout);
    const stored = parseYaml(readFileSync(file, "utf8"));
    assert.deepEqual(stored.contexts, [{ name: "prod", api: api.url, tokenFile }]);
    assert.doesNotMatch(
      readFileSync(file, "utf8"),
      new RegExp(VIEWER_TOKEN),
      "the token itself is not stored",
    );
    assert.equal(
      (await sh(["config", "set-context", "dead", "--api", `http://127.0.0.1:${dead.port}`])).code,
      0,
    );

    const missing = await sh(["config", "use-context", "staging"]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /no context "staging" .*\(it has: prod, dead\)/);
    assert.equal((await sh(["config", "use-context", "prod"])).code, 0);
    assert.equal((await sh(["config", "current-context"])).stdout, "prod\n");
    const list = await sh(["config", "get-contexts"]);
    assert.match(
      list.stdout,
      /^CURRENT\s+NAME\s+API\s+TOKEN FILE\n\*\s+prod\s+http:\/\/127\.0\.0\.1:\d+\/?\s+\S+viewer\.token\n-\s+dead\s/,
    );
  });

  it("llmgw nodes -o yaml|json|wide, replicas, rollouts and events work through the current context", async () => {
    // Readers that share nothing: processes of their own, side by side.
    const [
      yaml,
      asJson,
      wide,
      badFormat,
      replicas,
      replicasYaml,
      rolloutsJson,
      rolloutsTable,
      historyYaml,
      eventsYaml,
      endpoints,
    ] = await sideBySide(
      [
        ["nodes", "-o", "yaml"],
        ["nodes", "-o", "json"],
        ["nodes", "-o", "wide"],
        ["nodes", "-o", "xml"],
        ["replicas", "-o", "wide"],
        ["replicas", "-o", "yaml", "--model", "llama-3.3-70b"],
        ["rollouts", "-o", "json"],
        ["rollouts"],
        ["catalog", "history", "-o", "yaml"],
        ["events", "-o", "yaml", "--until-seq", "2"],
        ["endpoints", "-o", "yaml"],
      ],
      (args) => sh(args),
    );
    assert.ok(
      yaml &&
        asJson &&
        wide &&
        badFormat &&
        replicas &&
        replicasYaml &&
        rolloutsJson &&
        rolloutsTable &&
        historyYaml &&
        eventsYaml &&
        endpoints,
    );
    assert.equal(yaml.code, 0, yaml.stderr);
    const doc = parseYaml(yaml.stdout);
    assert.deepEqual(
      doc.nodes.map((n: { nodeId: string }) => n.nodeId),
      ["gpu-a1", "gpu-a2", "gpu-b1"],
    );
    assert.equal(doc.nodes[2].gpusUsed, 4);
    const json = JSON.parse(asJson.stdout);
    assert.deepEqual(json, doc);
    assert.match(
      wide.stdout,
      /^NODE\s+ADDRESS\s+LIVENESS\s+GPUS\s+CORDON\s+REPLICAS\s+REASON\s+GPU ISSUES\s+AGENT\s+SESSION\s+GATEWAY\s+LABELS$/m,
    );
    assert.match(wide.stdout, /^gpu-b1\s.*\ss-b1\s+gw-1\s/m);
    assert.equal(badFormat.code, 2);
    assert.match(badFormat.stderr, /xml.*Allowed choices are table, wide, json, yaml/);

    assert.match(replicas.stdout, /^r-70b-1\s.*\sr-70b-1\.0:\S+\s+\d+$/m);
    const ry = parseYaml(replicasYaml.stdout);
    assert.deepEqual(
      ry.replicas.map((r: { replicaId: string }) => r.replicaId),
      ["r-70b-1", "r-70b-2"],
    );
    const rollouts = JSON.parse(rolloutsJson.stdout);
    assert.ok(Array.isArray(rollouts.rollouts));
    assert.match(rolloutsTable.stdout, /^MODEL\s+REVISION\s+STATE\s+READY\s+CURRENT\s+OLDER\s+DRAINING/);
    const history = parseYaml(historyYaml.stdout);
    assert.equal(history.history.length, 1);
    const events = parseAllDocuments(eventsYaml.stdout);
    assert.deepEqual(
      events.map((d) => d.toJS().seq),
      [1, 2],
    );
    assert.equal(endpoints.code, 0, endpoints.stderr);
    assert.ok("endpoints" in parseYaml(endpoints.stdout));
  });

  it("llmgw describe node and replica print one object in full", async () => {
    const [node, replica, replicaYaml, missing] = await Promise.all([
      sh(["describe", "node", "gpu-b1"]),
      sh(["describe", "replica", "r-70b-2"]),
      sh(["describe", "replica", "r-70b-1", "-o", "yaml"]),
      sh(["describe", "node", "gpu-zz"]),
    ]);
    assert.equal(node.code, 0, node.stderr);
    assert.match(node.stdout, /^Node:\s+gpu-b1$/m);
    assert.match(node.stdout, /^Session:\s+s-b1 via gw-1/m);
    assert.match(node.stdout, /^GPU\s+PRODUCT\s+MEMORY USED\/TOTAL \(MiB\)\s+CORDONED\s+ISSUES\s+SHARDS$/m);
    assert.match(node.stdout, /^0\s.*r-70b-1\.0 \(llama-3\.3-70b, \S+\)$/m);
    assert.match(replica.stdout, /^Phase:\s+pending$/m);
    assert.match(replica.stdout, /^Pending:\s+0\/3 nodes fit/m);
    const asYaml = parseYaml(replicaYaml.stdout);
    assert.equal(asYaml.replica.replicaId, "r-70b-1");
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /node gpu-zz not found/);
  });

  it("a flag beats the environment, which beats the context", async () => {
    const deadUrl = `http://127.0.0.1:${dead.port}`;
    const [envWins, flagWins, noToken, wrong] = await Promise.all([
      sh(["nodes"], { LLMGW_API_URL: deadUrl }),
      sh(["nodes", "--api", api.url], { LLMGW_API_URL: deadUrl, LLMGW_API_TOKEN: VIEWER_TOKEN }),
      sh(["nodes", "--api", api.url]),
      sh(["nodes"], { LLMGW_API_TOKEN: "not-a-token-of-this-api" }),
    ]);
    assert.equal(envWins.code, 1);
    assert.match(envWins.stderr, new RegExp(`cannot reach the API at ${deadUrl}`));
    assert.equal(flagWins.code, 0, flagWins.stderr);
    // A URL given another way never gets the context's token.
    assert.equal(noToken.code, 1);
    assert.match(noToken.stderr, /token/i);
    // The environment's token beats the context's token file.
    assert.equal(wrong.code, 1);
    const other = await sh(["config", "use-context", "dead"]);
    assert.equal(other.code, 0);
    assert.match((await sh(["nodes"])).stderr, new RegExp(`cannot reach the API at ${deadUrl}`));
    assert.equal((await sh(["config", "use-context", "prod"])).code, 0);
  });

  it("HOME alone places the file in ~/.config/llmgw, LLMGW_CONFIG names another, a bad file is refused by field", async () => {
    const r = await runCli(["config", "set-context", "home", "--api", api.url], {
      env: { ...shellEnv(), XDG_CONFIG_HOME: undefined },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.ok(existsSync(join(home, ".config", "llmgw", "config.yaml")));

    const dir = tempDir("contexts");
    mkdirSync(dir, { recursive: true });
    const bad = join(dir, "bad.yaml");
    writeFileSync(
      bad,
      "currentContext: a\ncontexts:\n  - name: a\n    api: ftp://nowhere\n  - name: a\n    api: http://x\n    token: abc\n",
    );
    const refused = await sh(["nodes"], { LLMGW_CONFIG: bad });
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /bad\.yaml: contexts\[0\]\.api: must be an http:\/\/ or https:\/\/ URL/);
    assert.match(refused.stderr, /bad\.yaml: contexts\[1\]: unknown field token/);
    const viaFlag = await sh(["config", "get-contexts", "--config", bad]);
    assert.equal(viaFlag.code, 2);
    assert.match(viaFlag.stderr, /contexts\[0\]\.api/);
  });

  it("llmgw nodes --watch prints the list again when a node is cordoned", async () => {
    const watch = spawnLlmgw(
      ["nodes", "--watch"],
      shellEnv({ LLMGW_API_URL: api.url, LLMGW_API_TOKEN: VIEWER_TOKEN }) as Record<string, string>,
    );
    try {
      await watch.waitForLine(/^gpu-b1\s+-\s+connected/);
      const res = await fetch(`${api.url}/v1/nodes/gpu-b1/cordon`, {
        method: "POST",
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ reason: "watch me" }),
      });
      assert.equal(res.status, 200);
      await watch.waitForLine(/^gpu-b1\s.*cordoned\s+1\s+watch me/);
    } finally {
      await watch.stop("SIGINT");
    }
  });

  it("llmgw replicas --watch -o json prints one line per change of the replicas", async () => {
    const watch = spawnLlmgw(
      ["replicas", "--watch", "-o", "json"],
      shellEnv({ LLMGW_API_URL: api.url, LLMGW_API_TOKEN: VIEWER_TOKEN }) as Record<string, string>,
    );
    const answers = () =>
      watch
        .output()
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as { replicas: Array<{ replicaId: string; ready: boolean }> });
    try {
      await until(() => (answers().length >= 1 ? true : undefined), 30_000, "the first list");
      const f = new EventFactory("watch");
      await appendAll(log, [
        f.shardStatus("gpu-a1", "s-a1", "r-405b-1", "r-405b-1.0", ShardStatus_State.RUNNING),
        f.shardStatus("gpu-a2", "s-a2", "r-405b-1", "r-405b-1.1", ShardStatus_State.RUNNING),
      ]);
      const ready = await until(
        () => answers().find((a) => a.replicas.find((r) => r.replicaId === "r-405b-1")?.ready),
        30_000,
        "a list with r-405b-1 ready",
      );
      assert.ok(ready);
      assert.equal(answers()[0]?.replicas.find((r) => r.replicaId === "r-405b-1")?.ready, false);
    } finally {
      await watch.stop("SIGINT");
    }
  });
});
