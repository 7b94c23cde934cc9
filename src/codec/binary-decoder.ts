import {
  type DescField,
  type DescMessage,
  fromBinary,
  type MessageShape,
  protoInt64,
  ScalarType,
} from "@bufbuild/protobuf";
import { getTextEncoding } from "@bufbuild/protobuf/wire";
import { generatedName } from "./generated-name.js";

/**
 * A protobuf binary decoder for one message schema, planned from its
 * descriptors once, that returns what `fromBinary` returns: the same
 * messages, field for field (the encoder's counterpart, binary-encoder.ts).
 *
 * Why: replaying the log is reading it, decoding every event and folding
 * it. `fromBinary` destructures a new [field, wire type] array per tag,
 * looks every field up in a Map, creates each message through a generic
 * initializer, which makes decoding cost more than the bare read of the
 * message.
 * Here each message type has a reader generated from its plan (see
 * messageReaderOf) and a table of field readers by number for the rest, a
 * tag of one byte is read in place, strings of ASCII are read without a
 * decoder call, and small 64-bit integers (below 2^31) become a BigInt
 * without a DataView (docs/ARCHITECTURE.md, "Replay at read speed").
 *
 * Nothing is guessed: the plan is the schema's descriptors (src/gen), so a
 * field added to the proto is decoded as soon as the code is regenerated.
 * Anything this decoder does not handle itself hands the whole message to
 * `fromBinary`, which decodes it or throws its own error: a field number the
 * schema does not know (a newer writer's field, or an event kind from a
 * newer version, both kept as unknown fields by `fromBinary`), a wire type
 * other than the schema's, groups, a message field repeated (which
 * `fromBinary` merges), a map key `__proto__`, bytes that end early.
 * test/codec/binary-decoder.test.ts compares the two on random messages of
 * every event kind and on the golden log.
 */
export interface Decoder<Desc extends DescMessage> {
  (bytes: Uint8Array): MessageShape<Desc>;
  /** Messages handed to `fromBinary` so far. */
  readonly fallbacks: number;
}

export function compileDecoder<Desc extends DescMessage>(schema: Desc): Decoder<Desc> {
  const plan = planOf(schema);
  let fallbacks = 0;
  // The decoder's own cursor, handed to every reader it calls; a decode
  // runs to its end before the next starts (no reader calls out), so one
  // cursor per decoder serves them all without an allocation per message.
  const c = new Cursor();
  const decode = (bytes: Uint8Array): MessageShape<Desc> => {
    c.buf = bytes;
    c.latin1 = latin1Of(bytes);
    c.pos = 0;
    c.view = undefined;
    try {
      const m = readMessage(c, plan, bytes.length, 0);
      return m as unknown as MessageShape<Desc>;
    } catch (err) {
      if (err !== UNSUPPORTED) throw err;
      fallbacks++;
      return fromBinary(schema, bytes);
    } finally {
      // The bytes are the caller's: not kept alive by the cursor.
      c.buf = EMPTY;
      c.latin1 = undefined;
      c.view = undefined;
    }
  };
  return Object.defineProperty(decode, "fallbacks", { get: () => fallbacks }) as Decoder<Desc>;
}

/** Thrown inside the decoder to fall back to `fromBinary`; never escapes. */
const UNSUPPORTED = Symbol("unsupported");

const WIRE_VARINT = 0;
const WIRE_BIT64 = 1;
const WIRE_LENGTH_DELIMITED = 2;
const WIRE_BIT32 = 5;
/** `FeatureSet.FieldPresence.IMPLICIT`: a scalar without presence starts at its zero value. */
const IMPLICIT = 2;
/** `fromBinary`'s default recursion limit; deeper messages are left to it. */
const MAX_DEPTH = 100;
/** Strings of ASCII up to this many bytes are made here; longer ones by the text decoder. */
const SHORT_STRING = 64;

const EMPTY = new Uint8Array(0);

/** Bytes that make a string of a range of themselves, read as Latin-1: Node's Buffer. */
interface Latin1Sliceable {
  toString(encoding: "latin1", start: number, end: number): string;
}

/**
 * Node's Buffer where there is one (the codec is plain JavaScript otherwise:
 * no import of Node's modules).
 */
const NodeBuffer = (globalThis as { Buffer?: { isBuffer(b: unknown): boolean } }).Buffer;

function latin1Of(bytes: Uint8Array): Latin1Sliceable | undefined {
  return NodeBuffer?.isBuffer(bytes) ? (bytes as unknown as Latin1Sliceable) : undefined;
}

