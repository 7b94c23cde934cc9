import {
  type DescField,
  type DescMessage,
  type MessageShape,
  ScalarType,
  toBinary,
} from "@bufbuild/protobuf";
import { generatedName } from "./generated-name.js";

/**
 * A protobuf binary encoder for one message schema, byte for byte what
 * `toBinary` writes, into a slab of memory the encoder reuses.
 *
 * Why not `toBinary`: it wraps every message and sub-message in a
 * reflection object (with its own Maps), collects varints in growing number
 * arrays, and joins a chunk list per sub-message by copying; per agent
 * message that is the largest share of what a gateway allocates
 * (docs/PERFORMANCE.md). Here the fields of each message type are planned
 * once, in field-number order as `toBinary` writes them, and the plan
 * becomes the type's writer (code generated once, see writerOf); a message
 * is written straight into the encoder's slab, a sub-message's length is
 * patched in after it is written, and the result is a view of the slab
 * (Scratch), or a buffer of its own for a message too large for one.
 *
 * Anything this encoder does not handle (unknown fields kept from a newer
 * writer, groups, field types no event uses, a value of the wrong type or
 * out of range) makes it hand the whole message to `toBinary`, which
 * encodes it or throws its own error. test/codec/binary-encoder.test.ts
 * compares the two on random messages of every event kind.
 */
export interface Encoder<Desc extends DescMessage> {
  (message: MessageShape<Desc>): Uint8Array;
  /** Messages handed to `toBinary` so far (unknown fields, or values it refuses). */
  readonly fallbacks: number;
}

export function compileEncoder<Desc extends DescMessage>(schema: Desc): Encoder<Desc> {
  const plan = planOf(schema);
  // The encoder's own slab and cursor, handed to every writer it calls.
  const w = new Scratch();
  let fallbacks = 0;
  const encode = (message: MessageShape<Desc>): Uint8Array => {
    w.begin();
    try {
      plan.write(w, message as unknown as Record<string, unknown>);
    } catch (err) {
      if (err !== UNSUPPORTED) throw err;
      fallbacks++;
      return toBinary(schema, message);
    }
    return w.finish();
  };
  return Object.defineProperty(encode, "fallbacks", { get: () => fallbacks }) as Encoder<Desc>;
}

/** Thrown inside the encoder to fall back to `toBinary`; never escapes. */
const UNSUPPORTED = Symbol("unsupported");

const WIRE_VARINT = 0;
const WIRE_BIT64 = 1;
const WIRE_LENGTH_DELIMITED = 2;
/** `FeatureSet.FieldPresence.IMPLICIT`: a scalar is written only when not zero. */
const IMPLICIT = 2;

/** The size of a slab: the buffer an encoder writes messages into, one after the other (see Scratch). */
const SLAB = 64 * 1024;
/** A message larger than this gets a buffer of its own. */
const SLAB_MAX_MESSAGE = 4 * 1024;

/**
 * Where one encoder writes: straight into its slab, and the encoded message
 * is a view of it (as Node's Buffer pool hands out small buffers). A buffer
 * of its own per message is an allocation outside the heap, which costs
 * more than encoding a small event, and writing into a scratch buffer first
 * costs a copy. A slab lives as long as any view of it; nothing writes to an
 * encoded message after it is returned, and a full slab is replaced, never
 * reused. Each encoder owns its Scratch (compileEncoder), and the generated
 * writers are handed it: no position is shared between encoders.
 *
 * Positions kept while a message is written (a sub-message's start) are
 * relative to the message's start (`base`): when the message outgrows the
 * slab's free room, what is written of it moves to a new slab (or, past a
 * slab, to a buffer of its own) and `base` moves with it.
 */
