/**
 * `llmgw check-log` as a child process over a real nats-server: a log a real
 * gateway wrote (and the agent's own record of its acks) checks clean; a
 * fenced-out pass, a lost acknowledged message and bad usage each get their
 * exit code and a message naming the sequence or the field.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import type { Gateway } from "../../src/gateway/index.js";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { EventSchema, Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import { type Log, openLog } from "../../src/log/index.js";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { TestAgent } from "../support/agent.js";
import { runCli } from "../support/cli.js";
import { rand, startTestGateway } from "../support/gateway.js";
import { assertLogInvariants } from "../support/invariants.js";
import { h100Registration } from "../support/sample-events.js";

describe("llmgw check-log against a real nats-server", () => {
  let server: NatsServer & { close(): Promise<void> };
  let log: Log;
  let gw: Gateway | undefined;
  let acked: Array<{ nodeId: string; sessionId: string; messageId: string }> = [];
  const stream = uniqueStream("CHK");
  const prefix = `c${rand()}.evt`;
  const dir = tempDir("chk");
  const flags = () => ["--nats", server.url, "--stream", stream, "--subject-prefix", prefix];

  before(async () => {
    server = await startServer();
    log = await openLog({ url: server.url, clientName: "test", name: stream, prefix });
    gw = await startTestGateway({ nats: server.url, stream, prefix });
    const agent = await TestAgent.connect({ baseUrl: gw.url, registration: h100Registration("gpu-c1", []) });
    const last = agent.shardStatus({ replicaId: "r-1", shardId: "s-1", state: ShardStatus_State.RUNNING });
    agent.commandResult({ commandId: "cmd-1", ok: true });
    await agent.waitForAck(last + 1);
    acked = agent.acked();
    await agent.close();
    await gw.drain("test over");
    gw = undefined;
  });
  after(async () => {
    await gw?.drain("test over");
    await log?.close();
    await server?.close();
  });

  it("a log written by a real gateway keeps every invariant, with the agent's acks", async () => {
    assert.equal(acked.length, 3, "registration, status and result were acknowledged");
    const file = join(dir, "acked.json");
    writeFileSync(file, JSON.stringify(acked));
    const r = await runCli(["check-log", ...flags(), "--acked", file]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(
      r.stdout,
      /^ok: \d+ events \(sequences 1–\d+\), 1 sessions, 0 passes, 3 acknowledged messages/m,
    );
    await assertLogInvariants(log, { acked });
  });

  it("a lost acknowledged message is named (exit 1), also as JSON", async () => {
    const file = join(dir, "acked-lines.jsonl");
    const lost = { ...acked[0]!, messageId: "42" };
    writeFileSync(file, [...acked, lost].map((a) => JSON.stringify(a)).join("\n"));
    const j = await runCli(["check-log", ...flags(), "--acked", file, "--json"]);
    assert.equal(j.code, 1, j.stdout + j.stderr);
    const report = JSON.parse(j.stdout) as {
      violations: Array<{ rule: string; seq: number; message: string }>;
    };
    assert.deepEqual(
      report.violations.map((v) => v.rule),
      ["acked-lost"],
    );
    assert.match(
      report.violations[0]!.message,
      /message 42 of session .* is not in the log \(session opened at \d+\)/,
    );
  });

  it("a pass from a stale log position is a fencing violation naming its sequence (exit 1)", async () => {
    const pass = (id: string, observedSeq: number) =>
      create(EventSchema, {
        id,
        timeUnixMs: BigInt(Date.now()),
        writer: { kind: Writer_Kind.RECONCILER, id: "rec-x" },
        body: { case: "reconcilePass", value: { leaderId: "rec-x", observedSeq: BigInt(observedSeq) } },
      });
    const first = await log.append(pass(`p-${rand()}`, (await log.lastSeq()) - 1));
    const stale = await log.append(pass(`p-${rand()}`, first.seq - 1));
    const r = await runCli(["check-log", ...flags()]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, new RegExp(`^seq ${stale.seq} \\[fencing\\] pass at ${stale.seq} by rec-x`, "m"));
    assert.match(r.stdout, /^1 violation in \d+ events/m);
  });

  it("bad usage exits 2 naming the flag; a missing stream exits 1 saying what to check", async () => {
    const bad = join(dir, "bad.json");
    writeFileSync(bad, '[{"nodeId":"gpu-c1","sessionId":"s"}]');
    let r = await runCli(["check-log", ...flags(), "--acked", bad]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /invalid --acked .*entry 0: messageId/);
    r = await runCli(["check-log", "--nats", server.url, "--stream", "NO_SUCH_STREAM"]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /there is no stream "NO_SUCH_STREAM"/);
  });
});
