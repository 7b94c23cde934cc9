/**
 * Development certificates for a fleet: a CA, the gateway's server
 * certificate and one client certificate per node (CN = node id). Idempotent:
 * the CA is reused, certificates already issued by it are kept unless forced.
 */
import { randomBytes, X509Certificate } from "node:crypto";
import { access, chmod, mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { isIP } from "node:net";
import { join } from "node:path";
import { invalidNodeIdReason } from "../ids.js";
import { type CertsLayout, certsLayout } from "./layout.js";
import { OpensslError, openssl } from "./openssl.js";

export interface CertsOptions {
  /** Output directory. */
  out: string;
  /** Node ids to issue client certificates for. */
  nodes: string[];
  /** Extra host names or IPs for the gateway certificate, beside localhost, 127.0.0.1 and ::1. */
  gatewayHosts?: string[];
  /** Re-issue the gateway and node certificates even if they exist (the CA is always reused). */
  force?: boolean;
  /** Validity of the leaf certificates in days. */
  days?: number;
}

export type CertAction = "created" | "kept" | "reissued";

export interface CertsReport {
  dir: string;
  ca: CertAction;
  gateway: CertAction;
  nodes: Record<string, CertAction>;
  warnings: string[];
}

const CURVE = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
const DEFAULT_HOSTS = ["localhost", "127.0.0.1", "::1"];
/** Enough to keep a 2-core machine busy without hundreds of openssl processes at once. */
const PARALLEL = 4;

export async function createCerts(opts: CertsOptions): Promise<CertsReport> {
  for (const id of opts.nodes) {
    const why = invalidNodeIdReason(id);
    if (why) throw new OpensslError(why);
  }
  const files = certsLayout(opts.out);
  await mkdir(files.nodesDir, { recursive: true });
  const tmp = await mkdtemp(join(opts.out, ".tmp-"));
  try {
    const warnings: string[] = [];
    const ca = await ensureCa(files, tmp);
    const caCert = new X509Certificate(await readFile(files.ca));
    const days = opts.days ?? 825;
    const hosts = [...new Set([...DEFAULT_HOSTS, ...(opts.gatewayHosts ?? [])])];

    const gateway = await ensureLeaf({
      files,
      tmp,
      caCert,
      cert: files.gatewayCert,
      key: files.gatewayKey,
      cn: "llmgw gateway",
      ext: serverExt(hosts),
      days,
      force: opts.force ?? false,
    });
    if (gateway.action === "kept") {
      const san = new Set((gateway.existing?.subjectAltName ?? "").split(", ").map(canonicalSan));
      const missing = hosts.filter((h) => !san.has(canonicalSan(isIP(h) ? `IP Address:${h}` : `DNS:${h}`)));
      if (missing.length > 0)
        warnings.push(
          `gateway.pem kept but lacks ${missing.join(", ")}: run again with --force to re-issue it`,
        );
    }

    const nodes: Record<string, CertAction> = {};
    const queue = [...new Set(opts.nodes)];
    await Promise.all(
      Array.from({ length: Math.min(PARALLEL, queue.length) }, async () => {
        for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
          const r = await ensureLeaf({
            files,
            tmp,
            caCert,
            cert: files.nodeCert(id),
            key: files.nodeKey(id),
            cn: id,
            ext: clientExt(id),
            days,
            force: opts.force ?? false,
          });
          nodes[id] = r.action;
        }
      }),
    );
    return { dir: opts.out, ca, gateway: gateway.action, nodes, warnings };
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

async function ensureCa(files: CertsLayout, tmp: string): Promise<CertAction> {
  const [cert, key] = await Promise.all([exists(files.ca), exists(files.caKey)]);
  if (cert && key) return "kept";
  if (cert || key)
    throw new OpensslError(
      `${cert ? files.ca : files.caKey} exists without ${cert ? files.caKey : files.ca}: ` +
        "restore it or remove the directory to start over",
    );
  const k = join(tmp, "ca-key.pem");
  const c = join(tmp, "ca.pem");
  await openssl([
    "req",
    "-x509",
    ...CURVE,
    "-nodes",
    "-keyout",
    k,
    "-out",
    c,
    "-days",
    "3650",
    "-sha256",
    "-subj",
    "/O=llmgw/CN=llmgw development CA",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
    "-addext",
    "subjectKeyIdentifier=hash",
  ]);
  await install(k, files.caKey, c, files.ca);
  return "created";
}

interface LeafRequest {
  files: CertsLayout;
  tmp: string;
  caCert: X509Certificate;
  cert: string;
  key: string;
  cn: string;
  ext: string;
  days: number;
  force: boolean;
}

async function ensureLeaf(r: LeafRequest): Promise<{ action: CertAction; existing?: X509Certificate }> {
  let action: CertAction = "created";
  if ((await exists(r.cert)) && (await exists(r.key))) {
    const existing = new X509Certificate(await readFile(r.cert));
    // A certificate from another CA is useless with this one: re-issue it even without --force.
    if (!r.force && existing.checkIssued(r.caCert) && existing.verify(r.caCert.publicKey))
      return { action: "kept", existing };
    action = "reissued";
  }
  const base = join(r.tmp, randomBytes(6).toString("hex"));
  const k = `${base}-key.pem`;
  const csr = `${base}.csr`;
  const c = `${base}.pem`;
  const ext = `${base}.ext`;
  await writeFile(ext, r.ext);
  await openssl([
    "req",
    "-new",
    ...CURVE,
    "-nodes",
    "-keyout",
    k,
    "-out",
    csr,
    "-subj",
    `/O=llmgw/CN=${r.cn}`,
  ]);
  await openssl([
    "x509",
    "-req",
    "-in",
    csr,
    "-CA",
    r.files.ca,
    "-CAkey",
    r.files.caKey,
    "-set_serial",
    `0x${randomBytes(16)
      .toString("hex")
      .replace(/^[89a-f]/, "7")}`,
    "-days",
    String(r.days),
    "-sha256",
    "-extfile",
    ext,
    "-out",
    c,
  ]);
  await install(k, r.key, c, r.cert);
  return { action };
}

/** Key first, then certificate, each by rename: a reader never sees a certificate without its key. */
async function install(tmpKey: string, key: string, tmpCert: string, cert: string): Promise<void> {
  await chmod(tmpKey, 0o600);
  await rename(tmpKey, key);
  await rename(tmpCert, cert);
}

/** One SAN entry as `DNS:name` or `IP:address`, with IPv6 compressed (node prints it expanded). */
function canonicalSan(entry: string): string {
  const ip = /^IP Address:(.*)$/.exec(entry)?.[1];
  if (ip === undefined) return entry;
  return `IP:${isIP(ip) === 6 ? new URL(`http://[${ip}]`).hostname : ip}`;
}

function serverExt(hosts: string[]): string {
  const san = hosts.map((h) => (isIP(h) ? `IP:${h}` : `DNS:${h}`)).join(",");
  return [
    "basicConstraints=critical,CA:FALSE",
    "keyUsage=critical,digitalSignature,keyEncipherment",
    "extendedKeyUsage=serverAuth",
    `subjectAltName=${san}`,
    "authorityKeyIdentifier=keyid",
    "",
  ].join("\n");
}

function clientExt(id: string): string {
  return [
    "basicConstraints=critical,CA:FALSE",
    "keyUsage=critical,digitalSignature,keyEncipherment",
    "extendedKeyUsage=clientAuth",
    `subjectAltName=DNS:${id}`,
    "authorityKeyIdentifier=keyid",
    "",
  ].join("\n");
}