class Scratch {
  /** The slab the next message starts in. */
  slab: Uint8Array<ArrayBuffer> = new Uint8Array(SLAB);
  slabView: DataView = new DataView(this.slab.buffer);
  /** Where the next message starts in the slab: what is before it is handed out. */
  slabPos = 0;
  /** Where the message being written is: the slab, or a buffer of its own when it outgrew one. */
  buf: Uint8Array = this.slab;
  view: DataView = this.slabView;
  pos = 0;
  /** Where the message being written starts in `buf`. */
  base = 0;

  /** A new message, at the slab's free position. */
  begin(): void {
    this.buf = this.slab;
    this.view = this.slabView;
    this.base = this.slabPos;
    this.pos = this.slabPos;
  }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const written = this.pos - this.base;
    let next: Uint8Array<ArrayBuffer>;
    if (written + n <= SLAB) {
      next = new Uint8Array(SLAB);
      this.slab = next;
      this.slabView = new DataView(next.buffer);
      this.slabPos = 0;
    } else {
      let size = 2 * SLAB;
      while (size < written + n) size *= 2;
      next = new Uint8Array(size);
    }
    for (let i = 0; i < written; i++) next[i] = this.buf[this.base + i] as number;
    this.buf = next;
    this.view = next === this.slab ? this.slabView : new DataView(next.buffer);
    this.base = 0;
    this.pos = written;
  }

  /** The message written since `begin`, handed out. */
  finish(): Uint8Array {
    const { buf, base, pos } = this;
    if (buf !== this.slab || pos - base > SLAB_MAX_MESSAGE) return buf.slice(base, pos);
    // Each view starts on an 8-byte boundary, as the runtime's own pool keeps them.
    this.slabPos = Math.min((pos + 7) & ~7, SLAB);
    return buf.subarray(base, pos);
  }
}

interface FieldPlan {
  readonly field: DescField;
  readonly name: string;
  /** The oneof's property, when the field is a member of one. */
  readonly oneof: string | undefined;
  readonly explicit: boolean;
  /** The tag's varint bytes, for the field's wire type (a packed list's is length-delimited). */
  readonly tag: Uint8Array;
  /** For enums: the value written only when explicitly present (the first one). */
  readonly enumZero: number;
  /** The plan of the field's message type (singular, list item or map value). */
  message?: MessagePlan;
}

/**
 * The members of a oneof whose field numbers no other field's number falls
 * between: at most one is set, and it is written where the lowest of them
 * would be, so one look at the oneof's case finds it, not a look per
 * member (an event's body is a oneof of every kind).
 */
interface OneofPlan {
  readonly oneof: string;
  readonly cases: ReadonlyMap<string, FieldPlan>;
}

interface MessagePlan {
  /** The message type's full name (`llmgw.v1.Event`), which names its writer. */
  readonly typeName: string;
  readonly fields: FieldPlan[];
  /** What the message's writer goes through, in field-number order: fields, and oneofs taken whole. */
  slots: Array<FieldPlan | OneofPlan>;
  /** Writes a message of this type (generated from `slots`; see writerOf). */
  write: MessageWriter;
}

type MessageWriter = (w: Scratch, msg: Record<string, unknown>) => void;

const plans = new Map<string, MessagePlan>();

function planOf(desc: DescMessage): MessagePlan {
  const known = plans.get(desc.typeName);
  if (known) return known;
  const plan: MessagePlan = { typeName: desc.typeName, fields: [], slots: [], write: notYetWritten };
  // Registered before the fields so recursive message types end.
  plans.set(desc.typeName, plan);
  for (const f of [...desc.fields].sort((a, b) => a.number - b.number)) {
    const p: FieldPlan = {
      field: f,
      name: f.localName,
      oneof: f.oneof?.localName,
      explicit: f.presence !== IMPLICIT,
      tag: varintBytes(((f.number << 3) | wireTypeOf(f)) >>> 0),
      enumZero: f.fieldKind === "enum" ? (f.enum.values[0]?.number ?? 0) : 0,
    };
    plan.fields.push(p);
    if (f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message")) {
      p.message = planOf(f.message);
    } else if (f.fieldKind === "map" && f.mapKind === "message") {
      p.message = planOf(f.message);
    }
  }
  plan.slots = slotsOf(plan.fields);
  // Sub-message writers are looked up through their plans when called, so
  // a plan's writer can be made before those of the types it refers to.
  plan.write = writerOf(plan);
  return plan;
}

