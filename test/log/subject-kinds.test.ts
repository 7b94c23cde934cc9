/** The table binding event kinds to subjects, and the check every read makes with it (pure). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { clone, create } from "@bufbuild/protobuf";
import { EVENT_KINDS, type EventKind } from "../../src/codec/index.js";
import { EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import {
  KIND_SUBJECTS,
  kindsOfFamily,
  SUBJECT_WRITERS,
  type SubjectFamily,
  Subjects,
  subjectFor,
  subjectRefusal,
} from "../../src/log/index.js";
import { DEFAULT_LAYOUT, NATS_ROLES, rolePermissions } from "../../src/nats-auth/index.js";
import { sampleEvents } from "../support/sample-events.js";

const s = new Subjects("llmgw.evt");

/** Whether a NATS subject pattern (`*`, `>`) matches `subject`. */
function matches(pattern: string, subject: string): boolean {
  const p = pattern.split(".");
  const t = subject.split(".");
  for (let i = 0; i < p.length; i++) {
    if (p[i] === ">") return t.length > i;
    if (i >= t.length || (p[i] !== "*" && p[i] !== t[i])) return false;
  }
  return p.length === t.length;
}

describe("subject ↔ kind table", () => {
  it("places every kind, and every kind in exactly one family", () => {
    assert.deepEqual(Object.keys(KIND_SUBJECTS).sort(), [...EVENT_KINDS].sort());
    const families = Object.keys(SUBJECT_WRITERS) as SubjectFamily[];
    assert.deepEqual(families.flatMap(kindsOfFamily).sort(), [...EVENT_KINDS].sort());
  });

  it("subjectFor puts each sample where the log's layout says", () => {
    const bySubject = Object.fromEntries(sampleEvents().map((e) => [e.body.case, subjectFor(s, e)]));
    assert.equal(bySubject["sessionOpened"], "llmgw.evt.session.gpu-a1");
    assert.equal(bySubject["usageChanged"], "llmgw.evt.node.gpu-a1");
    assert.equal(bySubject["gatewayStarted"], "llmgw.evt.gateway.gw-1");
    assert.equal(bySubject["catalogChanged"], "llmgw.evt.catalog");
    assert.equal(bySubject["nodeCordoned"], "llmgw.evt.operator.gpu-a1");
    assert.equal(bySubject["rolloutPaused"], "llmgw.evt.operator._rollouts");
    assert.equal(bySubject["reconcilePass"], "llmgw.evt.reconciler");
  });

  it("each family's writer role alone may publish its subjects (nats-permissions agrees with the table)", () => {
    for (const e of sampleEvents()) {
      const subject = subjectFor(new Subjects(DEFAULT_LAYOUT.prefix), e);
      const writer = SUBJECT_WRITERS[KIND_SUBJECTS[e.body.case as EventKind].family];
      for (const role of NATS_ROLES) {
        const perms = rolePermissions(role);
        const may =
          perms.publish.allow.some((p) => matches(p, subject)) &&
          !perms.publish.deny.some((p) => matches(p, subject));
        assert.equal(may, role === writer, `${role} publishing ${e.body.case} to ${subject}`);
      }
    }
  });
});

describe("subjectRefusal", () => {
  it("accepts every event on its own subject", () => {
    for (const e of sampleEvents()) assert.equal(subjectRefusal(s, subjectFor(s, e), e), undefined);
  });

  it("refuses a kind on another family's subject, naming the writer and where it belongs", () => {
    const cordon = sampleEvents().find((e) => e.body.case === "nodeCordoned")!;
    const why = subjectRefusal(s, "llmgw.evt.node.gpu-a1", cordon);
    assert.match(why ?? "", /nodeCordoned is written only by the api role to llmgw\.evt\.operator\.gpu-a1/);
    const pass = sampleEvents().find((e) => e.body.case === "reconcilePass")!;
    assert.match(subjectRefusal(s, "llmgw.evt.catalog", pass) ?? "", /reconciler role/);
  });

  it("refuses an event on its family's subject for another id", () => {
    const hw = sampleEvents().find((e) => e.body.case === "hardwareChanged")!;
    assert.match(subjectRefusal(s, "llmgw.evt.node.gpu-b9", hw) ?? "", /llmgw\.evt\.node\.gpu-a1/);
  });

  it("refuses an event whose id no subject can hold", () => {
    const hw = clone(EventSchema, sampleEvents().find((e) => e.body.case === "hardwareChanged")!);
    if (hw.body.case === "hardwareChanged") hw.body.value.nodeId = "GPU_1";
    assert.match(subjectRefusal(s, "llmgw.evt.node.GPU_1", hw) ?? "", /no subject can hold/);
  });

  it("leaves a kind this version does not know to the folds (they skip it)", () => {
    const future = create(EventSchema, { id: "f-1" });
    assert.equal(subjectRefusal(s, "llmgw.evt.future", future), undefined);
  });
});
