/**
 * `llmgw api init-token`, the first start of a deployment (compose's
 * api-token service): a random admin token in a 0600 file, its hash in the
 * tokens file, both kept on later starts; a real `llmgw api` process on a
 * real nats-server then takes that token and nothing else.
 */
import assert from "node:assert/strict";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { type Child, spawnLlmgw } from "../harness/proc.js";
import { logFlags, runCli } from "../support/cli.js";

describe("llmgw api init-token (a deployment's first token)", () => {
  let server: NatsServer & { close(): Promise<void> };
  let api: Child | undefined;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await api?.stop();
    await server?.close();
  });

  it("makes a token on the first start, keeps it on the next, and the API takes only it", async () => {
    const dir = join(tempDir("api-auth"), "api-auth");
    const first = await runCli(["api", "init-token", "--dir", dir]);
    assert.equal(first.code, 0, first.stderr);
    const tokenFile = join(dir, "admin.token");
    const tokensFile = join(dir, "tokens.yaml");
    assert.ok(first.stdout.includes(`it is in ${tokenFile}`), first.stdout);
    assert.equal(statSync(tokenFile).mode & 0o777, 0o600);
    const token = readFileSync(tokenFile, "utf8").trim();
    assert.match(token, /^[A-Za-z0-9_-]{43}$/, "32 random bytes");
    const tokens = readFileSync(tokensFile, "utf8");
    assert.ok(!tokens.includes(token), "the tokens file holds the hash only");
    assert.match(tokens, /name: admin\n\s+role: admin\n\s+sha256: [0-9a-f]{64}/);

    const again = await runCli(["api", "init-token", "--dir", dir]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /kept the API tokens file/);
    assert.ok(again.stdout.includes(tokenFile), again.stdout);
    assert.equal(readFileSync(tokenFile, "utf8").trim(), token, "the same token");
    assert.equal(readFileSync(tokensFile, "utf8"), tokens);

    api = spawnLlmgw(
      ["api", "--listen", "127.0.0.1:0", ...logFlags(server.url, uniqueStream("INITTOK"), "tinittok.evt")],
      { LLMGW_API_TOKENS: tokensFile },
    );
    const line = await api.waitForLine(/"url":"http:\/\//, 60_000);
    const url = (JSON.parse(line.slice(line.indexOf("{"))) as { url: string }).url;
    const ok = await fetch(`${url}/v1/nodes`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(ok.status, 200);
    const wrong = await fetch(`${url}/v1/nodes`, { headers: { authorization: "Bearer change-me" } });
    assert.equal(wrong.status, 401);
  });
});
