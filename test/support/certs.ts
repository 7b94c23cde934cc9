/**
 * Test certificates made with openssl in a temp folder: a CA, a server
 * certificate for 127.0.0.1/localhost, client certificates with CN = node
 * id, and a second CA for certificates the gateway must not trust.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { tempDir } from "../harness/nats.js";

export interface Pem {
  cert: string;
  key: string;
}

export interface TestCerts {
  dir: string;
  ca: string;
  /** The CA of `foreignClient` certificates (PEM). */
  otherCa: string;
  server: Pem;
  /** A new server certificate and key from the same CA (a rotation): another key, another serial. */
  reissueServer(): Pem;
  /** A client certificate signed by the CA with this CN (made once per CN). */
  client(cn: string): Pem;
  /** A client certificate with this CN from a CA the gateway does not trust. */
  foreignClient(cn: string): Pem;
  /** A client certificate with this CN signed by the CA, valid only in 2020 (long expired). */
  expiredClient(cn: string): Pem;
}

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
}

function makeCa(dir: string, name: string): void {
  openssl(
    [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
      ...["-keyout", `${name}.key`, "-out", `${name}.crt`, "-subj", `/CN=${name}`, "-days", "2"],
    ],
    dir,
  );
}

/**
 * Signs `name`.csr with dates in the past. `openssl x509` cannot set dates
 * before now, `openssl ca` can; it needs a small configuration and database.
 */
function signExpired(dir: string, ca: string, name: string, ext: string): void {
  const conf = join(dir, `${name}.ca.conf`);
  writeFileSync(join(dir, `${name}.index`), "");
  writeFileSync(
    conf,
    [
      "[ca]",
      "default_ca = test",
      "[test]",
      `database = ${name}.index`,
      "new_certs_dir = .",
      `serial = ${name}.serial`,
      "default_md = sha256",
      "policy = any",
      "unique_subject = no",
      "[any]",
      "commonName = supplied",
      "[ext]",
      ext,
      "",
    ].join("\n"),
  );
  writeFileSync(join(dir, `${name}.serial`), "1000\n");
  openssl(
    [
      ...["ca", "-batch", "-config", conf, "-utf8", "-cert", `${ca}.crt`, "-keyfile", `${ca}.key`],
      ...["-in", `${name}.csr`, "-out", `${name}.crt`],
      ...["-startdate", "20200101000000Z", "-enddate", "20200102000000Z", "-extensions", "ext", "-notext"],
    ],
    dir,
  );
}

function makeLeaf(
  dir: string,
  ca: string,
  name: string,
  cn: string,
  ext: string,
  validity: "valid" | "expired" = "valid",
): Pem {
  writeFileSync(join(dir, `${name}.ext`), `${ext}\n`);
  openssl(
    [
      ...["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
      ...["-keyout", `${name}.key`, "-out", `${name}.csr`, "-utf8", "-subj", `/CN=${cn}`],
    ],
    dir,
  );
  if (validity === "expired") {
    signExpired(dir, ca, name, ext);
  } else {
    openssl(
      [
        ...[
          "x509",
          "-req",
          "-in",
          `${name}.csr`,
          "-CA",
          `${ca}.crt`,
          "-CAkey",
          `${ca}.key`,
          "-CAcreateserial",
        ],
        ...["-out", `${name}.crt`, "-days", "2", "-extfile", `${name}.ext`],
      ],
      dir,
    );
  }
  return {
    cert: readFileSync(join(dir, `${name}.crt`), "utf8"),
    key: readFileSync(join(dir, `${name}.key`), "utf8"),
  };
}

export function makeTestCerts(): TestCerts {
  const dir = tempDir("certs");
  makeCa(dir, "ca");
  makeCa(dir, "other-ca");
  const serverLeaf = (name: string) =>
    makeLeaf(
      dir,
      "ca",
      name,
      "localhost",
      "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth",
    );
  const server = serverLeaf("server");
  let reissued = 0;
  const clients = new Map<string, Pem>();
  const leaf = (ca: string, cn: string, validity: "valid" | "expired" = "valid") => {
    const key = `${ca}/${validity}/${cn}`;
    let pem = clients.get(key);
    if (!pem) {
      pem = makeLeaf(dir, ca, `client-${ca}-${clients.size}`, cn, "extendedKeyUsage=clientAuth", validity);
      clients.set(key, pem);
    }
    return pem;
  };
  return {
    dir,
    ca: readFileSync(join(dir, "ca.crt"), "utf8"),
    otherCa: readFileSync(join(dir, "other-ca.crt"), "utf8"),
    server,
    reissueServer: () => serverLeaf(`server-${++reissued}`),
    client: (cn) => leaf("ca", cn),
    foreignClient: (cn) => leaf("other-ca", cn),
    expiredClient: (cn) => leaf("ca", cn, "expired"),
  };
}

/**
 * The certificate a TLS server at `url` presents to a new handshake (a raw
 * connection, no HTTP/2), verified against `ca`.
 */
export function serverCertificate(
  url: string,
  ca: string,
): Promise<{ fingerprint256: string; serialNumber: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: u.hostname, port: Number(u.port), ca, ALPNProtocols: ["h2"] }, () => {
      const c = socket.getPeerCertificate();
      socket.destroy();
      resolve({ fingerprint256: c.fingerprint256, serialNumber: c.serialNumber });
    });
    socket.once("error", reject);
  });
}