/** Where a decode is in its bytes; one per decoder (compileDecoder), passed to every reader. */
class Cursor {
  buf: Uint8Array = EMPTY;
  pos = 0;
  /** A DataView of `buf`, made when a double is first read. */
  view: DataView | undefined = undefined;
  /** `buf` when it is Node's Buffer (what a NATS message's data is), which makes a string of bytes natively. */
  latin1: Latin1Sliceable | undefined = undefined;
  /** The halves of the last 64-bit varint read (signed 32-bit). */
  lo = 0;
  hi = 0;
}

type Msg = Record<string, unknown>;
type FieldReader = (c: Cursor, m: Msg, wire: number, depth: number) => void;

/** How a new message gets each of its members (as `create` sets them, in the same order). */
type Init =
  | { kind: "constant"; name: string; value: unknown }
  | { kind: "list" | "map" | "oneof"; name: string };

interface MessagePlan {
  /** A new message's properties in `create`'s order, lists, maps and oneofs with placeholders. */
  template: Msg;
  /** The lists and maps, each a fresh object in every message. */
  fresh: Array<{ kind: "list" | "map"; name: string }>;
  /**
   * The oneofs: set by the reader of the member present, `{ case: undefined }`
   * after the message when none was (one object per oneof, not two).
   */
  oneofs: string[];
  /** Field readers by field number; a hole is a field this schema does not know. */
  readers: (FieldReader | undefined)[];
  /** Reads a message of this type of `length` bytes (generated; see messageReaderOf). */
  read: MessageReader;
}

type MessageReader = (c: Cursor, length: number, depth: number) => Msg;

const plans = new Map<string, MessagePlan>();

function planOf(desc: DescMessage): MessagePlan {
  const known = plans.get(desc.typeName);
  if (known) return known;
  const inits: Init[] = [];
  const plan: MessagePlan = { template: {}, fresh: [], oneofs: [], readers: [], read: notYetRead };
  // Registered before the fields so recursive message types end.
  plans.set(desc.typeName, plan);
  for (const member of desc.members) {
    const name = member.localName;
    if (member.kind === "oneof") {
      inits.push({ kind: "oneof", name });
      continue;
    }
    switch (member.fieldKind) {
      case "list":
        inits.push({ kind: "list", name });
        break;
      case "map":
        inits.push({ kind: "map", name });
        break;
      case "scalar":
        if (member.presence === IMPLICIT)
          inits.push({ kind: "constant", name, value: scalarZero(member.scalar) });
        break;
      case "enum":
        if (member.presence === IMPLICIT)
          inits.push({ kind: "constant", name, value: member.enum.values[0]?.number ?? 0 });
        break;
      case "message":
        // Absent from a new message, as `create` leaves it.
        break;
      default: {
        const never: never = member;
        throw new Error(`unknown field kind ${String(never)}`);
      }
    }
  }
  plan.template.$typeName = desc.typeName;
  for (const init of inits) {
    if (init.kind === "constant") {
      plan.template[init.name] = init.value;
      continue;
    }
    plan.template[init.name] = undefined;
    if (init.kind === "oneof") plan.oneofs.push(init.name);
    else plan.fresh.push({ kind: init.kind, name: init.name });
  }
  for (const f of desc.fields) plan.readers[f.number] = fieldReader(f);
  // Sub-message readers are looked up through their plans when called, so a
  // plan's reader can be made before those of the types it refers to.
  plan.read = messageReaderOf(desc, plan, inits);
  return plan;
}

function notYetRead(): never {
  throw new Error("message reader used before its plan was complete");
}

/**
 * The reader of one message type: JavaScript made from its plan once. A
 * new message is an object literal with the template's properties in their
 * order, and each field's tag with its expected wire type is one case of a
 * switch that reads the value and stores it by name. Why generated: readers
 * shared between types would store every field by a name that changes from
 * one field to the next (the engine's slowest property store), and make
 * each message by copying a template whose shape changes from one type to
 * the next.
 *
 * Anything else (another wire type, a packed list, a map, a field the
 * schema does not know) goes to the field's reader by number, with the
 * same checks and fallbacks. The generated text holds no name from the
 * schema outside string literals made by JSON.stringify and the function's
 * name and source URL made by generatedName, and no value from a message.
 * The source URL (`llmgw-codec/decode/<type>.js`) names the reader in stack
 * traces and profiles.
 */
