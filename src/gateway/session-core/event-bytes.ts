/**
 * The size of an event a session writes, for its byte budget: the UTF-8
 * bytes of its text plus a few bytes per field and value, about what
 * protobuf spends on them (tags and lengths of one or two bytes, varints of
 * up to ten), and the keys of maps (labels) and of the plain objects the
 * body is built from. It walks the body as built, so every event kind is
 * measured alike without encoding the event a second time; the figure is
 * a little above the stored size, never far below it. Pure.
 */
import type { BodyInit } from "./event-ids.js";

/** Bytes of the envelope a writer adds (id, writer, time) beside the body's own id. */
const ENVELOPE_BYTES = 48;
/** Tags, lengths and numbers of a shard status or command result event beside their text. */
const FIXED_BYTES = 48;

/**
 * The shard statuses and command results most agent messages become are
 * measured by their text alone (the rest is a few numbers): walking them as
 * any event cost more than the rest of the gateway's work on them. The ids
 * the gateway makes (event, session) and node ids are ASCII by construction.
 */
export function eventBytes(id: string, body: BodyInit): number {
  switch (body.case) {
    case "shardStatus": {
      const v = body.value;
      const st = v.status;
      return (
        agentMessageBytes(id, v.nodeId, v.sessionId) +
        (st
          ? text(st.replicaId) + text(st.shardId) + text(st.error) + text(st.lastOutput) + text(st.endpoint)
          : 0)
      );
    }
    case "commandResult": {
      const v = body.value;
      const r = v.result;
      return agentMessageBytes(id, v.nodeId, v.sessionId) + (r ? text(r.commandId) + text(r.error) : 0);
    }
    default:
      return ENVELOPE_BYTES + utf8Length(id) + sizeOf(body);
  }
}

/**
 * What a shard status and a command result both spend beside their own text:
 * the envelope, their fixed fields and the ASCII ids. A plain call on numbers
 * and strings, nothing allocated, so the per-message cost stays as it was.
 */
function agentMessageBytes(id: string, nodeId: string | undefined, sessionId: string | undefined): number {
  return ENVELOPE_BYTES + FIXED_BYTES + id.length + (nodeId ?? "").length + (sessionId ?? "").length;
}

function text(s: string | undefined): number {
  return s === undefined || s === "" ? 0 : 2 + utf8Length(s);
}

function sizeOf(v: unknown): number {
  switch (typeof v) {
    case "string":
      return 2 + utf8Length(v);
    case "number":
    case "bigint":
      return 6;
    case "boolean":
      return 2;
    case "object": {
      if (v === null) return 0;
      if (v instanceof Uint8Array) return 2 + v.length;
      let n = 2;
      if (Array.isArray(v)) {
        for (const x of v) n += sizeOf(x);
        return n;
      }
      // A message's field names are not written; a map's keys (and a plain init object's) are counted.
      const message = "$typeName" in v;
      for (const k in v) {
        if (k === "$typeName") continue;
        if (!message) n += 1 + utf8Length(k);
        n += sizeOf((v as Record<string, unknown>)[k]);
      }
      return n;
    }
    default:
      return 0;
  }
}

/** UTF-8 length of a string, without encoding it. */
export function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff) {
      // A surrogate pair: 4 bytes for two UTF-16 units.
      n += 2;
      i++;
    } else n += 2;
  }
  return n;
}
