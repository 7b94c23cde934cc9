/**
 * Test certificates made with openssl in a temp folder: a CA, a server
 * certificate for 127.0.0.1/localhost, client certificates with CN = node
 * id, and a second CA for certificates the gateway must not trust.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../harness/nats.js";

export interface Pem {
  cert: string;
  key: string;
}

export interface TestCerts {
  dir: string;
  ca: string;
  server: Pem;
  /** A client certificate signed by the CA with this CN (made once per CN). */
  client(cn: string): Pem;
  /** A client certificate with this CN from a CA the gateway does not trust. */
  foreignClient(cn: string): Pem;
}

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
}

function makeCa(dir: string, name: string): void {
  openssl(
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      `${name}.key`,
      "-out",
      `${name}.crt`,
      "-subj",
      `/CN=${name}`,
      "-days",
      "2",
    ],
    dir,
  );
}

function makeLeaf(dir: string, ca: string, name: string, cn: string, ext: string): Pem {
  writeFileSync(join(dir, `${name}.ext`), `${ext}\n`);
  openssl(
    [
      "req",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      `${name}.key`,
      "-out",
      `${name}.csr`,
      "-subj",
      `/CN=${cn}`,
    ],
    dir,
  );
  openssl(
    [
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      `${ca}.crt`,
      "-CAkey",
      `${ca}.key`,
      "-CAcreateserial",
      "-out",
      `${name}.crt`,
      "-days",
      "2",
      "-extfile",
      `${name}.ext`,
    ],
    dir,
  );
  return {
    cert: readFileSync(join(dir, `${name}.crt`), "utf8"),
    key: readFileSync(join(dir, `${name}.key`), "utf8"),
  };
}

export function makeTestCerts(): TestCerts {
  const dir = tempDir("certs");
  makeCa(dir, "ca");
  makeCa(dir, "other-ca");
  const server = makeLeaf(
    dir,
    "ca",
    "server",
    "localhost",
    "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth",
  );
  const clients = new Map<string, Pem>();
  const leaf = (ca: string, cn: string) => {
    const key = `${ca}/${cn}`;
    let pem = clients.get(key);
    if (!pem) {
      pem = makeLeaf(dir, ca, `client-${ca}-${clients.size}`, cn, "extendedKeyUsage=clientAuth");
      clients.set(key, pem);
    }
    return pem;
  };
  return {
    dir,
    ca: readFileSync(join(dir, "ca.crt"), "utf8"),
    server,
    client: (cn) => leaf("ca", cn),
    foreignClient: (cn) => leaf("other-ca", cn),
  };
}