function notYetWritten(): never {
  throw new Error("message writer used before its plan was complete");
}

/** The fields in number order, each oneof whose members are numbered together taken as one slot. */
function slotsOf(fields: readonly FieldPlan[]): Array<FieldPlan | OneofPlan> {
  const slots: Array<FieldPlan | OneofPlan> = [];
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    const oneof = f.oneof;
    if (oneof === undefined) {
      slots.push(f);
      continue;
    }
    // The run of fields from here that are all members of this oneof.
    let end = i;
    while (end + 1 < fields.length && fields[end + 1]!.oneof === oneof) end++;
    const run = fields.slice(i, end + 1);
    const whole = run.length === fields.filter((x) => x.oneof === oneof).length;
    if (whole && run.length > 1) {
      slots.push({ oneof, cases: new Map(run.map((m) => [m.name, m])) });
      i = end;
    } else {
      slots.push(f);
    }
  }
  return slots;
}

function wireTypeOf(f: DescField): number {
  switch (f.fieldKind) {
    case "message":
    case "map":
      return WIRE_LENGTH_DELIMITED;
    case "enum":
      return WIRE_VARINT;
    case "scalar":
      return scalarWireType(f.scalar);
    case "list":
      if (f.listKind === "message" || f.packed) return WIRE_LENGTH_DELIMITED;
      return f.listKind === "enum" ? WIRE_VARINT : scalarWireType(f.scalar);
    default: {
      const never: never = f;
      throw new Error(`unknown field kind ${String(never)}`);
    }
  }
}

function scalarWireType(t: ScalarType): number {
  switch (t) {
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return WIRE_LENGTH_DELIMITED;
    case ScalarType.DOUBLE:
      return WIRE_BIT64;
    case ScalarType.BOOL:
    case ScalarType.INT32:
    case ScalarType.UINT32:
    case ScalarType.INT64:
    case ScalarType.UINT64:
      return WIRE_VARINT;
    default:
      // Types no event uses (float, fixed, sint) are planned as varints but
      // never written: writeScalar hands them to toBinary.
      return WIRE_VARINT;
  }
}

function varintBytes(v: number): Uint8Array {
  const out: number[] = [];
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return Uint8Array.from(out);
}

/**
 * The writer of one message type: JavaScript made from its plan once, with
 * every property read by its name and every tag written as constant bytes.
 * Why generated: a loop over the plan would read each field by a name that
 * changes from one field to the next, which the engine serves by its
 * slowest property lookup, and would dispatch per field on the slot kind,
 * presence, field kind and scalar type; the generated code makes those
 * choices once, here. Per field it does what such a loop would: the same
 * presence tests, the same order, the same fallbacks.
 *
 * The generated text holds no name from the schema outside string literals
 * made by JSON.stringify and the function's name and source URL made by
 * generatedName, and no value from a message. The source URL
 * (`llmgw-codec/encode/<type>.js`) names the writer in stack traces and
 * profiles.
 */
