/**
 * `llmgw nats-auth kubernetes` as a process: the Secrets of every role and
 * the server's auth.conf, valid Kubernetes Secrets; the same keys on every
 * run over the same --dir (a Secret re-applied does not lock processes
 * out); --out written mode 0600; --force makes new keys; a --dir holding
 * some files but not all is refused naming them.
 */
import assert from "node:assert/strict";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { Secret } from "kubernetes-models/v1";
import { parseAllDocuments } from "yaml";
import { NATS_ROLES } from "../../src/nats-auth/index.js";
import { tempDir } from "../harness/nats.js";
import { runCli } from "../support/cli.js";

interface SecretDoc {
  metadata: { name: string; namespace: string };
  data: Record<string, string>;
}
const docs = (yaml: string) => parseAllDocuments(yaml).map((d) => d.toJS() as SecretDoc);

describe("llmgw nats-auth kubernetes", () => {
  it("renders nats-auth and one Secret per role, with the same keys on every run", async () => {
    const dir = tempDir("nak");
    const render = () =>
      runCli(["nats-auth", "kubernetes", "--dir", join(dir, "keys"), "--namespace", "fleet"]);
    const first = await render();
    assert.equal(first.code, 0, first.stderr);
    const secrets = docs(first.stdout);
    assert.deepEqual(
      secrets.map((s) => s.metadata.name),
      ["nats-auth", ...NATS_ROLES.map((r) => `llmgw-nats-${r}`)],
    );
    for (const s of secrets) {
      assert.doesNotThrow(() => new Secret(s as never).validate(), s.metadata.name);
      assert.equal(s.metadata.namespace, "fleet");
    }
    const auth = Buffer.from(secrets[0]?.data["auth.conf"] ?? "", "base64").toString("utf8");
    assert.match(auth, /^authorization \{/m);
    // The seed in each Secret is the one whose public key auth.conf names.
    for (const role of NATS_ROLES) {
      const seedFile = readFileSync(join(dir, "keys", `${role}.nk`), "utf8");
      const s = secrets.find((x) => x.metadata.name === `llmgw-nats-${role}`);
      assert.equal(Buffer.from(s?.data[`${role}.nk`] ?? "", "base64").toString("utf8"), seedFile);
    }

    const again = await render();
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout, first.stdout, "a second run over the same --dir made other keys");

    const out = join(dir, "secrets.yaml");
    const toFile = await runCli(["nats-auth", "kubernetes", "--dir", join(dir, "keys"), "--out", out]);
    assert.equal(toFile.code, 0, toFile.stderr);
    assert.equal(statSync(out).mode & 0o777, 0o600);
    assert.equal(docs(readFileSync(out, "utf8")).length, NATS_ROLES.length + 1);

    const forced = await runCli(["nats-auth", "kubernetes", "--dir", join(dir, "keys"), "--force"]);
    assert.equal(forced.code, 0, forced.stderr);
    assert.notDeepEqual(docs(forced.stdout)[1]?.data, secrets[1]?.data, "--force kept the old keys");
  });

  it("refuses a --dir with some of the files, naming them", async () => {
    const dir = tempDir("nak-partial");
    writeFileSync(join(dir, "auth.conf"), "authorization {}\n");
    const r = await runCli(["nats-auth", "kubernetes", "--dir", dir]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /auth\.conf already exists/);
    assert.equal(r.stdout, "");
  });
});
