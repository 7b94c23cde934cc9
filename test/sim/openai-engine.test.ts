// biome-ignore-all lint/suspicious/noExplicitAny: engine answers are loosely typed JSON, checked by the assertions
/**
 * Simulated engines that serve (`engineHttp`): a started shard listens on a
 * real loopback port, reports that address as its endpoint, and answers the
 * OpenAI API with text naming its replica; streamed answers arrive as
 * several server-sent events ending with [DONE]; a draining engine's health
 * turns 503 while it still answers; a stopped one is gone.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ShardStatus_State as State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { waitFor } from "../support/fake-gateway.js";
import { registered, statuses, withFleet } from "../support/sim.js";

const MODEL = "llama-3.1-8b";

async function post(url: string, body: unknown): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

/** The data lines of a server-sent event stream, read chunk by chunk as they arrive. */
async function sseData(res: Response): Promise<{ data: string[]; reads: number }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let reads = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    reads++;
    text += decoder.decode(value, { stream: true });
  }
  const data = text
    .split("\n\n")
    .filter((e) => e.startsWith("data: "))
    .map((e) => e.slice("data: ".length));
  return { data, reads };
}

describe("simulated engines that answer the OpenAI API (engineHttp)", () => {
  it("serve at the endpoint they report, stream, drain with health 503 and stop", () =>
    withFleet({ nodes: 1, engineHttp: true, engineChunkMs: 5 }, async (_fleet, gw) => {
      const s = await registered(gw, "node-1");
      gw.command("node-1", {
        case: "start",
        value: {
          shardId: "sh-1",
          replicaId: "r-8b-1",
          model: MODEL,
          profile: "tp1",
          gpuIndices: [0],
          worldSize: 1,
        },
      });
      const running = await waitFor("RUNNING", () =>
        statuses(s, "sh-1").find((x) => x.state === State.RUNNING),
      );
      assert.match(running.endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
      const base = running.endpoint;

      assert.equal((await fetch(`${base}/health`)).status, 200);
      const models: any = await (await fetch(`${base}/v1/models`)).json();
      assert.deepEqual(
        models.data.map((m: any) => m.id),
        [MODEL],
      );

      const chat: any = await (
        await post(`${base}/v1/chat/completions`, {
          model: MODEL,
          messages: [{ role: "user", content: "hi" }],
        })
      ).json();
      assert.equal(chat.object, "chat.completion");
      assert.match(chat.choices[0].message.content, /r-8b-1/);

      const text: any = await (await post(`${base}/v1/completions`, { model: MODEL, prompt: "hi" })).json();
      assert.equal(text.object, "text_completion");
      assert.match(text.choices[0].text, /shard sh-1 on node-1/);

      const emb: any = await (await post(`${base}/v1/embeddings`, { model: MODEL, input: "hi" })).json();
      assert.equal(emb.data[0].object, "embedding");
      assert.ok(emb.data[0].embedding.length > 0);

      const streamed = await post(`${base}/v1/chat/completions`, {
        model: MODEL,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      });
      assert.equal(streamed.headers.get("content-type"), "text/event-stream");
      const { data, reads } = await sseData(streamed);
      assert.equal(data.at(-1), "[DONE]");
      assert.ok(reads > 1, `the answer came in ${reads} reads`);
      const said = data
        .slice(0, -1)
        .map((d) => JSON.parse(d).choices[0].delta.content)
        .join("");
      assert.match(said, /^Hello from r-8b-1 \(shard sh-1 on node-1\)\.$/);

      // Bad input: the engine says what is wrong, as a real one would.
      assert.equal((await post(`${base}/v1/chat/completions`, { model: "other" })).status, 404);
      const notJson = await fetch(`${base}/v1/completions`, { method: "POST", body: "{" });
      assert.equal(notJson.status, 400);
      assert.match(((await notJson.json()) as any).error.message, /not JSON/);

      const metrics = await (await fetch(`${base}/metrics`)).text();
      assert.match(metrics, /^vllm:num_requests_waiting\{model_name="llama-3.1-8b"\} 0$/m);

      gw.command("node-1", { case: "drain", value: { shardId: "sh-1", deadlineUnixMs: 0n } });
      await waitFor("DRAINING", () => statuses(s, "sh-1").some((x) => x.state === State.DRAINING));
      if (!statuses(s, "sh-1").some((x) => x.state === State.STOPPED)) {
        // Still draining: unhealthy to new probes, but answering.
        const health = await fetch(`${base}/health`).catch(() => undefined);
        if (health) assert.equal(health.status, 503);
      }
      await waitFor("STOPPED", () => statuses(s, "sh-1").some((x) => x.state === State.STOPPED));
      await assert.rejects(fetch(`${base}/health`), "a stopped engine's port is closed");
    }));

  it("reports a preloaded engine's address in the first registration", () =>
    withFleet(
      {
        nodes: 1,
        engineHttp: true,
        runningShards: {
          "node-1": [{ shardId: "sh-p", replicaId: "r-p", model: MODEL, profile: "tp1", gpuIndices: [2] }],
        },
      },
      async (_fleet, gw) => {
        const s = await registered(gw, "node-1");
        const shard = s.register!.runningShards[0]!;
        assert.match(shard.endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
        const res: any = await (
          await post(`${shard.endpoint}/v1/completions`, { model: MODEL, prompt: "x" })
        ).json();
        assert.match(res.choices[0].text, /r-p/);
      },
    ));
});