function messageReaderOf(desc: DescMessage, plan: MessagePlan, inits: Init[]): MessageReader {
  const refs: unknown[] = [];
  const ref = (value: unknown): string => {
    let i = refs.indexOf(value);
    if (i < 0) i = refs.push(value) - 1;
    return `r[${i}]`;
  };
  const key = (name: string) => JSON.stringify(name);
  const name = generatedName(desc.typeName);
  const props = [`"$typeName": ${ref(desc.typeName)}`];
  for (const init of inits) {
    if (init.kind === "constant") props.push(`${key(init.name)}: ${ref(init.value)}`);
    else if (init.kind === "list") props.push(`${key(init.name)}: []`);
    else if (init.kind === "map") props.push(`${key(init.name)}: {}`);
    else props.push(`${key(init.name)}: undefined`);
  }
  const cases: string[] = [];
  for (const f of desc.fields) {
    const fast = fastRead(f, ref);
    if (fast === undefined) continue;
    const tag = ((f.number << 3) | fast.wire) >>> 0;
    cases.push(`case ${tag}:`, ...fast.lines, `break;`);
  }
  const body = [
    `return function read_${name.identifier}(c, length, depth) {`,
    `if (depth >= ${MAX_DEPTH}) throw h.UNSUPPORTED;`,
    `const end = c.pos + length;`,
    `if (end > c.buf.length) throw h.UNSUPPORTED;`,
    `const m = { ${props.join(", ")} };`,
    `const buf = c.buf;`,
    `while (c.pos < end) {`,
    `let tag = buf[c.pos];`,
    `if (tag < 0x80) c.pos++;`,
    `else tag = h.readTag(c);`,
    `switch (tag) {`,
    ...cases,
    `default: {`,
    `const read = ${ref(plan.readers)}[tag >>> 3];`,
    `if (read === undefined) throw h.UNSUPPORTED;`,
    `read(c, m, tag & 7, depth);`,
    `}`,
    `}`,
    `}`,
    `if (c.pos !== end) throw h.UNSUPPORTED;`,
    ...plan.oneofs.map((o) => `if (m[${key(o)}] === undefined) m[${key(o)}] = { case: undefined };`),
    `return m;`,
    `};`,
    `//# sourceURL=llmgw-codec/decode/${name.file}.js`,
  ].join("\n");
  return new Function("h", "r", body)(helpers, refs) as MessageReader;
}

/**
 * The generated statements that read field `f` when its tag carries the
 * wire type it is written with, and that wire type; undefined for a field
 * left to its reader by number (packed or scalar lists, maps, types no
 * event uses).
 */
function fastRead(
  f: DescField,
  ref: (value: unknown) => string,
): { wire: number; lines: string[] } | undefined {
  const name = JSON.stringify(f.localName);
  const oneof = f.oneof === undefined ? undefined : JSON.stringify(f.oneof.localName);
  const store = (value: string): string[] =>
    oneof === undefined ? [`m[${name}] = ${value};`] : [`m[${oneof}] = { case: ${name}, value: ${value} };`];
  switch (f.fieldKind) {
    case "scalar": {
      if (!FAST_SCALARS.has(f.scalar)) return undefined;
      const read =
        f.scalar === ScalarType.STRING
          ? `h.readString(c, ${f.utf8Validation})`
          : `${ref(scalarReader(f.scalar, f.utf8Validation))}(c)`;
      return { wire: scalarWire(f.scalar), lines: store(read) };
    }
    case "enum":
      if (!f.enum.open) return undefined;
      return { wire: WIRE_VARINT, lines: store(`h.readVarint32(c) | 0`) };
    case "message": {
      if (f.delimitedEncoding) return undefined;
      const child = ref(planOf(f.message));
      const read = `${child}.read(c, h.readLength(c), depth + 1)`;
      // A second occurrence merges into the first in `fromBinary`: left to it.
      const again =
        oneof === undefined
          ? `if (m[${name}] !== undefined) throw h.UNSUPPORTED;`
          : `if (m[${oneof}] !== undefined && m[${oneof}].case === ${name}) throw h.UNSUPPORTED;`;
      return { wire: WIRE_LENGTH_DELIMITED, lines: [again, ...store(read)] };
    }
    case "list": {
      if (f.listKind !== "message" || f.delimitedEncoding) return undefined;
      const child = ref(planOf(f.message));
      return {
        wire: WIRE_LENGTH_DELIMITED,
        lines: [`m[${name}].push(${child}.read(c, h.readLength(c), depth + 1));`],
      };
    }
    case "map":
      return undefined;
    default: {
      const never: never = f;
      throw new Error(`unknown field kind ${String(never)}`);
    }
  }
}

