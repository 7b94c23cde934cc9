/**
 * Who may ask for engine output, against a real nats-server running the
 * authorization block `llmgw nats-auth init` writes: the API's credentials
 * reach a gateway's ask and control subjects, and only the gateway's answer
 * on the reply subjects, which only the API may read. No other role's ask
 * (reader, router, reconciler, archiver, nor a gateway asking another
 * gateway) reaches a gateway, and no other role may listen to the answers.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { NatsConnection } from "@nats-io/transport-node";
import { EngineLogSubjects } from "../../src/engine-logs/index.js";
import { connectNats } from "../../src/log/index.js";
import { NATS_ROLES } from "../../src/nats-auth/index.js";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { rand } from "../support/gateway.js";
import { natsAuthInit, roleAuthenticator } from "../support/nats-auth.js";

describe("engine-log subjects: the API asks, gateways answer (real nats-server with the generated auth config)", () => {
  const stream = uniqueStream("ELOG");
  const prefix = `elog${rand()}.evt`;
  const dir = tempDir("engine-log-roles");
  const subjects = new EngineLogSubjects(prefix);
  let server: (NatsServer & { close(): Promise<void> }) | undefined;
  const conns: NatsConnection[] = [];
  const as = async (role: string) => {
    const nc = await connectNats({
      url: server!.url,
      name: `test ${role}`,
      security: { authenticator: roleAuthenticator(dir, role) },
    });
    conns.push(nc);
    return nc;
  };

  before(async () => {
    await natsAuthInit(dir, stream, prefix);
    server = await startServer({ include: join(dir, "auth.conf") });
  });
  after(async () => {
    for (const nc of conns) await nc.close().catch(() => {});
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("only the API's ask and control reach a gateway; only a gateway's answer reaches the API", async () => {
    const gateway = await as("gateway");
    const asks: string[] = [];
    const controls: string[] = [];
    gateway.subscribe(subjects.ask("gw-1"), { callback: (_e, m) => void asks.push(m.string()) });
    gateway.subscribe(subjects.control("gw-1"), { callback: (_e, m) => void controls.push(m.string()) });
    const api = await as("api");
    const answers: string[] = [];
    api.subscribe(subjects.reply("r-1"), { callback: (_e, m) => void answers.push(m.string()) });
    await gateway.flush();
    await api.flush();

    for (const role of NATS_ROLES) {
      const nc = role === "gateway" ? gateway : role === "api" ? api : await as(role);
      nc.publish(subjects.ask("gw-1"), `ask from ${role}`, { reply: subjects.reply("r-1") });
      nc.publish(subjects.control("gw-1"), `control from ${role}`);
      nc.publish(subjects.reply("r-1"), `answer from ${role}`);
      await nc.flush().catch(() => {});
    }
    // Time for anything that got through to arrive.
    await new Promise((r) => setTimeout(r, 500));
    await gateway.flush();
    await api.flush();
    assert.deepEqual(asks, ["ask from api"], "asks a gateway received");
    assert.deepEqual(controls, ["control from api"], "controls a gateway received");
    assert.deepEqual(answers, ["answer from gateway"], "answers the API received");
  });

  it("no role but the API may listen to the answers, and none but a gateway to the asks", async () => {
    for (const role of NATS_ROLES) {
      const nc = await as(role);
      for (const [subject, allowed] of [
        [subjects.replies, role === "api"],
        [subjects.asks, role === "gateway"],
        [subjects.controls, role === "gateway"],
      ] as const) {
        const sub = nc.subscribe(subject);
        await nc.flush();
        if (allowed) {
          sub.unsubscribe();
          continue;
        }
        const ended = await sub.closed.then(
          (v) => v,
          (err: unknown) => err,
        );
        assert.match(
          String(ended),
          /Permissions Violation for Subscription/,
          `${role} subscribing to ${subject}`,
        );
      }
    }
  });
});
