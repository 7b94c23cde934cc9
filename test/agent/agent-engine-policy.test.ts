// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the assertions
/**
 * The catalog cannot run code on a node, even forged: a real `llmgw agent`
 * process behind the real gateway, with a `llmgw reconciler` process and the
 * operator API on a real nats-server.
 *
 * - A catalog with `LD_PRELOAD` in `engineEnv` is refused at apply (400
 *   naming `engineEnv.LD_PRELOAD`), and nothing is written.
 * - The same catalog written into the log directly (as a holder of the API's
 *   NATS credentials could) is placed by the reconciler and its start sent;
 *   the agent refuses it by its own check: the command's result and a FAILED
 *   shard status name the variable, and no engine process is started.
 * - The agent's allow lists: an argument outside `allowedArgPrefixes` (a
 *   catalog the API accepts) is refused the same way; one inside starts.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { EventSchema, Writer_Kind } from "../../src/gen/llmgw/v1/events_pb.js";
import type { LogRecord } from "../../src/log/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";
import { shardStatuses, until } from "../support/agent-process.js";
import { startNode, tp1Profile, withAgentWorld } from "../support/agent-world.js";
import { rand, readAll } from "../support/gateway.js";

const NODE = "gpu-p1";

/** The failed start of a model's shard on NODE: the start sent, its result, the FAILED status. */
function failedStart(records: LogRecord[], model: string) {
  const start = records
    .flatMap((r) => (r.event.body.case === "reconcilePass" ? r.event.body.value.commands : []))
    .find((c) => c.nodeId === NODE && c.action.case === "start" && c.action.value.model === model);
  if (start?.action.case !== "start") return undefined;
  const cmd = start.action.value;
  const result = records.find(
    (r) => r.event.body.case === "commandResult" && r.event.body.value.result?.commandId === cmd.commandId,
  );
  const failed = shardStatuses(records, NODE).find(
    (x) => x.status.shardId === cmd.shardId && x.status.state === State.FAILED,
  );
  if (!result || !failed || result.event.body.case !== "commandResult") return undefined;
  return { cmd, result: result.event.body.value.result!, failed: failed.status };
}

describe("llmgw agent: the engine policy holds against a forged catalog (real processes)", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("refuses LD_PRELOAD at apply, and again on the node when the catalog is forged into the log; allow lists hold", async () => {
    await withAgentWorld(server, { name: "agpol" }, async (w) => {
      const { dir, stack: s, why } = w;
      const a = await startNode(w, NODE, {
        gpus: [{}, {}],
        config: {
          startDelayMs: 200,
          allowedEnv: ["FAKE_ENGINE_*"],
          allowedArgPrefixes: ["--served-model-name="],
        },
      });

      // 1. Through the API: refused at apply, naming the variable; nothing written.
      const hostile = {
        models: [
          {
            name: "forged",
            replicas: 1,
            profiles: [tp1Profile({ engineEnv: { LD_PRELOAD: join(dir, "evil.so"), FAKE_ENGINE_X: "1" } })],
          },
        ],
      };
      const before = await s.log.lastSeq();
      const refused = await s.request("/v1/catalog", {
        method: "PUT",
        body: JSON.stringify(hostile),
        headers: { "content-type": "application/json" },
      });
      assert.equal(refused.status, 400);
      assert.equal(refused.body.error.code, "invalid-catalog");
      const issue = (refused.body.error.issues as Array<{ path: string; message: string }>).find(
        (i) => i.path === "models[0].profiles[0].engineEnv.LD_PRELOAD",
      );
      assert.ok(issue, `an issue at engineEnv.LD_PRELOAD: ${JSON.stringify(refused.body.error.issues)}`);
      assert.match(issue.message, /may not be set by the catalog \(deny list LD_\*/);
      const written = (await readAll(s.log)).filter((r) => r.seq > before);
      assert.ok(
        !written.some((r) => r.event.body.case === "catalogChanged"),
        "no catalog written for the refused apply",
      );

      // 2. Forged into the log, past the API: the reconciler places it, the agent refuses it.
      await s.log.append(
        create(EventSchema, {
          id: `forged-${rand()}`,
          timeUnixMs: BigInt(Date.now()),
          writer: { kind: Writer_Kind.OPERATOR, id: "mallory" },
          body: {
            case: "catalogChanged",
            value: {
              appliedBy: "mallory",
              catalog: {
                models: [
                  {
                    name: "forged",
                    replicas: 1,
                    profiles: [
                      {
                        name: "tp1",
                        shards: 1,
                        gpusPerShard: 1,
                        memoryPerGpuMb: 16_384n,
                        engine: "default",
                        engineEnv: { LD_PRELOAD: join(dir, "evil.so"), FAKE_ENGINE_X: "1" },
                      },
                    ],
                  },
                ],
              },
            },
          },
        }),
      );
      const forged = await until(
        "the forged start refused by the agent",
        async () => failedStart(await readAll(s.log), "forged"),
        { timeoutMs: 30_000, why },
      );
      assert.equal(
        forged.cmd.engineEnv["LD_PRELOAD"],
        join(dir, "evil.so"),
        "the start did carry LD_PRELOAD",
      );
      assert.equal(forged.result.ok, false);
      assert.match(forged.result.error, /start refused by this node's engine policy/);
      assert.match(forged.result.error, /engineEnv\.LD_PRELOAD may not be set by the catalog/);
      assert.equal(forged.failed.error, forged.result.error, "the FAILED status says the same reason");
      assert.equal(
        existsSync(join(dir, `${forged.cmd.shardId}.json`)),
        false,
        "no engine was started for the forged start",
      );
      assert.match(a.output(), /command refused/);

      // 3. The agent's allow lists: the API accepts this catalog, the node does not.
      await s.call("PUT", "/v1/catalog", {
        models: [
          { name: "flagged", replicas: 1, profiles: [tp1Profile({ engineArgs: ["--trust-remote-code"] })] },
        ],
      });
      const flagged = await until(
        "the start outside allowedArgPrefixes refused",
        async () => failedStart(await readAll(s.log), "flagged"),
        { timeoutMs: 30_000, why },
      );
      assert.match(
        flagged.result.error,
        /engineArgs\[0\] does not start with one of this engine's allowedArgPrefixes \(--served-model-name=\)/,
      );
      assert.equal(existsSync(join(dir, `${flagged.cmd.shardId}.json`)), false, "no engine started");

      // Inside the allow lists the engine starts, with what the catalog asked for.
      await s.call("PUT", "/v1/catalog", {
        models: [
          {
            name: "allowed",
            replicas: 1,
            profiles: [
              tp1Profile({
                engineArgs: ["--served-model-name=qwen"],
                engineEnv: { FAKE_ENGINE_PROFILE: "tp1" },
              }),
            ],
          },
        ],
      });
      await until(
        "the allowed shard RUNNING",
        async () => {
          const recs = await readAll(s.log);
          const start = recs
            .flatMap((r) => (r.event.body.case === "reconcilePass" ? r.event.body.value.commands : []))
            .find((c) => c.action.case === "start" && c.action.value.model === "allowed");
          const shardId = start?.action.case === "start" ? start.action.value.shardId : undefined;
          return shardStatuses(recs, NODE).find(
            (x) => x.status.shardId === shardId && x.status.state === State.RUNNING,
          );
        },
        { timeoutMs: 30_000, why },
      );
    });
  });
});