/** Scalars a generated reader reads itself (the others through the field's reader by number). */
const FAST_SCALARS: ReadonlySet<ScalarType> = new Set([
  ScalarType.STRING,
  ScalarType.BOOL,
  ScalarType.INT32,
  ScalarType.UINT32,
  ScalarType.INT64,
  ScalarType.UINT64,
  ScalarType.DOUBLE,
]);

function scalarZero(t: ScalarType): unknown {
  switch (t) {
    case ScalarType.STRING:
      return "";
    case ScalarType.BOOL:
      return false;
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
    case ScalarType.SINT64:
      return protoInt64.zero;
    case ScalarType.BYTES:
      return new Uint8Array(0);
    default:
      return 0;
  }
}

function newMessage(plan: MessagePlan): Msg {
  // A copy of the template (the type name and the constant zeros), then a
  // fresh list or map for each; oneofs are set by `endMessage`.
  const m: Msg = { ...plan.template };
  for (const init of plan.fresh) {
    switch (init.kind) {
      case "list":
        m[init.name] = [];
        break;
      case "map":
        m[init.name] = {};
        break;
      default: {
        const never: never = init.kind;
        throw new Error(`unknown member ${String(never)}`);
      }
    }
  }
  return m;
}

function readMessage(c: Cursor, plan: MessagePlan, length: number, depth: number): Msg {
  return plan.read(c, length, depth);
}

function endMessage(plan: MessagePlan, m: Msg): Msg {
  for (const o of plan.oneofs) if (m[o] === undefined) m[o] = { case: undefined };
  return m;
}

function readTag(c: Cursor): number {
  const start = c.pos;
  const tag = readVarint32(c);
  if (c.pos - start > 5 || (c.pos - start === 5 && (c.buf[c.pos - 1] as number) > 0x0f)) throw UNSUPPORTED;
  return tag;
}

