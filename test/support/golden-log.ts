/**
 * The golden log: a realistic history of a small H100 fleet, recorded once
 * as binary events in test/fixtures/golden-log.bin and kept forever. The
 * golden test replays the recorded bytes (never this builder) so that a
 * change that stops old events from decoding or folding the same way fails.
 *
 * Fixture format, one record after another:
 *   u16 BE  length of the subject relative to the prefix, then its UTF-8 bytes
 *   u32 BE  length of the event, then the binary-encoded llmgw.v1.Event
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { toBinary } from "@bufbuild/protobuf";
import { type Event, EventSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { decodeEvent, type Log, Subjects, subjectFor } from "../../src/log/index.js";
import {
  command,
  decide,
  EventFactory,
  h100Node,
  Liveness,
  llamaCatalog,
  SessionClosed_Reason,
  ShardStatus_State,
  s70,
} from "./fleet-events.js";

export const FIXTURES = join(import.meta.dirname, "../fixtures");
export const GOLDEN_LOG = join(FIXTURES, "golden-log.bin");
export const GOLDEN_REPLAY = join(FIXTURES, "golden-replay.json");

export interface RawRecord {
  /** Subject relative to the stream's prefix, e.g. "session.h100-a1". */
  subject: string;
  data: Uint8Array;
}

const M70 = "llama-3.3-70b";
const M405 = "llama-3.1-405b";
const ALL = [0, 1, 2, 3, 4, 5, 6, 7];
const LOW = [0, 1, 2, 3];
const HIGH = [4, 5, 6, 7];

