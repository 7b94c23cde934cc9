/**
 * Keys and entries of the revocation bucket: one key per revoked identity,
 * `cn-<node id token>` for a certificate CN (every certificate naming that
 * node) or `serial-<hex>` for one certificate. Both are prefixed so a node
 * called `serial-1f` and the serial 1f never share a key. A CN that is not
 * a node id can never register (the CN must equal the node id), so only
 * node ids are accepted; in a key their dots are written `_`, as in the
 * log's subjects.
 */
import { z } from "zod";
import { invalidNodeIdReason, nodeIdFromToken, nodeIdToken } from "../ids/node-id.js";

/** The bucket gateways watch and the API role writes. */
export const DEFAULT_REVOKED_BUCKET = "llmgw_revoked";

const CN_PREFIX = "cn-";
const SERIAL_PREFIX = "serial-";
/** RFC 5280 allows 20 octets; some CAs write a few more. */
const SERIAL_MAX_HEX = 64;

/** Why `cn` cannot be revoked (it cannot be an agent's CN), or undefined. */
export function invalidCnReason(cn: string): string | undefined {
  return invalidNodeIdReason(cn, "CN");
}

/**
 * A serial as hex digits in one spelling: lower case, no colons, no
 * leading zeros (Node reports `0A1B`, openssl `0a:1b`, both are `a1b`).
 * Undefined when `serial` is not hex.
 */
export function normalizeSerial(serial: string): string | undefined {
  const hex = serial.trim().replace(/^0x/i, "").replaceAll(":", "").toLowerCase();
  if (!/^[0-9a-f]+$/.test(hex) || hex.length > SERIAL_MAX_HEX) return undefined;
  return hex.replace(/^0+(?=.)/, "");
}

export function cnKey(cn: string): string {
  return `${CN_PREFIX}${nodeIdToken(cn)}`;
}

/** The key of one certificate serial; throws RangeError for a serial that is not hex. */
export function serialKey(serial: string): string {
  const hex = normalizeSerial(serial);
  if (hex === undefined) {
    throw new RangeError(
      `certificate serial ${JSON.stringify(serial)} is not hexadecimal (at most ${SERIAL_MAX_HEX} digits, colons allowed)`,
    );
  }
  return `${SERIAL_PREFIX}${hex}`;
}

/** What a key revokes; undefined for a key this version does not understand. */
export function parseRevocationKey(
  key: string,
): { kind: "cn"; cn: string } | { kind: "serial"; serial: string } | undefined {
  try {
    if (key.startsWith(CN_PREFIX)) return { kind: "cn", cn: nodeIdFromToken(key.slice(CN_PREFIX.length)) };
  } catch {
    return undefined;
  }
  if (key.startsWith(SERIAL_PREFIX)) {
    const hex = normalizeSerial(key.slice(SERIAL_PREFIX.length));
    return hex === undefined ? undefined : { kind: "serial", serial: hex };
  }
  return undefined;
}

/** What a key revokes, as parseRevocationKey reads it. */
export type RevocationTarget = NonNullable<ReturnType<typeof parseRevocationKey>>;

/**
 * The value of key `target` as a revocation, or why it is not one: it must
 * parse, and name the key's CN (a `cn-` key) or serial (a `serial-` key).
 * A value that does not is not applied, so a stray or forged write cannot
 * revoke by its key alone.
 */
export function readRevocationValue(
  target: RevocationTarget,
  value: unknown,
): { ok: true; entry: Revocation } | { ok: false; why: string } {
  const parsed = RevocationSchema.safeParse(value);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    return {
      ok: false,
      why: `the value is not a revocation (${first ? `${first.path.join(".") || "value"}: ${first.message}` : "invalid"})`,
    };
  }
  const entry = parsed.data;
  switch (target.kind) {
    case "cn":
      return entry.cn === target.cn
        ? { ok: true, entry }
        : {
            ok: false,
            why: `the value names CN ${JSON.stringify(entry.cn)}, the key ${JSON.stringify(target.cn)}`,
          };
    case "serial": {
      const serial = entry.serial === undefined ? undefined : normalizeSerial(entry.serial);
      return serial === target.serial
        ? { ok: true, entry }
        : {
            ok: false,
            why: `the value names serial ${JSON.stringify(entry.serial ?? "")}, the key ${JSON.stringify(target.serial)}`,
          };
    }
    default: {
      const never: never = target;
      return never;
    }
  }
}

/** The value of a key: for operators, and the reason an agent is told. */
export const RevocationSchema = z.object({
  cn: z.string(),
  serial: z.string().optional(),
  reason: z.string().max(1024).default(""),
  revokedAtMs: z.number().int().nonnegative(),
  /** Who revoked it (the operator's user name). */
  by: z.string().max(256).default(""),
});
export type Revocation = z.output<typeof RevocationSchema>;