function writerOf(plan: MessagePlan): MessageWriter {
  const refs: unknown[] = [];
  /** The expression that reaches `value` from the generated code (an entry of `refs`). */
  const ref = (value: unknown): string => {
    let i = refs.indexOf(value);
    if (i < 0) i = refs.push(value) - 1;
    return `r[${i}]`;
  };
  const lines: string[] = [
    `const unknown = m["$unknown"];`,
    `if (unknown !== undefined && unknown.length > 0) throw h.UNSUPPORTED;`,
    `let v, o;`,
  ];
  for (const slot of plan.slots) {
    if ("cases" in slot) {
      lines.push(`o = m[${JSON.stringify(slot.oneof)}];`, `switch (o.case) {`, `case undefined: break;`);
      for (const [name, member] of slot.cases) {
        lines.push(`case ${JSON.stringify(name)}:`, `v = o.value;`, ...fieldWrite(member, ref), `break;`);
      }
      lines.push(`default: throw h.UNSUPPORTED;`, `}`);
      continue;
    }
    if (slot.oneof !== undefined) {
      lines.push(
        `o = m[${JSON.stringify(slot.oneof)}];`,
        `if (o.case === ${JSON.stringify(slot.name)}) {`,
        `v = o.value;`,
        ...fieldWrite(slot, ref),
        `}`,
      );
      continue;
    }
    const name = JSON.stringify(slot.name);
    lines.push(`v = m[${name}];`);
    if (slot.explicit) lines.push(`if (v !== undefined && Object.hasOwn(m, ${name})) {`);
    else lines.push(`if (${implicitTest(slot)}) {`);
    lines.push(...fieldWrite(slot, ref), `}`);
  }
  const name = generatedName(plan.typeName);
  const body = `return function write_${name.identifier}(w, m) {\n${lines.join("\n")}\n};\n//# sourceURL=llmgw-codec/encode/${name.file}.js`;
  return new Function("h", "r", body)(helpers, refs) as MessageWriter;
}

/** The generated test of whether a field without explicit presence is set in `v` (`toBinary`'s). */
function implicitTest(p: FieldPlan): string {
  const f = p.field;
  switch (f.fieldKind) {
    case "list":
      return `v.length > 0`;
    case "map":
      return `Object.keys(v).length > 0`;
    case "enum":
      return `v !== ${p.enumZero}`;
    case "scalar":
      switch (f.scalar) {
        case ScalarType.BOOL:
          return `v !== false`;
        case ScalarType.STRING:
          return `v !== ""`;
        case ScalarType.BYTES:
          return `!(v instanceof Uint8Array && v.byteLength === 0)`;
        case ScalarType.DOUBLE:
        case ScalarType.FLOAT:
          return `!Object.is(v, 0)`;
        default:
          // As toBinary: 0n, 0 and "0" are all zero.
          return `v != 0`;
      }
    default:
      // A field kind no event uses without presence: handed to toBinary.
      return `h.unsupported()`;
  }
}

/** The generated statements that write field `p` with its value in `v`. */
function fieldWrite(p: FieldPlan, ref: (value: unknown) => string): string[] {
  const f = p.field;
  const tag = [`w.ensure(${p.tag.length});`, ...Array.from(p.tag, (b) => `w.buf[w.pos++] = ${b};`)];
  switch (f.fieldKind) {
    case "scalar":
      if (f.scalar === ScalarType.STRING) {
        return [...tag, `if (typeof v !== "string") throw h.UNSUPPORTED;`, `h.writeString(w, v);`];
      }
      if (scalarWriters[f.scalar] === undefined) return [`throw h.UNSUPPORTED;`];
      return [...tag, `${ref(scalarWriters[f.scalar])}(w, v);`];
    case "enum":
      return [...tag, `${ref(scalarWriters[ScalarType.INT32])}(w, v);`];
    case "message":
      return [...tag, `h.writeSubMessage(w, ${ref(p.message)}, v);`];
    case "list":
      return [`h.writeList(w, ${ref(p)}, v);`];
    case "map":
      return [`h.writeMap(w, ${ref(p)}, v);`];
    default: {
      const never: never = f;
      throw new Error(`unknown field kind ${String(never)}`);
    }
  }
}

function writeTag(w: Scratch, tag: Uint8Array): void {
  w.ensure(tag.length);
  w.buf.set(tag, w.pos);
  w.pos += tag.length;
}

/** Reserves one byte for a length and returns where the body starts, relative to the message's start. */
function beginDelimited(w: Scratch): number {
  w.ensure(1);
  return ++w.pos - w.base;
}

