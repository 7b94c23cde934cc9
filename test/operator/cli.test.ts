// biome-ignore-all lint/suspicious/noExplicitAny: response bodies are loosely typed JSON, checked by the assertions
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { LLMGW_BIN, logFlags, runCli } from "../support/cli.js";
import { EventFactory } from "../support/fleet-events.js";
import { apiSuite, appendAll, eventually } from "../support/operator-api.js";
import { unreachablePort } from "../support/unreachable.js";

const EXAMPLE = join(import.meta.dirname, "../../examples/catalog.yaml");

describe("operator CLI against a real API", () => {
  const api = apiSuite();

  it("llmgw nodes prints a table, and JSON with --json", async () => {
    // Readers of their own: side by side.
    const [r, j] = await Promise.all([
      runCli(["nodes"], { env: api.cliEnv }),
      runCli(["nodes", "--json"], { env: api.cliEnv }),
    ]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trimEnd().split("\n");
    assert.match(
      lines[0] ?? "",
      /^NODE\s+ADDRESS\s+LIVENESS\s+GPUS\s+CORDON\s+REPLICAS\s+REASON\s+GPU ISSUES$/,
    );
    assert.match(lines[1] ?? "", /^gpu-a1\s+-\s+connected\s+8\/8\s+-\s+1\s+-\s+-$/);
    assert.match(lines[3] ?? "", /^gpu-b1\s+-\s+connected\s+4\/8\s+-\s+1\s+-\s+-$/);
    assert.equal(j.code, 0, j.stderr);
    const body = JSON.parse(j.stdout);
    assert.deepEqual(
      body.nodes.map((n: any) => n.nodeId),
      ["gpu-a1", "gpu-a2", "gpu-b1"],
    );
  });

  it("llmgw replicas prints ready/desired per model, then model, profile, phase, readiness, nodes and why pending", async () => {
    const [r, j] = await Promise.all([
      runCli(["replicas"], { env: api.cliEnv }),
      runCli(["replicas", "--json", "--model", "llama-3.3-70b"], { env: api.cliEnv }),
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      /^MODEL\s+READY\s+MIN AVAILABLE\nllama-3\.1-405b\s+0\/1\s+-\nllama-3\.3-70b\s+1\/2\s+-\n/,
    );
    assert.match(
      r.stdout,
      /^REPLICA\s+MODEL\s+PROFILE\s+REVISION\s+PHASE\s+READY\s+NODES\s+PENDING\s+LAST FAILURE$/m,
    );
    // These placements were written without a revision (as logs from before revisions were).
    assert.match(
      r.stdout,
      /^r-405b-1\s+llama-3\.1-405b\s+tp8-pp2\s+-\s+placed\s+no\s+gpu-a1,gpu-a2\s+-\s+-$/m,
    );
    assert.match(r.stdout, /^r-70b-1\s+llama-3\.3-70b\s+tp4\s+-\s+running\s+yes\s+gpu-b1\s+-\s+-$/m);
    assert.match(
      r.stdout,
      /^r-70b-2\s+llama-3\.3-70b\s+-\s+-\s+pending\s+no\s+-\s+0\/3 nodes fit: 3 too few free GPUs\s+-$/m,
    );
    assert.deepEqual(
      JSON.parse(j.stdout).replicas.map((x: any) => x.replicaId),
      ["r-70b-1", "r-70b-2"],
    );
  });

  it("llmgw catalog apply applies a file, --if-match guards it, get prints it", async () => {
    const r = await runCli(["catalog", "apply", "-f", EXAMPLE], { env: api.cliEnv });
    assert.equal(r.code, 0, r.stderr);
    const m = /catalog applied at log sequence (\d+): llama-3\.1-8b×4, llama-3\.3-70b×4/.exec(r.stdout);
    assert.ok(m, r.stdout);
    const seq = Number(m[1]);
    const stale = await runCli(["catalog", "apply", "-f", EXAMPLE, "--if-match", String(seq - 1)], {
      env: api.cliEnv,
    });
    assert.equal(stale.code, 1);
    assert.match(stale.stderr, /^llmgw: the catalog changed: .*\n$/);
    const ok = await runCli(["catalog", "apply", "-f", EXAMPLE, "--if-match", String(seq), "--json"], {
      env: api.cliEnv,
    });
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(JSON.parse(ok.stdout).seq > seq, true);
    const got = await runCli(["catalog", "get"], { env: api.cliEnv });
    assert.equal(got.code, 0, got.stderr);
    assert.match(got.stdout, /memoryPerGpu: 72GiB/);
    assert.match(got.stdout, /fabricKind: infiniband/);
  });

  it("llmgw catalog history and show --at-seq, and llmgw rollout status, pause, resume and undo", async () => {
    const history = await runCli(["catalog", "history"], { env: api.cliEnv });
    assert.equal(history.code, 0, history.stderr);
    assert.match(history.stdout, /^SEQ\s+TIME\s+APPLIED BY\s+MODELS/m);
    const rows = history.stdout.trim().split("\n").slice(1);
    assert.ok(rows.length >= 2, history.stdout);
    assert.match(rows.at(-1) ?? "", /llama-3\.3-70b×4@[0-9a-f]{8}/);
    const firstSeq = Number(rows[0]?.split(/\s+/)[0]);
    const old = await runCli(["catalog", "show", "--at-seq", String(firstSeq)], { env: api.cliEnv });
    assert.equal(old.code, 0, old.stderr);
    assert.match(old.stdout, new RegExp(`^# catalog at log sequence ${firstSeq}`));
    assert.doesNotMatch(old.stdout, /mixtral/);

    const paused = await runCli(["rollout", "pause", "llama-3.3-70b", "--reason", "watch it"], {
      env: api.cliEnv,
    });
    assert.equal(paused.code, 0, paused.stderr);
    const status = await runCli(["rollout", "status", "llama-3.3-70b"], { env: api.cliEnv });
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /^llama-3\.3-70b: paused by .*: watch it$/m);
    assert.match(status.stdout, /maxSurge 1, maxUnavailable 0, progress deadline 900s/);
    assert.match(status.stdout, /^REVISION\s+REPLICAS\s+READY$/m);
    assert.equal((await runCli(["rollout", "resume", "llama-3.3-70b"], { env: api.cliEnv })).code, 0);

    const undo = await runCli(["rollout", "undo", "llama-3.3-70b"], { env: api.cliEnv });
    assert.equal(undo.code, 0, undo.stderr);
    assert.match(
      undo.stdout,
      /^llama-3\.3-70b back to revision [0-9a-f]{8} \(its spec at log sequence \d+\)/,
    );
    const [nothing, bad] = await Promise.all([
      runCli(["rollout", "undo", "mixtral-8x22b"], { env: api.cliEnv }),
      runCli(["rollout", "status", "a/b"], { env: api.cliEnv }),
    ]);
    assert.equal(nothing.code, 1);
    assert.match(nothing.stderr, /^llmgw: the log records no earlier spec of mixtral-8x22b/);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /invalid <model> "a\/b"/);
  });

  it("llmgw catalog apply prints every invalid field and exits 2", async () => {
    const dir = tempDir("catalog");
    const file = join(dir, "bad.yaml");
    writeFileSync(
      file,
      [
        "models:",
        "  - name: a",
        "    replicas: 1",
        "    profiles:",
        "      - name: p",
        "        shards: 2",
        "        gpusPerShard: 0",
        "        memoryPerGpu: 72GiB",
        "  - name: a",
        "    replicas: 0",
      ].join("\n"),
    );
    const json = join(dir, "broken.json");
    writeFileSync(json, '{"models": [');
    // Each is refused before anything is applied: side by side.
    const [r, j, missing] = await Promise.all([
      runCli(["catalog", "apply", "-f", file], { env: api.cliEnv }),
      runCli(["catalog", "apply", "-f", json], { env: api.cliEnv }),
      runCli(["catalog", "apply", "-f", join(dir, "nope.yaml")], { env: api.cliEnv }),
    ]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^ {2}models\[0\]\.profiles\[0\]\.gpusPerShard: must be at least 1$/m);
    assert.match(r.stderr, /^ {2}models\[0\]\.profiles\[0\]\.fabricKind: a profile with 2 shards/m);
    assert.match(r.stderr, /^ {2}models\[1\]\.name: duplicate model name "a"/m);
    assert.match(r.stderr, /llmgw: .*bad\.yaml: the catalog has 3 invalid fields; nothing was applied\n$/);
    assert.equal(j.code, 2);
    assert.match(j.stderr, /invalid JSON/);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /cannot read .*nope\.yaml: ENOENT/);
  });

  it("llmgw cordon, drain and uncordon write intent the API shows", async () => {
    const c = await runCli(["cordon", "gpu-b1", "--reason", "bad fan"], { env: api.cliEnv });
    assert.equal(c.code, 0, c.stderr);
    assert.match(c.stdout, /^gpu-b1 cordoned \(log sequence \d+\)\n$/);
    const n = await runCli(["nodes"], { env: api.cliEnv });
    assert.match(n.stdout, /^gpu-b1\s+-\s+connected\s+4\/8\s+cordoned\s+1\s+bad fan\s+-$/m);
    const d = await runCli(["drain", "gpu-b1", "--json"], { env: api.cliEnv });
    assert.equal(d.code, 0, d.stderr);
    assert.equal(JSON.parse(d.stdout).node.draining, true);
    const u = await runCli(["uncordon", "gpu-b1"], { env: api.cliEnv });
    assert.equal(u.code, 0, u.stderr);
    const node = (await api.fx.call("/v1/nodes/gpu-b1")).body.node;
    assert.equal(node.cordoned, false);
    assert.equal(node.draining, false);
    const ev = (await api.fx.call("/v1/events?subject=operator.gpu-b1")).body.events;
    assert.deepEqual(
      ev.map((e: any) => Object.keys(e.event).at(-1)),
      ["nodeCordoned", "nodeDrainRequested", "nodeUncordoned"],
    );
    assert.equal(ev[0].event.nodeCordoned.reason, "bad fan");
  });

  it("errors are one line: unknown node 2, bad id 2, bad flags 2, wrong token 1, no API 1", async () => {
    // No API there: a port held by a listener that resets every connection.
    const nowhere = await unreachablePort();
    const port = nowhere.port;
    // Independent commands: run them side by side.
    const [unknown, badId, badFlag, noArg, badIfMatch, noFile, badUrl, wrongToken, noApi] = await Promise.all(
      [
        runCli(["cordon", "gpu-zz"], { env: api.cliEnv }),
        runCli(["drain", "gpu_a1"], { env: api.cliEnv }),
        runCli(["nodes", "--bogus"], { env: api.cliEnv }),
        runCli(["cordon"], { env: api.cliEnv }),
        runCli(["catalog", "apply", "-f", EXAMPLE, "--if-match", "x"], { env: api.cliEnv }),
        runCli(["catalog", "apply"], { env: api.cliEnv }),
        runCli(["nodes", "--api", "not a url"], { env: api.cliEnv }),
        runCli(["nodes", "--token", "wrong-token-123"], { env: api.cliEnv }),
        runCli(["replicas", "--api", `http://127.0.0.1:${port}`], { env: api.cliEnv }),
      ],
    ).finally(() => nowhere.close());
    assert.equal(unknown.code, 2);
    assert.equal(unknown.stderr, "llmgw: node gpu-zz not found\n");
    assert.equal(badId.code, 2);
    assert.match(badId.stderr, /invalid <node>: node id "gpu_a1" must be a DNS name/);
    assert.equal(badFlag.code, 2);
    assert.match(badFlag.stderr, /unknown option '--bogus'/);
    assert.equal(noArg.code, 2);
    assert.equal(badIfMatch.code, 2);
    assert.match(badIfMatch.stderr, /--if-match must be a non-negative integer/);
    assert.equal(noFile.code, 2);
    assert.equal(badUrl.code, 2);
    assert.equal(wrongToken.code, 1);
    assert.equal(wrongToken.stderr, "llmgw: invalid token\n");
    assert.equal(noApi.code, 1);
    assert.match(
      noApi.stderr,
      new RegExp(`^llmgw: cannot reach the API at http://127\\.0\\.0\\.1:${port} \\(ECONNRESET\\).*\\n$`),
    );
  });

  it("llmgw endpoints prints the routing table, one model with --model, and follows changes", async () => {
    const f = new EventFactory("endpoints");
    const table = (replicaIds: string[]) =>
      f.pass([
        {
          explanation: "routing table of llama-3.3-70b",
          kind: {
            case: "endpointsChanged",
            value: {
              model: "llama-3.3-70b",
              endpoints: replicaIds.map((id) => ({
                replicaId: id,
                url: `http://gpu-b1:8000/${id}`,
                nodeId: "gpu-b1",
              })),
            },
          },
        },
      ]);
    await api.fx.api.runtime.waitFor(await appendAll(api.fx.log, [table(["r-70b-1"])]));
    const [r, none, unknown] = await Promise.all([
      runCli(["endpoints"], { env: api.cliEnv }),
      runCli(["endpoints", "--json", "--model", "llama-3.1-405b"], { env: api.cliEnv }),
      runCli(["endpoints", "--model", "gpt-9"], { env: api.cliEnv }),
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^MODEL\s+REPLICA\s+URL\s+NODE$/m);
    assert.match(r.stdout, /^llama-3\.3-70b\s+r-70b-1\s+http:\/\/gpu-b1:8000\/r-70b-1\s+gpu-b1$/m);
    assert.equal(none.code, 0, none.stderr);
    assert.deepEqual(JSON.parse(none.stdout).endpoints, [], "a known model with nothing ready");
    assert.equal(unknown.code, 2);
    assert.equal(unknown.stderr, "llmgw: model gpt-9 not found\n");

    // --follow --json: one line at once, another after the table changes.
    const child = spawn(
      process.execPath,
      [LLMGW_BIN, "endpoints", "--follow", "--json", "--model", "llama-3.3-70b"],
      {
        env: { ...process.env, ...api.cliEnv },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    try {
      const lines: any[] = [];
      let buf = "";
      child.stdout.on("data", (b: Buffer) => {
        buf += b.toString();
        for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
          lines.push(JSON.parse(buf.slice(0, i)));
          buf = buf.slice(i + 1);
        }
      });
      await eventually(async () => (lines.length >= 1 ? true : undefined), "the first table");
      assert.deepEqual(
        lines[0].endpoints.map((e: any) => e.replicaId),
        ["r-70b-1"],
      );
      await appendAll(api.fx.log, [table(["r-70b-1", "r-70b-2"])]);
      await eventually(async () => (lines.length >= 2 ? true : undefined), "the changed table");
      assert.deepEqual(
        lines[1].endpoints.map((e: any) => e.replicaId),
        ["r-70b-1", "r-70b-2"],
      );
    } finally {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGINT");
      await exited;
    }
  });
});

describe("llmgw api as a process", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  function spawnApi(args: string[]): { proc: ChildProcess; output: () => string } {
    const proc = spawn(process.execPath, [LLMGW_BIN, "api", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    proc.stdout?.on("data", (b) => (out += b));
    proc.stderr?.on("data", (b) => (out += b));
    return { proc, output: () => out };
  }

  it("serves in development mode on loopback, and stops on SIGTERM", async () => {
    const stream = uniqueStream("OPP");
    const { proc, output } = spawnApi([
      "--dev",
      "--listen",
      "127.0.0.1:0",
      ...logFlags(server.url, stream, "tproc.evt"),
    ]);
    try {
      // Port 0: the API says where it listens, in its structured log line.
      const line = await eventually(
        async () =>
          output()
            .split("\n")
            .slice(0, -1) // whole lines only
            .filter((l) => l.startsWith("{"))
            .map((l) => JSON.parse(l))
            .find((l) => l.url),
        "the API's listening line",
        30_000,
      ).catch((err) => {
        throw new Error(`${err.message}\n${output()}`);
      });
      assert.match(line.url, /^http:\/\/127\.0\.0\.1:[1-9]\d*$/, "the port it bound, not 0");
      assert.equal(line.auth, "dev");
      const url: string = line.url;
      await eventually(
        async () => {
          const res = await fetch(`${url}/readyz`).catch(() => undefined);
          return res?.status === 200 ? true : undefined;
        },
        "the API to be ready",
        30_000,
      ).catch((err) => {
        throw new Error(`${err.message}\n${output()}`);
      });
      const r = await runCli(["catalog", "apply", "-f", EXAMPLE, "--api", url]);
      assert.equal(r.code, 0, r.stderr);
      const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
      proc.kill("SIGTERM");
      assert.equal(await exited, 0, output());
    } finally {
      if (proc.exitCode === null) proc.kill("SIGKILL");
    }
  });

  it("refuses to start without a token, or in development mode off loopback", async () => {
    const noToken = await runCli(["api", "--listen", "127.0.0.1:0", "--nats", server.url], {
      env: { LLMGW_API_TOKEN: "" },
    });
    assert.equal(noToken.code, 2);
    assert.match(noToken.stderr, /needs --token/);
    const open = await runCli(["api", "--dev", "--listen", "0.0.0.0:0", "--nats", server.url]);
    assert.equal(open.code, 2);
    assert.match(open.stderr, /loopback only/);
    const badListen = await runCli(["api", "--dev", "--listen", "8080"]);
    assert.equal(badListen.code, 2);
    assert.match(badListen.stderr, /--listen must be HOST:PORT/);
  });
});