function fieldReader(f: DescField): FieldReader {
  const name = f.localName;
  const oneof = f.oneof?.localName;
  switch (f.fieldKind) {
    case "scalar": {
      const wire = scalarWire(f.scalar);
      const read = scalarReader(f.scalar, f.utf8Validation);
      if (oneof !== undefined) {
        return (c, m, w) => {
          if (w !== wire) throw UNSUPPORTED;
          m[oneof] = { case: name, value: read(c) };
        };
      }
      return (c, m, w) => {
        if (w !== wire) throw UNSUPPORTED;
        m[name] = read(c);
      };
    }
    case "enum": {
      if (!f.enum.open) return unsupported;
      if (oneof !== undefined) {
        return (c, m, w) => {
          if (w !== WIRE_VARINT) throw UNSUPPORTED;
          m[oneof] = { case: name, value: readVarint32(c) | 0 };
        };
      }
      return (c, m, w) => {
        if (w !== WIRE_VARINT) throw UNSUPPORTED;
        m[name] = readVarint32(c) | 0;
      };
    }
    case "message": {
      if (f.delimitedEncoding) return unsupported;
      const child = planOf(f.message);
      if (oneof !== undefined) {
        return (c, m, w, depth) => {
          // A second occurrence merges into the first in `fromBinary`.
          if (w !== WIRE_LENGTH_DELIMITED || (m[oneof] as { case: unknown } | undefined)?.case === name)
            throw UNSUPPORTED;
          m[oneof] = { case: name, value: readMessage(c, child, readLength(c), depth + 1) };
        };
      }
      return (c, m, w, depth) => {
        if (w !== WIRE_LENGTH_DELIMITED || m[name] !== undefined) throw UNSUPPORTED;
        m[name] = readMessage(c, child, readLength(c), depth + 1);
      };
    }
    case "list": {
      if (f.listKind === "message") {
        if (f.delimitedEncoding) return unsupported;
        const child = planOf(f.message);
        return (c, m, w, depth) => {
          if (w !== WIRE_LENGTH_DELIMITED) throw UNSUPPORTED;
          (m[name] as unknown[]).push(readMessage(c, child, readLength(c), depth + 1));
        };
      }
      const type = f.listKind === "enum" ? ScalarType.INT32 : f.scalar;
      if (f.listKind === "enum" && !f.enum.open) return unsupported;
      const wire = scalarWire(type);
      const read = scalarReader(type, f.utf8Validation);
      const packable = wire !== WIRE_LENGTH_DELIMITED;
      return (c, m, w) => {
        const items = m[name] as unknown[];
        if (w === wire) {
          items.push(read(c));
        } else if (packable && w === WIRE_LENGTH_DELIMITED) {
          const end = readLength(c) + c.pos;
          while (c.pos < end) items.push(read(c));
          if (c.pos !== end) throw UNSUPPORTED;
        } else {
          throw UNSUPPORTED;
        }
      };
    }
    case "map": {
      if (f.mapKey !== ScalarType.STRING) return unsupported;
      const readKey = scalarReader(ScalarType.STRING, f.utf8Validation);
      let valueWire: number;
      let readValue: (c: Cursor, depth: number) => unknown;
      let valueZero: () => unknown;
      switch (f.mapKind) {
        case "scalar": {
          const t = f.scalar;
          if (t === ScalarType.BYTES) return unsupported;
          valueWire = scalarWire(t);
          readValue = scalarReader(t, f.utf8Validation);
          const zero = scalarZero(t);
          valueZero = () => zero;
          break;
        }
        case "enum": {
          if (!f.enum.open) return unsupported;
          valueWire = WIRE_VARINT;
          readValue = (c) => readVarint32(c) | 0;
          const zero = f.enum.values[0]?.number ?? 0;
          valueZero = () => zero;
          break;
        }
        case "message": {
          const child = planOf(f.message);
          valueWire = WIRE_LENGTH_DELIMITED;
          readValue = (c, depth) => readMessage(c, child, readLength(c), depth + 1);
          valueZero = () => endMessage(child, newMessage(child));
          break;
        }
        default: {
          const never: never = f;
          throw new Error(`unknown map kind ${String(never)}`);
        }
      }
      return (c, m, w, depth) => {
        if (w !== WIRE_LENGTH_DELIMITED) throw UNSUPPORTED;
        const end = readLength(c) + c.pos;
        let key: string | undefined;
        let value: unknown;
        while (c.pos < end) {
          const tag = readTag(c);
          const no = tag >>> 3;
          const wt = tag & 7;
          if (no === 1 && wt === WIRE_LENGTH_DELIMITED) key = readKey(c) as string;
          // A message value repeated within an entry merges in `fromBinary`.
          else if (no === 2 && wt === valueWire && !(f.mapKind === "message" && value !== undefined))
            value = readValue(c, depth);
          else throw UNSUPPORTED;
        }
        if (c.pos !== end) throw UNSUPPORTED;
        key ??= "";
        // `fromBinary` sets such a key as an own property; left to it.
        if (key === "__proto__") throw UNSUPPORTED;
        (m[name] as Msg)[key] = value === undefined ? valueZero() : value;
      };
    }
    default: {
      const never: never = f;
      throw new Error(`unknown field kind ${String(never)}`);
    }
  }
}

const unsupported: FieldReader = () => {
  throw UNSUPPORTED;
};

function scalarWire(t: ScalarType): number {
  switch (t) {
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return WIRE_LENGTH_DELIMITED;
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return WIRE_BIT64;
    case ScalarType.FLOAT:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return WIRE_BIT32;
    default:
      return WIRE_VARINT;
  }
}

function scalarReader(t: ScalarType, strict: boolean): (c: Cursor) => unknown {
  switch (t) {
    case ScalarType.STRING:
      return (c) => readString(c, strict);
    case ScalarType.BYTES:
      // Engine output in agent messages (EngineLogChunk.data): a view, as fromBinary's reader gives.
      return (c) => {
        const len = readLength(c);
        const v = c.buf.subarray(c.pos, c.pos + len);
        c.pos += len;
        return v;
      };
    case ScalarType.BOOL:
      return (c) => {
        const b = c.buf[c.pos];
        if (b !== undefined && b < 0x80) {
          c.pos++;
          return b !== 0;
        }
        readVarint64(c);
        return c.lo !== 0 || c.hi !== 0;
      };
    case ScalarType.INT32:
      return (c) => readVarint32(c) | 0;
    case ScalarType.UINT32:
      return (c) => readVarint32(c);
    case ScalarType.INT64:
      return (c) => {
        readVarint64(c);
        const hi = c.hi;
        // Below 2^31 (counts, sequences, MiB): one conversion; the rest as fromBinary does.
        if (hi === 0 && c.lo >= 0) return BigInt(c.lo);
        return protoInt64.dec(c.lo, hi);
      };
    case ScalarType.UINT64:
      return (c) => {
        readVarint64(c);
        const hi = c.hi;
        if (hi === 0 && c.lo >= 0) return BigInt(c.lo);
        return protoInt64.uDec(c.lo, hi);
      };
    case ScalarType.DOUBLE:
      return (c) => {
        if (c.pos + 8 > c.buf.length) throw UNSUPPORTED;
        c.view ??= new DataView(c.buf.buffer, c.buf.byteOffset, c.buf.byteLength);
        const v = c.view.getFloat64(c.pos, true);
        c.pos += 8;
        return v;
      };
    default:
      // Types no message uses (float, fixed, sint) are left to fromBinary.
      return () => {
        throw UNSUPPORTED;
      };
  }
}