/** Patches the body's length in front of it, moving the body when the length takes more than a byte. */
function endDelimited(w: Scratch, at: number): void {
  let start = w.base + at;
  const len = w.pos - start;
  if (len < 0x80) {
    w.buf[start - 1] = len;
    return;
  }
  const size = varintSize(len);
  w.ensure(size - 1);
  // The message may have moved.
  start = w.base + at;
  w.buf.copyWithin(start + size - 1, start, w.pos);
  const end = w.pos + size - 1;
  w.pos = start - 1;
  writeVarint32(w, len);
  w.pos = end;
}

function writeSubMessage(w: Scratch, plan: MessagePlan, value: unknown): void {
  if (typeof value !== "object" || value === null) throw UNSUPPORTED;
  const start = beginDelimited(w);
  plan.write(w, value as Record<string, unknown>);
  endDelimited(w, start);
}

function writeList(w: Scratch, p: FieldPlan, value: unknown): void {
  const f = p.field;
  if (f.fieldKind !== "list" || !Array.isArray(value)) throw UNSUPPORTED;
  if (f.listKind === "message") {
    for (const item of value) {
      writeTag(w, p.tag);
      writeSubMessage(w, p.message as MessagePlan, item);
    }
    return;
  }
  const type = f.listKind === "enum" ? ScalarType.INT32 : f.scalar;
  if (f.packed) {
    writeTag(w, p.tag);
    const start = beginDelimited(w);
    for (const item of value) writeScalar(w, type, item);
    endDelimited(w, start);
    return;
  }
  for (const item of value) {
    writeTag(w, p.tag);
    writeScalar(w, type, item);
  }
}

/** Map entries as `toBinary` writes them: key (1) and value (2) always, in the object's key order. */
function writeMap(w: Scratch, p: FieldPlan, value: unknown): void {
  const f = p.field;
  if (f.fieldKind !== "map" || f.mapKey !== ScalarType.STRING || typeof value !== "object" || value === null)
    throw UNSUPPORTED;
  const obj = value as Record<string, unknown>;
  for (const key of Object.keys(obj)) {
    writeTag(w, p.tag);
    const start = beginDelimited(w);
    w.ensure(1);
    w.buf[w.pos++] = (1 << 3) | WIRE_LENGTH_DELIMITED;
    writeString(w, key);
    const v = obj[key];
    switch (f.mapKind) {
      case "scalar":
        w.ensure(1);
        w.buf[w.pos++] = (2 << 3) | scalarWireType(f.scalar);
        writeScalar(w, f.scalar, v);
        break;
      case "enum":
        w.ensure(1);
        w.buf[w.pos++] = (2 << 3) | WIRE_VARINT;
        writeScalar(w, ScalarType.INT32, v);
        break;
      case "message":
        w.ensure(1);
        w.buf[w.pos++] = (2 << 3) | WIRE_LENGTH_DELIMITED;
        writeSubMessage(w, p.message as MessagePlan, v);
        break;
      default: {
        const never: never = f;
        throw new Error(`unknown map kind ${String(never)}`);
      }
    }
    endDelimited(w, start);
  }
}

const INT32_MIN = -0x80000000;
const INT32_MAX = 0x7fffffff;
const UINT32_MAX = 0xffffffff;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

function writeScalar(w: Scratch, type: ScalarType, v: unknown): void {
  const write = scalarWriters[type];
  if (write === undefined) throw UNSUPPORTED;
  write(w, v);
}

/**
 * A writer per scalar type events use, each refusing (UNSUPPORTED) a value
 * `toBinary` would not write as that type; generated writers call them by
 * type, lists and maps through writeScalar. Types no event uses (float,
 * fixed, sint) have none: they are handed to `toBinary`.
 */
