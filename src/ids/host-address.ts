/**
 * Host addresses a node advertises (Register.advertise_address): where other
 * nodes (a multi-node replica's rendezvous) and the data plane reach it. It
 * goes into engine command lines on other machines, so it is held to a
 * strict shape: a DNS name by the node-id rule, or an IP address literal.
 */
import { invalidNodeIdReason, NODE_ID_MAX_LENGTH } from "./node-id.js";

/** The rule, as every refusal states it. */
export const HOST_ADDRESS_RULE =
  "must be empty, a DNS name (RFC 1123: lower-case letters, digits, '-' and '.') or an IPv4 or IPv6 address, at most 253 characters";

const OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
/** Dotted-quad only: no leading zeros (read as octal by some resolvers), no short forms like "10.1". */
const IPV4 = new RegExp(`^${OCTET}(\\.${OCTET}){3}$`);
const IPV6_CHARS = /^[0-9A-Fa-f:.]+$/;
/** Digits and dots only: meant as an IPv4 address, so it must be a valid one. */
const NUMERIC = /^[0-9.]+$/;

/** True for an IPv4 dotted quad or an IPv6 address (no zone id, no brackets). */
export function isIpLiteral(text: string): boolean {
  if (IPV4.test(text)) return true;
  // Only hex digits, ':' and '.' reach the URL parser, so nothing can escape the brackets.
  if (!text.includes(":") || !IPV6_CHARS.test(text)) return false;
  return URL.parse(`http://[${text}]/`) !== null;
}

/** Why `text` cannot be an advertised host address, or undefined when it can ("" = unknown, allowed). */
export function invalidHostAddressReason(text: string, what = "advertise_address"): string | undefined {
  if (text === "") return undefined;
  if (text.length > NODE_ID_MAX_LENGTH) {
    return `${what} is ${text.length} characters long; it ${HOST_ADDRESS_RULE}`;
  }
  if (isIpLiteral(text)) return undefined;
  if (!NUMERIC.test(text) && invalidNodeIdReason(text) === undefined) return undefined;
  return `${what} ${JSON.stringify(text)} ${HOST_ADDRESS_RULE}`;
}
