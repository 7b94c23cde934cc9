/**
 * The bytes of an archived segment: a run of the log's messages in sequence
 * order, each with its stream sequence, stream time, subject and the
 * message's bytes exactly as the stream held them (undecoded, so a
 * malformed message is archived as it was and `check-log` still sees it).
 *
 *   "LLMGWSEG" version(1 byte = 1)
 *   per record: seq (u64 BE) timeMs (u64 BE) subjectLength (u16 BE) dataLength (u32 BE) subject data
 *
 * Pure: no I/O.
 */
import { LogError } from "../errors.js";

/** One message as the stream held it. */
export interface RawRecord {
  seq: number;
  timeMs: number;
  subject: string;
  data: Uint8Array;
}

const MAGIC = new TextEncoder().encode("LLMGWSEG");
const VERSION = 1;
const HEADER = MAGIC.length + 1;
const RECORD_HEAD = 8 + 8 + 2 + 4;
const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

/** The bytes of a segment holding `records` (in sequence order). */
export function encodeSegment(records: readonly RawRecord[]): Uint8Array {
  const subjects = records.map((r) => utf8.encode(r.subject));
  let size = HEADER;
  for (let i = 0; i < records.length; i++) {
    size += RECORD_HEAD + (subjects[i] as Uint8Array).length + (records[i] as RawRecord).data.length;
  }
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  out.set(MAGIC, 0);
  out[MAGIC.length] = VERSION;
  let at = HEADER;
  for (let i = 0; i < records.length; i++) {
    const r = records[i] as RawRecord;
    const subject = subjects[i] as Uint8Array;
    view.setBigUint64(at, BigInt(r.seq));
    view.setBigUint64(at + 8, BigInt(r.timeMs));
    view.setUint16(at + 16, subject.length);
    view.setUint32(at + 18, r.data.length);
    at += RECORD_HEAD;
    out.set(subject, at);
    at += subject.length;
    out.set(r.data, at);
    at += r.data.length;
  }
  return out;
}

/** The records of a segment's bytes; a `malformed` LogError naming `name` when they are not one. */
export function decodeSegment(bytes: Uint8Array, name: string): RawRecord[] {
  const bad = (why: string) => new LogError("malformed", `archive segment ${name} is damaged: ${why}`);
  if (bytes.length < HEADER || MAGIC.some((b, i) => bytes[i] !== b)) throw bad("not a segment");
  if (bytes[MAGIC.length] !== VERSION) throw bad(`format version ${bytes[MAGIC.length]} is not known here`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: RawRecord[] = [];
  let at = HEADER;
  while (at < bytes.length) {
    if (at + RECORD_HEAD > bytes.length) throw bad(`a record is cut short at byte ${at}`);
    const seq = Number(view.getBigUint64(at));
    const timeMs = Number(view.getBigUint64(at + 8));
    const subjectLength = view.getUint16(at + 16);
    const dataLength = view.getUint32(at + 18);
    at += RECORD_HEAD;
    if (at + subjectLength + dataLength > bytes.length)
      throw bad(`the record at sequence ${seq} is cut short`);
    const subject = utf8Decoder.decode(bytes.subarray(at, at + subjectLength));
    at += subjectLength;
    out.push({ seq, timeMs, subject, data: bytes.subarray(at, at + dataLength) });
    at += dataLength;
  }
  return out;
}