/** The history, as events (plus one of a kind from a future version, as raw bytes). */
export function buildGoldenLog(): RawRecord[] {
  const f = new EventFactory("golden");
  const ev: Array<Event | RawRecord> = [];
  const rel = new Subjects("x");
  const pod1 = { pod: "ib-pod-1" };
  const s405 = (shard: string, rank: number) => ({
    shard,
    replica: "r-405b-1",
    model: M405,
    profile: "tp8-pp2",
    gpus: ALL,
    rank,
    peers: ["h100-a1", "h100-a2"],
  });

  ev.push(f.gatewayStarted("gw-1"), f.gatewayStarted("gw-2"));
  ev.push(f.catalog(llamaCatalog(2, 1)));
  // a1, a2, a4 run nothing; a3 comes back with a shard from before; b1 is in another pod.
  ev.push(f.sessionOpened("h100-a1", "s-a1-1", "gw-1", h100Node("h100-a1", pod1)));
  ev.push(f.sessionOpened("h100-a2", "s-a2-1", "gw-1", h100Node("h100-a2", pod1)));
  ev.push(
    f.sessionOpened(
      "h100-a3",
      "s-a3-1",
      "gw-2",
      h100Node("h100-a3", {
        ...pod1,
        running: [{ ...s70("r-70b-1.0", "r-70b-1", LOW) }],
        usedGib: [71, 71, 71, 71],
      }),
    ),
  );
  ev.push(f.sessionOpened("h100-a4", "s-a4-1", "gw-2", h100Node("h100-a4", pod1)));
  ev.push(f.sessionOpened("h100-b1", "s-b1-1", "gw-2", h100Node("h100-b1", { pod: "ib-pod-2" })));

  // Pass 1: adopt what a3 runs, place the second 70B on a4 and the 405B across a1+a2 (same InfiniBand pod).
  ev.push(
    f.pass(
      [
        decide.adopted("h100-a3", "s-a3-1", [
          { shard: "r-70b-1.0", replica: "r-70b-1", model: M70, profile: "tp4", gpus: LOW },
        ]),
        decide.created("r-70b-2", M70),
        decide.placed("r-70b-2", M70, "tp4", [
          { shard: "r-70b-2.0", node: "h100-a4", session: "s-a4-1", gpus: LOW },
        ]),
        decide.created("r-405b-1", M405),
        decide.placed("r-405b-1", M405, "tp8-pp2", [
          { shard: "r-405b-1.0", node: "h100-a1", session: "s-a1-1", gpus: ALL, rank: 0 },
          { shard: "r-405b-1.1", node: "h100-a2", session: "s-a2-1", gpus: ALL, rank: 1 },
        ]),
      ],
      [
        command.start("c-1", "h100-a4", "s-a4-1", s70("r-70b-2.0", "r-70b-2", LOW)),
        command.start("c-2", "h100-a1", "s-a1-1", s405("r-405b-1.0", 0)),
        command.start("c-3", "h100-a2", "s-a2-1", s405("r-405b-1.1", 1)),
      ],
      8,
    ),
  );
  ev.push(f.commandResult("h100-a4", "s-a4-1", "c-1"));
  ev.push(f.shardStatus("h100-a4", "s-a4-1", "r-70b-2", "r-70b-2.0", ShardStatus_State.STARTING));
  ev.push(f.commandResult("h100-a1", "s-a1-1", "c-2"));
  ev.push(f.commandResult("h100-a2", "s-a2-1", "c-3"));
  ev.push(f.shardStatus("h100-a1", "s-a1-1", "r-405b-1", "r-405b-1.0", ShardStatus_State.STARTING));
  ev.push(f.shardStatus("h100-a2", "s-a2-1", "r-405b-1", "r-405b-1.1", ShardStatus_State.STARTING));
  ev.push(f.shardStatus("h100-a4", "s-a4-1", "r-70b-2", "r-70b-2.0", ShardStatus_State.RUNNING));
  ev.push(f.shardStatus("h100-a1", "s-a1-1", "r-405b-1", "r-405b-1.0", ShardStatus_State.RUNNING));
  ev.push(f.shardStatus("h100-a2", "s-a2-1", "r-405b-1", "r-405b-1.1", ShardStatus_State.RUNNING));
  ev.push(f.usage("h100-a1", "s-a1-1", [76, 76, 76, 76, 76, 76, 76, 76]));
  ev.push(f.usage("h100-a2", "s-a2-1", [76, 76, 76, 76, 76, 76, 76, 76]));
  ev.push(f.usage("h100-a4", "s-a4-1", [71, 71, 71, 71, 0, 0, 0, 0]));

  // a2 reconnects through gw-2: the new session supersedes the old one, whose late close and stale report are ignored.
  ev.push(
    f.sessionOpened(
      "h100-a2",
      "s-a2-2",
      "gw-2",
      h100Node("h100-a2", {
        ...pod1,
        running: [{ ...s405("r-405b-1.1", 1) }],
        usedGib: [76, 76, 76, 76, 76, 76, 76, 76],
      }),
    ),
  );
  ev.push(f.sessionClosed("h100-a2", "s-a2-1", "gw-1", SessionClosed_Reason.SUPERSEDED));
  ev.push(
    f.shardStatus("h100-a2", "s-a2-1", "r-405b-1", "r-405b-1.1", ShardStatus_State.FAILED, {
      error: "stale report from the old stream",
      exitCode: 9,
    }),
  );
  ev.push(
    f.pass(
      [
        decide.adopted("h100-a2", "s-a2-2", [
          { shard: "r-405b-1.1", replica: "r-405b-1", model: M405, profile: "tp8-pp2", gpus: ALL, rank: 1 },
        ]),
      ],
      [],
      24,
    ),
  );

  // Operators: b1 cordoned for firmware; a3 reports a GPU off the bus and is drained.
  ev.push(f.cordon("h100-b1", "firmware update"));
  ev.push(f.usage("h100-a3", "s-a3-1", [71, 71, 71, 71, 0, 0, 0, 0], ["Xid 79: GPU has fallen off the bus"]));
  ev.push(f.drain("h100-a3", "RMA: Xid 79"));
  // Make-before-break: a replacement on a4's free half, then drain and stop the old shard.
  ev.push(
    f.pass(
      [
        decide.created("r-70b-3", M70, "r-70b-1"),
        decide.placed("r-70b-3", M70, "tp4", [
          { shard: "r-70b-3.0", node: "h100-a4", session: "s-a4-1", gpus: HIGH },
        ]),
      ],
      [command.start("c-4", "h100-a4", "s-a4-1", s70("r-70b-3.0", "r-70b-3", HIGH))],
      29,
    ),
  );
  ev.push(f.commandResult("h100-a4", "s-a4-1", "c-4"));
  ev.push(f.shardStatus("h100-a4", "s-a4-1", "r-70b-3", "r-70b-3.0", ShardStatus_State.RUNNING));
  ev.push(f.usage("h100-a4", "s-a4-1", [71, 71, 71, 71, 71, 71, 71, 71]));
  ev.push(
    f.pass(
      [decide.drainStarted("r-70b-1", "r-70b-3", "node h100-a3 draining")],
      [command.drain("c-5", "h100-a3", "s-a3-1", "r-70b-1.0")],
      33,
    ),
  );
  ev.push(f.shardStatus("h100-a3", "s-a3-1", "r-70b-1", "r-70b-1.0", ShardStatus_State.DRAINING));
  ev.push(f.commandResult("h100-a3", "s-a3-1", "c-5"));
  ev.push(f.shardStatus("h100-a3", "s-a3-1", "r-70b-1", "r-70b-1.0", ShardStatus_State.STOPPED));
  ev.push(f.pass([decide.removed("r-70b-1", M70, "replaced by r-70b-3 after drain")], [], 38));

  // A failure: r-70b-2 runs out of memory; the replica backs off and waits for room.
  ev.push(
    f.shardStatus("h100-a4", "s-a4-1", "r-70b-2", "r-70b-2.0", ShardStatus_State.FAILED, {
      error: "CUDA error: out of memory",
      exitCode: 1,
    }),
  );
  ev.push(
    f.pass(
      [
        decide.failed("r-70b-2", "r-70b-2.0", "h100-a4", "CUDA error: out of memory"),
        decide.backoff("r-70b-2", 1, f.nowMs() + 30_000),
        decide.cooldown(M70, "h100-a4", 1, f.nowMs() + 600_000),
        decide.pending(
          "r-70b-2",
          M70,
          "0/5 nodes fit: 2 too few free GPUs, 1 cordoned, 1 draining, 1 cooldown",
        ),
      ],
      [command.stop("c-6", "h100-a4", "s-a4-1", "r-70b-2.0")],
      40,
    ),
  );
  ev.push(f.usage("h100-a4", "s-a4-1", [0, 0, 0, 0, 71, 71, 71, 71]));

  // b1 goes silent: suspect, then lost (reconciler decisions, not clocks).
  ev.push(f.sessionClosed("h100-b1", "s-b1-1", "gw-2", SessionClosed_Reason.SILENT));
  ev.push(f.pass([decide.liveness("h100-b1", Liveness.SUSPECT, "s-b1-1", f.nowMs())], [], 44));
  ev.push(f.pass([decide.liveness("h100-b1", Liveness.LOST, "s-b1-1", f.nowMs())], [], 45));

  // gw-2 dies without a word; its lease expires and its sessions count as closed. a2 comes back on gw-1.
  ev.push(
    f.pass(
      [
        decide.sessionsExpired("gw-2", [
          { node: "h100-a2", session: "s-a2-2" },
          { node: "h100-a3", session: "s-a3-1" },
          { node: "h100-a4", session: "s-a4-1" },
        ]),
      ],
      [],
      46,
    ),
  );
  ev.push(
    f.sessionOpened(
      "h100-a2",
      "s-a2-3",
      "gw-1",
      h100Node("h100-a2", {
        ...pod1,
        running: [{ ...s405("r-405b-1.1", 1) }],
        usedGib: [76, 76, 76, 76, 76, 76, 76, 76],
      }),
    ),
  );
  ev.push(
    f.pass(
      [
        decide.adopted("h100-a2", "s-a2-3", [
          { shard: "r-405b-1.1", replica: "r-405b-1", model: M405, profile: "tp8-pp2", gpus: ALL, rank: 1 },
        ]),
      ],
      [],
      48,
    ),
  );

  // A kind written by a future version: it must keep decoding and be skipped.
  const future = toBinary(EventSchema, f.make({ case: undefined }));
  const unknownField = new Uint8Array([0xfa, 0x05, 0x03, 0x66, 0x6f, 0x6f]); // field 95, bytes "foo"
  ev.push({ subject: "future.kind", data: concat(future, unknownField) });

  // Scale up: a third 70B replica, with nowhere to go.
  ev.push(f.catalog(llamaCatalog(3, 1), "alice"));
  ev.push(
    f.pass(
      [
        decide.created("r-70b-4", M70),
        decide.pending(
          "r-70b-4",
          M70,
          "0/5 nodes fit: 2 too few free GPUs, 1 lost, 1 draining, 1 no session",
        ),
      ],
      [],
      51,
    ),
  );
  ev.push(f.gatewayDraining("gw-1", 2), f.gatewayStopped("gw-2", "lease expired"));

  return ev.map((e) => {
    if ("subject" in e) return e;
    const full = subjectFor(rel, e);
    return { subject: full.slice(rel.prefix.length + 1), data: toBinary(EventSchema, e) };
  });
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

export function encodeFixture(records: RawRecord[]): Uint8Array {
  const parts: Buffer[] = [];
  for (const r of records) {
    const subject = Buffer.from(r.subject, "utf8");
    const head = Buffer.alloc(2);
    head.writeUInt16BE(subject.length);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(r.data.length);
    parts.push(head, subject, len, Buffer.from(r.data));
  }
  return Buffer.concat(parts);
}

export function decodeFixture(bytes: Uint8Array): RawRecord[] {
  const buf = Buffer.from(bytes);
  const out: RawRecord[] = [];
  let at = 0;
  while (at < buf.length) {
    const sl = buf.readUInt16BE(at);
    const subject = buf.subarray(at + 2, at + 2 + sl).toString("utf8");
    at += 2 + sl;
    const dl = buf.readUInt32BE(at);
    out.push({ subject, data: new Uint8Array(buf.subarray(at + 4, at + 4 + dl)) });
    at += 4 + dl;
  }
  return out;
}

export function readGoldenLog(): RawRecord[] {
  return decodeFixture(readFileSync(GOLDEN_LOG));
}

/** Appends recorded bytes as they are (a writer of an older version did), with their ids as message ids. */
export async function appendRaw(log: Log, records: RawRecord[]): Promise<number> {
  let last = 0;
  for (const r of records) {
    const id = decodeEvent(r.data).id;
    last = (await log.js.publish(`${log.subjects.prefix}.${r.subject}`, r.data, { msgID: id })).seq;
  }
  return last;
}

/** Stream times differ on every append; these keys of replay's JSON hold them. */
const STREAM_TIME_KEYS = new Set(["time", "timeMs", "openedAtMs", "disconnectedSinceMs", "startingSinceMs"]);

/** Replaces stream times by a marker, so a replay compares with the recorded expectation. */
export function maskStreamTimes(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(maskStreamTimes);
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      out[k] = STREAM_TIME_KEYS.has(k) && x !== null && x !== 0 ? "<stream time>" : maskStreamTimes(x);
    }
    return out;
  }
  return v;
}
