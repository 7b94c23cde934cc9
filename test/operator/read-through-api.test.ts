/**
 * One access path for operators: `llmgw events`, `replay`, `explain`,
 * `check-log` and `what-if` as child processes against a real `llmgw api`
 * process over a real nats-server, with no NATS reachable from the CLI's
 * side (its LLMGW_NATS_URL points at a port that resets every connection).
 * Each answers what the same command answers reading NATS itself; a viewer
 * reads, and only an operator may run what-if.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type Log, openLog } from "../../src/log/index.js";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import {
  OPERATOR_TOKEN,
  startApiProcess,
  type TokenedApiProcess,
  VIEWER_TOKEN,
} from "../support/api-process.js";
import { type CliResult, runCli } from "../support/cli.js";
import { rand } from "../support/gateway.js";
import { appendAll, smallFleet } from "../support/operator-api.js";
import { sideBySide } from "../support/side-by-side.js";
import { type UnreachablePort, unreachablePort } from "../support/unreachable.js";

describe("log-reading commands through the operator API, NATS unreachable from the CLI", () => {
  let server: NatsServer & { close(): Promise<void> };
  let log: Log;
  let api: TokenedApiProcess;
  let noNats: UnreachablePort;
  let last = 0;
  const stream = uniqueStream("READS");
  const prefix = `t${rand()}.evt`;

  before(async () => {
    server = await startServer();
    log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    last = await appendAll(log, smallFleet());
    api = await startApiProcess({ nats: server.url, stream, prefix });
    noNats = await unreachablePort();
  });
  after(async () => {
    await api?.stop();
    await noNats?.close();
    await log?.close();
    await server?.close();
  });

  /** The CLI on the operator's machine: the API's URL and a token; NATS given only as an unreachable URL. */
  const viaApi = (args: string[], token = VIEWER_TOKEN) =>
    runCli(args, {
      env: {
        LLMGW_API_URL: api.url,
        LLMGW_API_TOKEN: token,
        LLMGW_NATS_URL: `nats://127.0.0.1:${noNats.port}`,
        LLMGW_NATS_CREDS: undefined,
        LLMGW_CONFIG: join(tempDir("no-contexts"), "config.yaml"),
      },
      timeoutMs: 60_000,
    });
  /** The same command reading NATS itself (--nats on the command line), for comparison. */
  const viaNats = (args: string[]) =>
    runCli([...args, "--nats", server.url, "--stream", stream, "--subject-prefix", prefix], {
      env: { LLMGW_API_URL: undefined, LLMGW_API_TOKEN: undefined },
      timeoutMs: 60_000,
    });

  /**
   * Each command through the API and reading NATS (with `natsExtra`), every
   * process side by side: the answers in the order of `commands`.
   */
  const bothWays = async (commands: string[][], natsExtra: string[] = []) => {
    const runs = await sideBySide(
      commands.flatMap((args) => [() => viaApi(args), () => viaNats([...args, ...natsExtra])]),
      (run) => run(),
    );
    return commands.map((args, i) => ({
      args,
      a: runs[2 * i] as CliResult,
      n: runs[2 * i + 1] as CliResult,
    }));
  };

  it("llmgw events lists the log as reading NATS does, in every format, filtered by subject and node", async () => {
    const answers = await bothWays([
      ["events"],
      ["events", "--json"],
      ["events", "-o", "yaml"],
      ["events", "--subject", "session.*"],
      ["events", "--node", "gpu-b1", "--from-seq", "2"],
      ["events", "--until-seq", "3", "-o", "wide"],
    ]);
    for (const { args, a, n } of answers) {
      assert.equal(a.code, 0, `${args.join(" ")}: ${a.stderr}`);
      assert.equal(n.code, 0, `${args.join(" ")}: ${n.stderr}`);
      assert.ok(a.stdout.length > 0, args.join(" "));
      assert.equal(a.stdout, n.stdout, args.join(" "));
    }
    const all = answers[0]?.a as CliResult;
    assert.equal(all.stdout.trimEnd().split("\n").length, last);
    assert.match(all.stdout, /reconcilePass/);
  });

  it("llmgw replay --until-seq folds the fleet in the API as replay folds it from NATS", async () => {
    const [early, missing, ...answers] = await Promise.all([
      viaApi(["replay", "--until-seq", "4", "--json"]),
      viaApi(["replay", "--replica", "r-nope"]),
      ...(await bothWays(
        [
          ["replay", "--until-seq", String(last - 1), "--json"],
          ["replay", "--until-seq", String(last)],
          ["replay", "--json", "--node", "gpu-b1"],
        ],
        ["--no-snapshots"],
      )),
    ]);
    for (const { args, a, n } of answers) {
      assert.equal(a.code, 0, `${args.join(" ")}: ${a.stderr}`);
      assert.equal(n.code, 0, `${args.join(" ")}: ${n.stderr}`);
      assert.equal(a.stdout, n.stdout, args.join(" "));
    }
    const at4 = JSON.parse(early.stdout);
    assert.equal(at4.seq, 4);
    assert.deepEqual(Object.keys(at4.state.inventory.nodes).sort(), ["gpu-a1", "gpu-a2", "gpu-b1"]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /replica r-nope .*not found/);
  });

  it("llmgw explain replica and node answer the recorded decisions, as from NATS", async () => {
    const answers = await bothWays([
      ["explain", "replica", "r-70b-1"],
      ["explain", "replica", "r-70b-1", "--json"],
      ["explain", "replica", "r-70b-2", "--json"],
      ["explain", "node", "gpu-a1", "--json"],
      ["explain", "replica", "r-405b-1", "--at", "4"],
    ]);
    for (const { args, a, n } of answers) {
      assert.equal(a.code, 0, `${args.join(" ")}: ${a.stderr}`);
      assert.equal(a.stdout, n.stdout, args.join(" "));
    }
    const placed = JSON.parse(answers[1]?.a.stdout ?? "");
    assert.ok(placed.decisions.length > 0);
  });

  it("llmgw check-log checks the records the API pages, with the verdict reading NATS gives", async () => {
    const [a, n] = await Promise.all([viaApi(["check-log"]), viaNats(["check-log"])]);
    assert.equal(a.code, 0, a.stderr);
    assert.equal(n.code, 0, n.stderr);
    assert.match(a.stdout, new RegExp(`^ok: ${last} events \\(sequences 1–${last}\\)`));
    assert.equal(a.stdout, n.stdout);
  });

  it("llmgw what-if needs the operator role through the API: a viewer gets 403, an operator the NATS answer", async () => {
    const file = join(tempDir("what-if"), "alt.yaml");
    writeFileSync(file, "policy: spread\n");
    const [viewer, op, n] = await Promise.all([
      viaApi(["what-if", "--config", file]),
      viaApi(["what-if", "--config", file, "--json"], OPERATOR_TOKEN),
      viaNats(["what-if", "--config", file, "--json"]),
    ]);
    assert.equal(viewer.code, 1);
    assert.match(viewer.stderr, /operator/);
    const status = await fetch(`${api.url}/v1/what-if`, {
      method: "POST",
      headers: { authorization: `Bearer ${VIEWER_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ config: { policy: "spread" } }),
    });
    assert.equal(status.status, 403);
    assert.equal(op.code, 0, op.stderr);
    assert.deepEqual(JSON.parse(op.stdout), JSON.parse(n.stdout));
  });

  it("--nats on the command line wins over LLMGW_API_URL: it reads NATS (here, the unreachable one)", async () => {
    const [r, noToken] = await Promise.all([
      viaApi(["events", "--nats", `nats://127.0.0.1:${noNats.port}`]),
      runCli(["events"], {
        env: {
          LLMGW_API_URL: api.url,
          LLMGW_API_TOKEN: undefined,
          LLMGW_CONFIG: join(tempDir("c"), "c.yaml"),
        },
      }),
    ]);
    assert.notEqual(r.code, 0);
    assert.doesNotMatch(r.stdout, /reconcilePass/);
    assert.equal(noToken.code, 1);
    assert.match(noToken.stderr, /token/i);
  });
});