function readLength(c: Cursor): number {
  const len = readVarint32(c);
  if (c.pos + len > c.buf.length) throw UNSUPPORTED;
  return len;
}

function readString(c: Cursor, strict: boolean): string {
  const len = readLength(c);
  const start = c.pos;
  const end = start + len;
  c.pos = end;
  const buf = c.buf;
  if (len <= SHORT_STRING) {
    for (let i = start; i < end; i++) {
      if ((buf[i] as number) > 0x7f) return getTextEncoding().decodeUtf8(buf.subarray(start, end), strict);
    }
    // Up to 12 characters, appending makes a flat string; past that it
    // would build a chain of cons strings (one per character) that a fold
    // keeps, so longer ones are made in one call: by Node's Buffer when the
    // bytes are one (ASCII is its own Latin-1), which makes the string
    // without the view of the bytes that fromCharCode needs (a Buffer's
    // view is itself a Buffer, costly to make).
    if (len <= 12) {
      let s = "";
      for (let i = start; i < end; i++) s += String.fromCharCode(buf[i] as number);
      return s;
    }
    if (c.latin1 !== undefined) return c.latin1.toString("latin1", start, end);
    return String.fromCharCode.apply(null, buf.subarray(start, end) as unknown as number[]);
  }
  return getTextEncoding().decodeUtf8(buf.subarray(start, end), strict);
}

/** `fromBinary`'s uint32 varint: up to ten bytes, the bits past 32 dropped. */
function readVarint32(c: Cursor): number {
  const buf = c.buf;
  let pos = c.pos;
  let b = buf[pos++] as number;
  if (b < 0x80) {
    if (pos > buf.length) throw UNSUPPORTED;
    c.pos = pos;
    return b;
  }
  let result = b & 0x7f;
  for (let shift = 7; shift < 28; shift += 7) {
    b = buf[pos++] as number;
    result |= (b & 0x7f) << shift;
    if (b < 0x80) {
      if (pos > buf.length) throw UNSUPPORTED;
      c.pos = pos;
      return result >>> 0;
    }
  }
  b = buf[pos++] as number;
  result |= (b & 0x0f) << 28;
  for (let n = 5; (b & 0x80) !== 0 && n < 10; n++) b = buf[pos++] as number;
  if ((b & 0x80) !== 0 || pos > buf.length) throw UNSUPPORTED;
  c.pos = pos;
  return result >>> 0;
}

/** `fromBinary`'s 64-bit varint, into `c.lo` and `c.hi` (signed 32-bit halves). */
function readVarint64(c: Cursor): void {
  const buf = c.buf;
  let pos = c.pos;
  let lo = 0;
  let hi = 0;
  for (let shift = 0; shift < 28; shift += 7) {
    const b = buf[pos++] as number;
    lo |= (b & 0x7f) << shift;
    if ((b & 0x80) === 0) {
      done64(c, pos, lo, hi);
      return;
    }
  }
  const middle = buf[pos++] as number;
  lo |= (middle & 0x0f) << 28;
  hi = (middle & 0x70) >> 4;
  if ((middle & 0x80) === 0) {
    done64(c, pos, lo, hi);
    return;
  }
  for (let shift = 3; shift <= 31; shift += 7) {
    const b = buf[pos++] as number;
    hi |= (b & 0x7f) << shift;
    if ((b & 0x80) === 0) {
      done64(c, pos, lo, hi);
      return;
    }
  }
  throw UNSUPPORTED;
}

function done64(c: Cursor, pos: number, lo: number, hi: number): void {
  if (pos > c.buf.length) throw UNSUPPORTED;
  c.pos = pos;
  c.lo = lo;
  c.hi = hi;
}

/** What generated readers call (see messageReaderOf). */
const helpers = { UNSUPPORTED, readTag, readString, readVarint32, readLength };
