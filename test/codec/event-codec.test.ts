import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, equals, toBinary } from "@bufbuild/protobuf";
import { type EventKind, encodeEvent } from "../../src/codec/index.js";
import { EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { decodeEvent, isLogError, Subjects, subjectFor } from "../../src/log/index.js";
import { sampleEvents } from "../support/sample-events.js";

const ALL_KINDS: EventKind[] = [
  "sessionOpened",
  "sessionClosed",
  "hardwareChanged",
  "usageChanged",
  "shardStatus",
  "commandResult",
  "gatewayStarted",
  "gatewayDraining",
  "gatewayStopped",
  "catalogChanged",
  "nodeCordoned",
  "nodeUncordoned",
  "nodeDrainRequested",
  "reconcilePass",
  "commandUndeliverable",
  "gpuProblemsCleared",
  "gpuCordoned",
  "gpuUncordoned",
  "duplicateIdentity",
  "rolloutPaused",
  "rolloutResumed",
];

describe("event codec", () => {
  it("round-trips every event kind", () => {
    const events = sampleEvents();
    const kinds = new Set(events.map((e) => e.body.case));
    for (const k of ALL_KINDS) assert.ok(kinds.has(k), `sample events lack ${k}`);
    // The oneof in the schema has exactly these cases: a new kind must be added to the samples too.
    assert.equal(EventSchema.oneofs[0]?.fields.length, ALL_KINDS.length);
    for (const e of events) {
      const back = decodeEvent(encodeEvent(e), 1);
      assert.ok(equals(EventSchema, e, back), `${e.body.case} did not round-trip`);
    }
  });

  it("decodes events carrying fields from a newer version", () => {
    const e = sampleEvents()[2]!;
    const bytes = encodeEvent(e);
    // Field 500 (varint) and field 501 (length-delimited): unknown to this version.
    const extra = new Uint8Array([0xa0, 0x1f, 0x2a, 0xaa, 0x1f, 0x03, 0x61, 0x62, 0x63]);
    const withUnknown = new Uint8Array([...bytes, ...extra]);
    const back = decodeEvent(withUnknown, 7);
    assert.equal(back.id, e.id);
    assert.equal(back.body.case, "sessionOpened");
    // An unknown body kind (a new oneof member) decodes with no case.
    const future = new Uint8Array([
      ...toBinary(EventSchema, create(EventSchema, { id: "f-1" })),
      0xba,
      0x06,
      0x00,
    ]);
    const f = decodeEvent(future, 8);
    assert.equal(f.id, "f-1");
    assert.equal(f.body.case, undefined);
  });

  it("refuses malformed bytes with an error naming the sequence", () => {
    const good = encodeEvent(sampleEvents()[2]!);
    const cases: Array<[string, Uint8Array]> = [
      ["empty", new Uint8Array()],
      ["truncated", good.subarray(0, Math.floor(good.length / 2))],
      ["garbage", new TextEncoder().encode("this is not protobuf \u0000\u00ff\u00fe")],
      ["no id", toBinary(EventSchema, create(EventSchema, { timeUnixMs: 5n }))],
    ];
    for (const [name, bytes] of cases) {
      assert.throws(
        () => decodeEvent(bytes, 42),
        (err: unknown) => isLogError(err, "malformed") && err.seq === 42 && /sequence 42/.test(err.message),
        name,
      );
    }
  });

  it("maps every kind to its subject and refuses node ids that are not DNS names", () => {
    const s = new Subjects("llmgw.evt");
    const subjects = sampleEvents().map((e) => subjectFor(s, e));
    assert.ok(subjects.includes("llmgw.evt.session.gpu-a1"));
    assert.ok(subjects.includes("llmgw.evt.node.gpu-a1"));
    assert.ok(subjects.includes("llmgw.evt.catalog"));
    assert.ok(subjects.includes("llmgw.evt.reconciler"));
    assert.ok(subjects.includes("llmgw.evt.gateway.gw-1"));
    assert.ok(subjects.includes("llmgw.evt.operator.gpu-a1"));
    for (const bad of ["a_b", "A.b", "a..b", "*", ">", "a b", "", "x".repeat(64), "x".repeat(254)]) {
      assert.throws(() => s.node(bad), RangeError, bad);
    }
  });
});
