/**
 * The queue between an agent stream's request body and the session's
 * reader: messages already decoded are taken without waiting
 * (`takeWaiting`), in order with the reads that wait, and an end or a
 * failure is left to the reads.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { MessageQueue } from "../../src/gateway/agent-call/requests.js";
import { type AgentMessage, AgentMessageSchema, ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";

const status = (i: number): AgentMessage =>
  create(AgentMessageSchema, {
    msg: { case: "shard", value: { replicaId: "r-1", shardId: `sh-${i}`, state: ShardStatus_State.RUNNING } },
  });
const shardOf = (m: AgentMessage | undefined) => (m?.msg.case === "shard" ? m.msg.value.shardId : undefined);

describe("agent call: the request queue", () => {
  it("hands over what is queued without waiting, in order, and nothing once it is empty", () => {
    const q = new MessageQueue(
      () => {},
      () => {},
    );
    for (let i = 0; i < 3; i++) q.push(status(i));
    assert.deepEqual([q.takeWaiting(), q.takeWaiting(), q.takeWaiting()].map(shardOf), [
      "sh-0",
      "sh-1",
      "sh-2",
    ]);
    assert.equal(q.takeWaiting(), undefined);
  });

  it("a message pushed while a read waits goes to that read, not to a later take", () => {
    const q = new MessageQueue(
      () => {},
      () => {},
    );
    const got: Array<string | undefined> = [];
    q.readInto(
      (r) => got.push(r.done ? "end" : shardOf(r.value)),
      () => got.push("error"),
    );
    q.push(status(0));
    q.push(status(1));
    assert.deepEqual(got, ["sh-0"]);
    assert.equal(shardOf(q.takeWaiting()), "sh-1");
  });

  it("leaves the end and a failure to the reads", async () => {
    const ended = new MessageQueue(
      () => {},
      () => {},
    );
    ended.push(status(0));
    ended.end(undefined);
    assert.equal(shardOf(ended.takeWaiting()), "sh-0", "what came before the end is taken");
    assert.equal(ended.takeWaiting(), undefined);
    assert.deepEqual(await ended.next(), { value: undefined, done: true });

    let stopped = 0;
    const failed = new MessageQueue(
      () => {},
      () => stopped++,
    );
    failed.push(status(0));
    failed.fail(new ConnectError("gone", Code.Canceled));
    assert.equal(failed.takeWaiting(), undefined, "a failure drops what was queued");
    assert.equal(stopped, 1);
    await assert.rejects(failed.next(), /gone/);
  });

  it("asks for more once takes have drained it to half of what it reads ahead", () => {
    let drained = 0;
    const q = new MessageQueue(
      () => drained++,
      () => {},
    );
    for (let i = 0; i < 64; i++) q.push(status(i));
    for (let i = 0; i < 31; i++) q.takeWaiting();
    assert.equal(drained, 0);
    q.takeWaiting();
    assert.equal(drained, 1, "at 32 left");
    for (let i = 0; i < 32; i++) assert.equal(shardOf(q.takeWaiting()), `sh-${32 + i}`);
    assert.equal(drained, 1);
  });
});