const scalarWriters: Partial<Record<ScalarType, (w: Scratch, v: unknown) => void>> = {
  [ScalarType.STRING](w, v) {
    if (typeof v !== "string") throw UNSUPPORTED;
    writeString(w, v);
  },
  [ScalarType.BOOL](w, v) {
    if (typeof v !== "boolean") throw UNSUPPORTED;
    w.ensure(1);
    w.buf[w.pos++] = v ? 1 : 0;
  },
  [ScalarType.UINT32](w, v) {
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > UINT32_MAX) throw UNSUPPORTED;
    writeVarint32(w, v);
  },
  [ScalarType.INT32](w, v) {
    if (typeof v !== "number" || !Number.isInteger(v) || v < INT32_MIN || v > INT32_MAX) throw UNSUPPORTED;
    if (v >= 0) writeVarint32(w, v);
    else writeVarint64(w, BigInt.asUintN(64, BigInt(v)));
  },
  [ScalarType.UINT64](w, v) {
    if (typeof v !== "bigint" || v < 0n || v > UINT64_MAX) throw UNSUPPORTED;
    if (v <= 0xffffffffn) writeVarint32(w, Number(v));
    else writeVarint64(w, v);
  },
  [ScalarType.INT64](w, v) {
    if (typeof v !== "bigint" || v < INT64_MIN || v > INT64_MAX) throw UNSUPPORTED;
    if (v >= 0n && v <= 0xffffffffn) writeVarint32(w, Number(v));
    else writeVarint64(w, BigInt.asUintN(64, v));
  },
  [ScalarType.DOUBLE](w, v) {
    if (typeof v !== "number") throw UNSUPPORTED;
    w.ensure(8);
    w.view.setFloat64(w.pos, v, true);
    w.pos += 8;
  },
};

const utf8 = new TextEncoder();

/** Length-prefixed UTF-8; ASCII is copied here, anything else goes to the runtime's encoder. */
function writeString(w: Scratch, s: string): void {
  const n = s.length;
  w.ensure(5 + n);
  const lenAt = w.pos;
  w.pos += varintSize(n);
  const buf = w.buf;
  let pos = w.pos;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c > 0x7f) {
      w.pos = lenAt;
      const bytes = utf8.encode(s);
      writeVarint32(w, bytes.length);
      w.ensure(bytes.length);
      w.buf.set(bytes, w.pos);
      w.pos += bytes.length;
      return;
    }
    buf[pos++] = c;
  }
  const end = pos;
  w.pos = lenAt;
  writeVarint32(w, n);
  w.pos = end;
}

function varintSize(v: number): number {
  let n = 1;
  while (v > 0x7f) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

function writeVarint32(w: Scratch, v: number): void {
  w.ensure(5);
  const buf = w.buf;
  let pos = w.pos;
  while (v > 0x7f) {
    buf[pos++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  buf[pos++] = v;
  w.pos = pos;
}

/** Up to 2^53 - 1 (timestamps, sequences) without a BigInt operation per byte. */
const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function writeVarint64(w: Scratch, v: bigint): void {
  w.ensure(10);
  if (v <= SAFE) {
    // Two 32-bit halves, written with integer operations (a timestamp in
    // milliseconds takes six bytes: float divisions per byte cost more).
    const n = Number(v);
    let lo = n >>> 0;
    let hi = (n - lo) / 0x1_0000_0000;
    const buf = w.buf;
    let pos = w.pos;
    while (hi > 0 || lo > 0x7f) {
      buf[pos++] = (lo & 0x7f) | 0x80;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    buf[pos++] = lo;
    w.pos = pos;
    return;
  }
  while (v > 0x7fn) {
    w.buf[w.pos++] = Number(v & 0x7fn) | 0x80;
    v >>= 7n;
  }
  w.buf[w.pos++] = Number(v);
}

/** What generated writers call (see writerOf). */
const helpers = {
  UNSUPPORTED,
  unsupported(): never {
    throw UNSUPPORTED;
  },
  writeString,
  writeSubMessage,
  writeList,
  writeMap,
};
