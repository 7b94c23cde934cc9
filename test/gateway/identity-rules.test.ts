import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import type { EventInit } from "../../src/codec/index.js";
import { DuplicateReports, isLive, type LocalSession, liveHolder } from "../../src/gateway/duplicates.js";
import { SessionRegistry } from "../../src/gateway/registry.js";
import {
  cnKey,
  normalizeSerial,
  parseRevocationKey,
  readRevocationValue,
  serialKey,
} from "../../src/gateway/revocation-keys.js";
import { SessionsWatch } from "../../src/gateway/sessions-watch.js";
import { EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import type { LogRecord } from "../../src/log/index.js";

const HB_TIMEOUT = 15_000;

function local(o: Partial<LocalSession> = {}): LocalSession {
  return {
    sessionId: "s-1",
    instanceId: "first",
    remoteAddress: "10.0.0.5:5000",
    closing: false,
    silentForMs: 100,
    longestGapMs: 3_000,
    ...o,
  };
}

function record(seq: number, body: EventInit["body"]): LogRecord {
  return { seq, timeMs: seq, subject: "x", event: create(EventSchema, { id: `e-${seq}`, body }) };
}

describe("duplicate identity rules", () => {
  it("a local session is live within twice its longest gap (1 s to the heartbeat timeout)", () => {
    assert.equal(isLive(local({ silentForMs: 5_900, longestGapMs: 3_000 }), HB_TIMEOUT), true);
    assert.equal(isLive(local({ silentForMs: 6_100, longestGapMs: 3_000 }), HB_TIMEOUT), false);
    assert.equal(isLive(local({ silentForMs: 900, longestGapMs: 10 }), HB_TIMEOUT), true, "at least 1 s");
    assert.equal(isLive(local({ silentForMs: 1_100, longestGapMs: 10 }), HB_TIMEOUT), false);
    assert.equal(isLive(local({ silentForMs: 14_000, longestGapMs: undefined }), HB_TIMEOUT), true);
    assert.equal(isLive(local({ silentForMs: 15_000, longestGapMs: 60_000 }), HB_TIMEOUT), false);
    assert.equal(isLive(local({ closing: true }), HB_TIMEOUT), false, "a closing stream is dead");
    assert.equal(isLive(local({ sessionId: "" }), HB_TIMEOUT), false, "not opened");
  });

  it("only another, live agent process is a holder; the same process takes over, one without an id only from a holder without one", () => {
    const live = [local()];
    assert.equal(liveHolder("second", live, undefined, "gw", HB_TIMEOUT)?.where, "local");
    assert.equal(liveHolder("first", live, undefined, "gw", HB_TIMEOUT), undefined, "same process");
    assert.equal(
      liveHolder("", live, undefined, "gw", HB_TIMEOUT)?.instanceId,
      "first",
      "a newcomer without an id never takes over a holder with one",
    );
    assert.equal(liveHolder("", [local({ instanceId: "" })], undefined, "gw", HB_TIMEOUT), undefined);
    assert.equal(liveHolder("second", [local({ instanceId: "" })], undefined, "gw", HB_TIMEOUT), undefined);
    assert.equal(
      liveHolder("second", [local({ silentForMs: 60_000 })], undefined, "gw", HB_TIMEOUT),
      undefined,
    );

    const logged = {
      sessionId: "s-9",
      gatewayId: "gw-a",
      instanceId: "first",
      remoteAddress: "10.0.0.5:5000",
      closed: false,
    };
    const remote = liveHolder("second", [], logged, "gw-b", HB_TIMEOUT);
    assert.deepEqual(remote, { where: "remote", ...logged });
    assert.deepEqual(liveHolder("", [], logged, "gw-b", HB_TIMEOUT), { where: "remote", ...logged });
    assert.equal(liveHolder("second", [], { ...logged, closed: true }, "gw-b", HB_TIMEOUT), undefined);
    assert.equal(
      liveHolder("second", [], logged, "gw-a", HB_TIMEOUT),
      undefined,
      "own sessions are checked locally",
    );
  });

  it("reports a node at most once per window, counting the attempts in between", () => {
    const r = new DuplicateReports(1_000);
    assert.equal(r.refused("n", 0), 1);
    assert.equal(r.refused("n", 100), undefined);
    assert.equal(r.refused("n", 200), undefined);
    assert.equal(r.refused("other", 300), 1);
    assert.equal(r.refused("n", 1_100), 3);
  });

  it("the sessions watch knows whether a node's newest session closed, was expired or its gateway restarted", () => {
    const watch = new SessionsWatch(new SessionRegistry());
    const open = (seq: number, node: string, gatewayId: string, sessionId: string) =>
      watch.onRecord(
        record(seq, {
          case: "sessionOpened",
          value: { nodeId: node, sessionId, gatewayId, registration: { nodeId: node, instanceId: "i" } },
        }),
      );
    open(1, "a", "gw-a", "s-a");
    open(2, "b", "gw-a", "s-b");
    open(3, "c", "gw-b", "s-c");
    assert.equal(watch.newest("a")?.closed, false);
    assert.equal(watch.newest("a")?.instanceId, "i");
    watch.onRecord(
      record(4, { case: "sessionClosed", value: { nodeId: "a", sessionId: "s-a", gatewayId: "gw-a" } }),
    );
    assert.equal(watch.newest("a")?.closed, true);
    watch.onGatewayRecord(record(5, { case: "gatewayStarted", value: { gatewayId: "gw-a" } }));
    assert.equal(watch.newest("b")?.closed, true, "a restarted gateway holds none of its earlier sessions");
    assert.equal(watch.newest("c")?.closed, false);
    watch.onPass(
      record(6, {
        case: "reconcilePass",
        value: {
          decisions: [
            {
              kind: {
                case: "sessionsExpired",
                value: { gatewayId: "gw-b", sessions: [{ nodeId: "c", sessionId: "s-c" }] },
              },
            },
          ],
        },
      }),
    );
    assert.equal(watch.newest("c")?.closed, true);
  });
});

describe("revocation keys", () => {
  it("encodes CNs as subject tokens and serials in one spelling, both prefixed", () => {
    assert.equal(cnKey("gpu-017.rack4.dc1.example.com"), "cn-gpu-017_rack4_dc1_example_com");
    for (const spelled of ["0A:1B:2c", "0a1b2c", "0x0A1B2C", " a1b2c "])
      assert.equal(serialKey(spelled), "serial-a1b2c", spelled);
    assert.equal(normalizeSerial("00"), "0");
    assert.equal(normalizeSerial("xyz"), undefined);
    assert.throws(() => serialKey("not hex"), RangeError);
    assert.throws(() => cnKey("Not_A_Node"), RangeError);
    assert.deepEqual(parseRevocationKey("cn-gpu-1_dc1"), { kind: "cn", cn: "gpu-1.dc1" });
    assert.deepEqual(parseRevocationKey("serial-a1b2c"), { kind: "serial", serial: "a1b2c" });
    assert.equal(parseRevocationKey("serial-1f") === parseRevocationKey("cn-serial-1f"), false);
    assert.equal(parseRevocationKey("something-else"), undefined);
  });

  it("takes a value only when it parses and names the key's CN or serial", () => {
    const v = { reason: "r", revokedAtMs: 1, by: "ops" };
    const cn = { kind: "cn", cn: "gpu-1.dc1" } as const;
    const serial = { kind: "serial", serial: "a1b2c" } as const;
    assert.equal(readRevocationValue(cn, { ...v, cn: "gpu-1.dc1" }).ok, true);
    assert.equal(readRevocationValue(serial, { ...v, cn: "gpu-1", serial: "0A:1B:2C" }).ok, true);
    for (const [target, value] of [
      [cn, { ...v, cn: "gpu-2" }],
      [cn, "gpu-1.dc1"],
      [cn, { cn: "gpu-1.dc1" }],
      [serial, { ...v, cn: "gpu-1" }],
      [serial, { ...v, cn: "gpu-1", serial: "a1b2d" }],
      [serial, { ...v, cn: "gpu-1", serial: "not hex" }],
    ] as const) {
      const r = readRevocationValue(target, value);
      assert.equal(r.ok, false, JSON.stringify(value));
      assert.ok(!r.ok && r.why.length > 0);
    }
    assert.equal(parseRevocationKey("cn-A_B"), undefined);
  });
});
