/**
 * Client certificates for thousands of benchmark agents, issued in this
 * process: `llmgw certs` runs openssl twice per node, minutes for 10,000
 * nodes, while a P-256 key and an ECDSA signature take a fraction of a
 * millisecond here. Each certificate is what `llmgw certs` issues a node
 * (CN = node id, CA:FALSE, digitalSignature, clientAuth), signed by the CA
 * `llmgw certs` created, so the gateway verifies them as it verifies any
 * agent's. The DER is written by hand: nothing in Node builds certificates.
 */
import { createPrivateKey, generateKeyPairSync, randomBytes, sign, X509Certificate } from "node:crypto";

export interface NodeCert {
  cert: Buffer;
  key: Buffer;
}

/** Issues one certificate and key (PEM) per node id, signed by the EC CA given (PEM). */
export function issueNodeCerts(caPem: Buffer, caKeyPem: Buffer, nodeIds: string[]): Map<string, NodeCert> {
  const ca = new X509Certificate(caPem);
  const caKey = createPrivateKey(caKeyPem);
  if (caKey.asymmetricKeyType !== "ec")
    throw new Error("the CA key must be an EC key (as `llmgw certs` makes)");
  const issuer = subjectOf(ca.raw);
  const now = Date.now();
  const validity = seq(utcTime(new Date(now - 3_600_000)), utcTime(new Date(now + 7 * 86_400_000)));
  const out = new Map<string, NodeCert>();
  for (const id of nodeIds) {
    const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
    const tbs = seq(
      tlv(0xa0, integer(Buffer.from([2]))), // v3
      integer(serial()),
      ECDSA_SHA256,
      issuer,
      validity,
      name(["llmgw", id]),
      publicKey.export({ type: "spki", format: "der" }),
      tlv(0xa3, seq(BASIC_CONSTRAINTS_LEAF, KEY_USAGE_DIGITAL_SIGNATURE, EXT_KEY_USAGE_CLIENT_AUTH)),
    );
    const signature = sign("sha256", tbs, caKey);
    const der = seq(tbs, ECDSA_SHA256, tlv(0x03, Buffer.concat([Buffer.from([0]), signature])));
    out.set(id, {
      cert: Buffer.from(pem("CERTIFICATE", der)),
      key: Buffer.from(privateKey.export({ type: "pkcs8", format: "pem" }) as string),
    });
  }
  const first = out.values().next().value;
  if (first && !new X509Certificate(first.cert).verify(ca.publicKey))
    throw new Error("an issued node certificate does not verify against the CA");
  return out;
}

function len(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, content: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag]), len(content.length), content]);
}

const seq = (...parts: Buffer[]) => tlv(0x30, Buffer.concat(parts));
const set = (...parts: Buffer[]) => tlv(0x31, Buffer.concat(parts));
const integer = (b: Buffer) => tlv(0x02, b);
/** The Name O=<o>, CN=<cn>, as `llmgw certs` writes a node's subject. */
const name = ([o, cn]: [string, string]) =>
  seq(set(seq(OID_O, tlv(0x0c, Buffer.from(o)))), set(seq(OID_CN, tlv(0x0c, Buffer.from(cn)))));
const hex = (h: string) => Buffer.from(h.replace(/ /g, ""), "hex");

/** AlgorithmIdentifier ecdsa-with-SHA256 (1.2.840.10045.4.3.2). */
const ECDSA_SHA256 = seq(hex("06 08 2a 86 48 ce 3d 04 03 02"));
const OID_CN = hex("06 03 55 04 03");
const OID_O = hex("06 03 55 04 0a");
/** basicConstraints (critical) CA:FALSE. */
const BASIC_CONSTRAINTS_LEAF = seq(hex("06 03 55 1d 13"), hex("01 01 ff"), tlv(0x04, seq()));
/** keyUsage (critical) digitalSignature. */
const KEY_USAGE_DIGITAL_SIGNATURE = seq(
  hex("06 03 55 1d 0f"),
  hex("01 01 ff"),
  tlv(0x04, hex("03 02 07 80")),
);
/** extKeyUsage clientAuth (1.3.6.1.5.5.7.3.2). */
const EXT_KEY_USAGE_CLIENT_AUTH = seq(
  hex("06 03 55 1d 25"),
  tlv(0x04, seq(hex("06 08 2b 06 01 05 05 07 03 02"))),
);

/** 16 random bytes, positive and without a leading zero byte. */
function serial(): Buffer {
  const b = randomBytes(16);
  b[0] = (b[0]! & 0x7f) | 0x01;
  return b;
}

function utcTime(d: Date): Buffer {
  const p = (n: number) => String(n).padStart(2, "0");
  const s = `${p(d.getUTCFullYear() % 100)}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}Z`;
  return tlv(0x17, Buffer.from(s, "ascii"));
}

/** Reads one TLV at `at`: where its content starts and where it ends. */
function readTlv(der: Buffer, at: number): { start: number; end: number } {
  let i = at + 1;
  let n = der[i++]!;
  if (n & 0x80) {
    const k = n & 0x7f;
    n = 0;
    for (let j = 0; j < k; j++) n = n * 256 + der[i++]!;
  }
  return { start: i, end: i + n };
}

/** The subject Name of a certificate, as its DER bytes (the issuer of what it signs). */
function subjectOf(certDer: Buffer): Buffer {
  const cert = readTlv(certDer, 0);
  const tbs = readTlv(certDer, cert.start);
  // version [0], serialNumber, signature, issuer, validity, subject
  let at = tbs.start;
  for (let field = 0; field < 5; field++) at = readTlv(certDer, at).end;
  return certDer.subarray(at, readTlv(certDer, at).end);
}

function pem(label: string, der: Buffer): string {
  const b64 = der.toString("base64").replace(/(.{64})/g, "$1\n");
  return `-----BEGIN ${label}-----\n${b64}${b64.endsWith("\n") ? "" : "\n"}-----END ${label}-----\n`;
}
