import {
  type DescField,
  type DescMessage,
  type MessageShape,
  ScalarType,
  toBinary,
} from "@bufbuild/protobuf";

/**
 * A protobuf binary encoder for one message schema that writes into one
 * reusable buffer, byte for byte what `toBinary` writes.
 *
 * Why: `toBinary` wraps every message and sub-message in a reflection object
 * (with its own Maps), collects varints in growing number arrays, and forks a
 * new chunk list for each sub-message that is joined by copying. Encoding
 * one 134-byte shard-status event allocated ~8 KB, the largest share of what
 * the gateway allocated per agent message (docs/PERFORMANCE.md). Here the
 * fields of each message type are planned once, in field-number order as
 * `toBinary` writes them; a message is written straight into a scratch
 * buffer, a sub-message's length is patched in after it is written, and the
 * result is one copy of exactly the encoded size.
 *
 * Anything this encoder does not handle (unknown fields kept from a newer
 * writer, groups, field types no event uses, a value of the wrong type or
 * out of range) makes it hand the whole message to `toBinary`, which
 * encodes it or throws its own error. test/log/binary-encoder.test.ts
 * compares the two on random messages of every event kind.
 */
export interface Encoder<Desc extends DescMessage> {
  (message: MessageShape<Desc>): Uint8Array;
  /** Messages handed to `toBinary` so far (unknown fields, or values it refuses). */
  readonly fallbacks: number;
}

export function compileEncoder<Desc extends DescMessage>(schema: Desc): Encoder<Desc> {
  const plan = planOf(schema);
  let fallbacks = 0;
  const encode = (message: MessageShape<Desc>): Uint8Array => {
    const w = writer;
    w.pos = 0;
    try {
      writeMessage(w, plan, message as unknown as Record<string, unknown>);
    } catch (err) {
      if (err !== UNSUPPORTED) throw err;
      fallbacks++;
      return toBinary(schema, message);
    }
    const out = copyOut(w.buf, w.pos);
    if (w.buf.length > MAX_KEPT) w.reset();
    return out;
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

const INITIAL = 64 * 1024;
/** A buffer grown past this for one large message is let go after it. */
const MAX_KEPT = 1024 * 1024;

class Scratch {
  buf = new Uint8Array(INITIAL);
  view = new DataView(this.buf.buffer);
  pos = 0;

  reset(): void {
    this.buf = new Uint8Array(INITIAL);
    this.view = new DataView(this.buf.buffer);
  }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.buf.subarray(0, this.pos));
    this.buf = grown;
    this.view = new DataView(grown.buffer);
  }
}

const writer = new Scratch();

/** Where encoded messages are copied out to, one after the other (see copyOut). */
const SLAB = 64 * 1024;
/** A message larger than this gets a buffer of its own. */
const SLAB_MAX_MESSAGE = 4 * 1024;
let slab = new Uint8Array(SLAB);
let slabPos = 0;

/**
 * The first `n` bytes of `buf`, in a view of a shared slab rather than a
 * buffer of their own (as Node's Buffer pool does for small buffers): a
 * buffer of its own is an allocation outside the heap per message, which
 * cost more than encoding a small event. A slab lives as long as any view
 * of it; nothing writes to an encoded message after it is returned.
 */
