import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { invalidIdReason, invalidNodeIdReason, nodeIdFromToken, nodeIdToken } from "../../src/ids/index.js";
import { Subjects } from "../../src/log/index.js";
import { invalidNodeIdReason as simInvalidNodeIdReason } from "../../src/sim/index.js";

const VALID = [
  "a",
  "gpu-1",
  "h100-a4",
  "0",
  "gpu-017.rack4.dc1.example.com",
  "gpu-1.dc1.example.com",
  "llmgw.evt.catalog",
  `${"a".repeat(63)}.b`,
  // 253 characters: four labels of 63 and the three dots between them, then one more label of 1.
  `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(61)}`,
];

const INVALID: Array<[string, RegExp]> = [
  ["", /node id is empty; it must be a DNS name/],
  ["a*b", /node id "a\*b" must be a DNS name \(RFC 1123\)/],
  ["a>b", /node id "a>b" must be a DNS name/],
  ["a b", /node id "a b" must be a DNS name/],
  ["UPPER", /node id "UPPER" must be a DNS name/],
  ["gpu_1", /node id "gpu_1" must be a DNS name/],
  ["gpu..1", /must be a DNS name/],
  [".gpu", /must be a DNS name/],
  ["gpu.", /must be a DNS name/],
  ["-gpu", /must be a DNS name/],
  ["gpu-", /must be a DNS name/],
  ["gpu-.a", /must be a DNS name/],
  ["gpu.-a", /must be a DNS name/],
  ["gpü", /must be a DNS name/],
  [`${"a".repeat(64)}.b`, /must be a DNS name/],
  ["a".repeat(254), /^node id is 254 characters long; it must be a DNS name/],
  ["constructor", /node id "constructor" is a reserved name/],
];

describe("node ids are DNS names", () => {
  it("takes RFC 1123 subdomains", () => {
    assert.equal(VALID.at(-1)?.length, 253);
    for (const id of VALID) assert.equal(invalidNodeIdReason(id), undefined, id);
  });

  it("refuses anything else, naming the rule", () => {
    for (const [id, why] of INVALID) {
      const reason = invalidNodeIdReason(id);
      assert.ok(reason, `${JSON.stringify(id)} is refused`);
      assert.match(reason, why, id);
      if (id.length > 253) assert.ok(!reason.includes(id), "a long id is not echoed");
    }
    assert.match(invalidNodeIdReason("A", "node_id") ?? "", /^node_id "A" must be/);
  });

  it("is the rule the simulator applies to the ids it makes", () => {
    for (const id of VALID.filter((v) => v !== "constructor"))
      assert.equal(simInvalidNodeIdReason(id), undefined);
    for (const [id] of INVALID) {
      if (id === "constructor") continue;
      assert.ok(simInvalidNodeIdReason(id), `the simulator refuses ${JSON.stringify(id)} too`);
    }
  });

  it("gateway ids keep their own rule", () => {
    assert.equal(invalidIdReason("gw_1"), undefined);
    assert.ok(invalidIdReason("gw.1"));
  });
});

describe("node id subject tokens", () => {
  it("round-trip, and no token holds a dot or a wildcard", () => {
    for (const id of VALID) {
      const token = nodeIdToken(id);
      assert.ok(!/[.*> ]/.test(token), `${token} is one subject token`);
      assert.equal(nodeIdFromToken(token), id);
    }
    assert.equal(nodeIdToken("gpu-017.rack4.dc1.example.com"), "gpu-017_rack4_dc1_example_com");
  });

  it("gives distinct ids distinct tokens", () => {
    const tokens = new Set(VALID.map(nodeIdToken));
    assert.equal(tokens.size, VALID.length);
  });

  it("refuses to encode an id that is not a DNS name, or to decode a token that is not one", () => {
    for (const [id] of INVALID) assert.throws(() => nodeIdToken(id), RangeError, id);
    for (const token of ["a.b", "a*b", "UPPER", "a__b", "_a", ""]) {
      assert.throws(() => nodeIdFromToken(token), RangeError, token);
    }
  });

  it("puts a dotted node id on one subject level of session, node and operator", () => {
    const s = new Subjects("llmgw.evt");
    const id = "gpu-1.dc1.example.com";
    assert.equal(s.session(id), "llmgw.evt.session.gpu-1_dc1_example_com");
    assert.equal(s.node(id), "llmgw.evt.node.gpu-1_dc1_example_com");
    assert.equal(s.operator(id), "llmgw.evt.operator.gpu-1_dc1_example_com");
    // `session.*` still matches every session subject.
    for (const subject of [s.session(id), s.session("llmgw.evt.catalog")]) {
      assert.equal(subject.split(".").length, s.sessions.split(".").length);
    }
    assert.throws(() => s.node("gpu_1"), /cannot build a subject: node id "gpu_1" must be a DNS name/);
  });
});
