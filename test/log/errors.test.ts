/**
 * NATS errors become LogErrors by the client's exported error classes and
 * codes, never by the text of their messages: errors the real client
 * throws against a real nats-server, and the classes it exports.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { JetStreamStatusError } from "@nats-io/jetstream/internal";
import {
  AuthorizationError,
  ClosedConnectionError,
  connect,
  DrainingConnectionError,
  NoRespondersError,
  PermissionViolationError,
  RequestError,
  TimeoutError,
} from "@nats-io/transport-node";
import { logErrorFrom } from "../../src/log/index.js";
import { type NatsServer, startServer } from "../harness/nats.js";

async function thrown(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  assert.fail("expected the call to throw");
}

describe("logErrorFrom: NATS errors by class and code", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  it("a request nobody answers is unavailable", async () => {
    const nc = await connect({ servers: server.url });
    try {
      const err = await thrown(() => nc.request("nobody.listens", "x", { timeout: 500 }));
      assert.equal(logErrorFrom(err).code, "unavailable", String(err));
    } finally {
      await nc.close();
    }
  });

  it("a request that is not answered in time is unavailable", async () => {
    const nc = await connect({ servers: server.url });
    try {
      const sub = nc.subscribe("silent.service");
      const err = await thrown(() => nc.request("silent.service", "x", { timeout: 100, noMux: true }));
      sub.unsubscribe();
      assert.equal(logErrorFrom(err).code, "unavailable", String(err));
    } finally {
      await nc.close();
    }
  });

  it("a request on a closed connection is unavailable", async () => {
    const nc = await connect({ servers: server.url });
    await nc.close();
    const err = await thrown(() => nc.request("any.subject", "x", { timeout: 500 }));
    assert.equal(logErrorFrom(err).code, "unavailable", String(err));
  });

  it("the client's transport classes, bare or as the cause of another error, are unavailable", () => {
    for (const err of [
      new TimeoutError(),
      new NoRespondersError("s"),
      new ClosedConnectionError(),
      new DrainingConnectionError(),
      new RequestError("request failed", { cause: new NoRespondersError("s") }),
      new Error("wrapped", { cause: new TimeoutError() }),
      new JetStreamStatusError("no responders", 503),
      Object.assign(new Error("connect failed"), { code: "ECONNREFUSED" }),
    ]) {
      assert.equal(logErrorFrom(err).code, "unavailable", `${err.name}: ${err.message}`);
    }
  });

  it("the server's refusals are permission-denied and unauthenticated, bare or as a cause", () => {
    const violation = new PermissionViolationError(
      'Permissions Violation for Publish to "x.reconciler"',
      "publish",
      "x.reconciler",
    );
    for (const err of [violation, new Error("request failed", { cause: violation })]) {
      const e = logErrorFrom(err);
      assert.equal(e.code, "permission-denied");
      assert.match(e.message, /may not publish to "x\.reconciler"/);
    }
    assert.equal(logErrorFrom(new AuthorizationError("Authorization Violation")).code, "unauthenticated");
    assert.equal(logErrorFrom(new Error("Permissions Violation for Publish")).code, "internal");
  });

  it("an error whose text only sounds like a timeout is not taken for one", () => {
    for (const message of ["timeout", "the connection was closed by the user's choice", "503"]) {
      assert.equal(logErrorFrom(new Error(message)).code, "internal", message);
    }
  });
});