function copyOut(buf: Uint8Array, n: number): Uint8Array {
  if (n > SLAB_MAX_MESSAGE) return buf.slice(0, n);
  if (slabPos + n > SLAB) {
    slab = new Uint8Array(SLAB);
    slabPos = 0;
  }
  const start = slabPos;
  for (let i = 0; i < n; i++) slab[start + i] = buf[i]!;
  // Each view starts on an 8-byte boundary, as the runtime's own pool keeps them.
  slabPos = (start + n + 7) & ~7;
  return slab.subarray(start, start + n);
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
 * would be, so one look at the oneof's case finds it. (A message with many
 * kinds, as an event's body, was otherwise a look at the oneof per member.)
 */
interface OneofPlan {
  readonly oneof: string;
  readonly cases: ReadonlyMap<string, FieldPlan>;
}

interface MessagePlan {
  readonly fields: FieldPlan[];
  /** What `writeMessage` goes through, in field-number order: fields, and oneofs taken whole. */
  slots: Array<FieldPlan | OneofPlan>;
}

const plans = new Map<string, MessagePlan>();

function planOf(desc: DescMessage): MessagePlan {
  const known = plans.get(desc.typeName);
  if (known) return known;
  const plan: MessagePlan = { fields: [], slots: [] };
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
  return plan;
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

function writeMessage(w: Scratch, plan: MessagePlan, msg: Record<string, unknown>): void {
  const unknown = msg["$unknown"] as unknown[] | undefined;
  if (unknown !== undefined && unknown.length > 0) throw UNSUPPORTED;
  const slots = plan.slots;
  for (let i = 0; i < slots.length; i++) {
    const slot = slots[i]!;
    let p: FieldPlan;
    let value: unknown;
    if ("cases" in slot) {
      const o = msg[slot.oneof] as { case: string | undefined; value?: unknown };
      if (o.case === undefined) continue;
      const member = slot.cases.get(o.case);
      if (member === undefined) throw UNSUPPORTED;
      p = member;
      value = o.value;
    } else if (slot.oneof !== undefined) {
      p = slot;
      const o = msg[p.oneof!] as { case: string | undefined; value?: unknown };
      if (o.case !== p.name) continue;
      value = o.value;
    } else {
      p = slot;
      value = msg[p.name];
      if (p.explicit) {
        if (value === undefined || !Object.hasOwn(msg, p.name)) continue;
      } else if (!isSetImplicit(p, value)) {
        continue;
      }
    }
    const f = p.field;
    switch (f.fieldKind) {
      case "scalar":
        writeTag(w, p.tag);
        writeScalar(w, f.scalar, value);
        break;
      case "enum":
        writeTag(w, p.tag);
        writeScalar(w, ScalarType.INT32, value);
        break;
      case "message":
        writeTag(w, p.tag);
        writeSubMessage(w, p.message as MessagePlan, value);
        break;
      case "list":
        writeList(w, p, value);
        break;
      case "map":
        writeMap(w, p, value);
        break;
      default: {
        const never: never = f;
        throw new Error(`unknown field kind ${String(never)}`);
      }
    }
  }
}

/** `toBinary`'s test for a field without explicit presence. */
function isSetImplicit(p: FieldPlan, value: unknown): boolean {
  const f = p.field;
  switch (f.fieldKind) {
    case "list":
      return (value as unknown[]).length > 0;
    case "map":
      return Object.keys(value as object).length > 0;
    case "enum":
      return value !== p.enumZero;
    case "scalar":
      switch (f.scalar) {
        case ScalarType.BOOL:
          return value !== false;
        case ScalarType.STRING:
          return value !== "";
        case ScalarType.BYTES:
          return !(value instanceof Uint8Array && value.byteLength === 0);
        case ScalarType.DOUBLE:
        case ScalarType.FLOAT:
          return !Object.is(value, 0);
        default:
          // biome-ignore lint/suspicious/noDoubleEquals: as toBinary: 0n, 0 and "0" are all zero
          return value != 0;
      }
    default:
      throw UNSUPPORTED;
  }
}

function writeTag(w: Scratch, tag: Uint8Array): void {
  w.ensure(tag.length);
  w.buf.set(tag, w.pos);
  w.pos += tag.length;
}

/** Reserves one byte for a length and returns where the body starts. */
function beginDelimited(w: Scratch): number {
  w.ensure(1);
  return ++w.pos;
}

/** Patches the body's length in front of it, moving the body when the length takes more than a byte. */
function endDelimited(w: Scratch, start: number): void {
  const len = w.pos - start;
  if (len < 0x80) {
    w.buf[start - 1] = len;
    return;
  }
  const size = varintSize(len);
  w.ensure(size - 1);
  w.buf.copyWithin(start + size - 1, start, w.pos);
  const end = w.pos + size - 1;
  w.pos = start - 1;
  writeVarint32(w, len);
  w.pos = end;
}

function writeSubMessage(w: Scratch, plan: MessagePlan, value: unknown): void {
  if (typeof value !== "object" || value === null) throw UNSUPPORTED;
  const start = beginDelimited(w);
  writeMessage(w, plan, value as Record<string, unknown>);
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
  switch (type) {
    case ScalarType.STRING:
      if (typeof v !== "string") throw UNSUPPORTED;
      writeString(w, v);
      return;
    case ScalarType.BOOL:
      if (typeof v !== "boolean") throw UNSUPPORTED;
      w.ensure(1);
      w.buf[w.pos++] = v ? 1 : 0;
      return;
    case ScalarType.UINT32:
      if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > UINT32_MAX) throw UNSUPPORTED;
      writeVarint32(w, v);
      return;
    case ScalarType.INT32:
      if (typeof v !== "number" || !Number.isInteger(v) || v < INT32_MIN || v > INT32_MAX) throw UNSUPPORTED;
      if (v >= 0) writeVarint32(w, v);
      else writeVarint64(w, BigInt.asUintN(64, BigInt(v)));
      return;
    case ScalarType.UINT64:
      if (typeof v !== "bigint" || v < 0n || v > UINT64_MAX) throw UNSUPPORTED;
      if (v <= 0xffffffffn) writeVarint32(w, Number(v));
      else writeVarint64(w, v);
      return;
    case ScalarType.INT64:
      if (typeof v !== "bigint" || v < INT64_MIN || v > INT64_MAX) throw UNSUPPORTED;
      if (v >= 0n && v <= 0xffffffffn) writeVarint32(w, Number(v));
      else writeVarint64(w, BigInt.asUintN(64, v));
      return;
    case ScalarType.DOUBLE:
      if (typeof v !== "number") throw UNSUPPORTED;
      w.ensure(8);
      w.view.setFloat64(w.pos, v, true);
      w.pos += 8;
      return;
    default:
      throw UNSUPPORTED;
  }
}

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
    let n = Number(v);
    while (n > 0x7f) {
      w.buf[w.pos++] = (n % 128) | 0x80;
      n = Math.floor(n / 128);
    }
    w.buf[w.pos++] = n;
    return;
  }
  while (v > 0x7fn) {
    w.buf[w.pos++] = Number(v & 0x7fn) | 0x80;
    v >>= 7n;
  }
  w.buf[w.pos++] = Number(v);
}
