// biome-ignore-all lint/suspicious/noExplicitAny: response bodies are loosely typed JSON, checked by the assertions
/**
 * Operator roles and audit, against a real API on a real nats-server with
 * its log output captured: what each role may do (403 naming the role
 * needed), that the operator the log records is the token's name and
 * nothing the request says, and `llmgw api --tokens` as a real process
 * (a bad file refused by field, the file re-read when it changes, --token
 * beside it still the admin).
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { pino } from "pino";
import type { Log, LogRecord } from "../../src/log/index.js";
import { API_ROUTES } from "../../src/operator/api-routes.js";
import { type ApiServer, type ApiToken, TokenTable, tokenSha256 } from "../../src/operator/index.js";
import { type NatsServer, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { LLMGW_BIN, logFlags, runCli } from "../support/cli.js";
import { eventually } from "../support/eventually.js";
import { rand, readAll } from "../support/gateway.js";
import { type ApiFixture, appendAll, callApi, smallFleet, startApiFixture } from "../support/operator-api.js";

const VIEWER = "viewer-token-3f9a1c7e";
const OPERATOR = "operator-token-8b2d4e6f";
const ADMIN = "admin-token-5c7e9a1b3d8f2a6e0c4b9d7f1a5e3c8b";

const entry = (name: string, role: ApiToken["role"], token: string): ApiToken => ({
  name,
  role,
  sha256: tokenSha256(token),
});

const TOKENS = [
  entry("ci-bot", "viewer", VIEWER),
  entry("alice", "operator", OPERATOR),
  entry("root-ops", "admin", ADMIN),
];

const json = { "content-type": "application/json" };

function capturedLogger() {
  const lines: string[] = [];
  const logger = pino({ level: "trace" }, { write: (s: string) => void lines.push(s) });
  return { logger, lines };
}

/** The operator (or appliedBy) of the last operator or catalog event of the log. */
function lastRecordedOperator(records: LogRecord[]): string | undefined {
  for (const r of records.toReversed()) {
    const b = r.event.body;
    if (b.case === "catalogChanged") return b.value.appliedBy;
    if (b.value && typeof b.value === "object" && "operator" in b.value) return b.value.operator;
  }
  return undefined;
}

/** The URL an `llmgw api --listen 127.0.0.1:0` says it listens on (the port it was given by the system). */
async function listeningUrl(proc: ChildProcess, out: () => string): Promise<string> {
  let url: string | undefined;
  await eventually(
    () => {
      if (proc.exitCode !== null) throw new Error(`llmgw api exited with ${proc.exitCode}:\n${out()}`);
      url = /"url":"(http:\/\/[^"]+)"[^\n]*operator API listening/.exec(out())?.[1];
      if (url === undefined) throw new Error(`its output so far:\n${out()}`);
      return true;
    },
    { what: "llmgw api to say where it listens" },
  );
  return url!;
}

describe("operator roles and audit", () => {
  let server: NatsServer & { close(): Promise<void> };
  let fx: ApiFixture | undefined;
  let log: Log;
  let api: ApiServer;
  let logs: ReturnType<typeof capturedLogger>;

  before(async () => {
    server = await startServer();
    logs = capturedLogger();
    fx = await startApiFixture(server.url, {
      auth: { kind: "tokens", tokens: new TokenTable(TOKENS) },
      logger: logs.logger,
    });
    ({ log, api } = fx);
    await api.runtime.waitFor(await appendAll(log, smallFleet()));
  });
  after(async () => {
    await fx?.close();
    await server?.close();
  });

  const call = (
    path: string,
    token: string | null,
    init: { method?: string; body?: string; headers?: Record<string, string> } = {},
  ) => callApi(api.url, path, { ...init, authorization: token === null ? null : `Bearer ${token}` });

  it("a viewer reads every read route, and gets 403 naming the role on a cordon, writing nothing", async () => {
    for (const r of API_ROUTES.filter((x) => x.access === "viewer" && x.method === "GET")) {
      const path = r.url.replace(":id", r.id === "replica" ? "r-70b-1" : "gpu-a1");
      if (path === "/v1/stream" || path === "/v1/endpoints?follow=true") continue;
      const res = await call(path, VIEWER);
      assert.ok(![401, 403].includes(res.status), `${path}: ${res.status} ${JSON.stringify(res.body)}`);
    }
    const before = await log.lastSeq();
    const r = await call("/v1/nodes/gpu-a1/cordon", VIEWER, { method: "POST", headers: json, body: "{}" });
    assert.equal(r.status, 403, JSON.stringify(r.body));
    assert.deepEqual(r.body, {
      error: {
        code: "forbidden",
        message: 'POST /v1/nodes/:id/cordon needs the operator role; token "ci-bot" has viewer',
      },
    });
    for (const path of [
      "/v1/nodes/gpu-a1/drain",
      "/v1/nodes/gpu-a1/gpus/0/clear",
      "/v1/nodes/gpu-a1/problems/clear",
    ]) {
      const denied = await call(path, VIEWER, { method: "POST", headers: json, body: "{}" });
      assert.equal(denied.status, 403, path);
    }
    assert.equal(await log.lastSeq(), before, "a refused request appended an event");
    assert.equal((await call("/v1/nodes/gpu-a1", VIEWER)).body.node.cordoned, false);
    // An engine's output is an operator's to read, not a viewer's.
    const logs = await call("/v1/logs/r-70b-1?tail=5", VIEWER);
    assert.equal(logs.status, 403, JSON.stringify(logs.body));
    assert.match(logs.body.error.message, /GET \/v1\/logs\/:id needs the operator role/);
  });

  it("an operator cordons and clears; the events name the token, and the log line names it too", async () => {
    const c = await call("/v1/nodes/gpu-a1/cordon", OPERATOR, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ reason: "firmware" }),
    });
    assert.equal(c.status, 200, JSON.stringify(c.body));
    assert.equal(c.body.node.cordoned, true);
    const records = await readAll(log);
    const last = records.at(-1)?.event.body;
    assert.ok(last?.case === "nodeCordoned");
    assert.deepEqual(
      [last.value.operator, last.value.reason, records.at(-1)?.seq],
      ["alice", "firmware", c.body.seq],
    );

    const g = await call("/v1/nodes/gpu-a1/gpus/3/clear", OPERATOR, {
      method: "POST",
      headers: json,
      body: "{}",
    });
    assert.equal(g.status, 200, JSON.stringify(g.body));
    assert.equal(lastRecordedOperator(await readAll(log)), "alice");

    const lines = logs.lines.map((l) => JSON.parse(l));
    const done = lines.find(
      (l) => l.msg === "request completed" && l.tokenName === "alice" && l.res?.statusCode === 200,
    );
    assert.ok(done, "the request-completed line names the token");
    assert.ok(
      lines.some((l) => l.msg === "cordon gpu-a1" && l.tokenName === "alice" && l.operator === "alice"),
    );
    const text = logs.lines.join("");
    for (const secret of [VIEWER, OPERATOR, ADMIN])
      assert.ok(!text.includes(secret), "a token reached the log");
  });

  it("a request cannot name another operator: header or body refused with 400, nothing written", async () => {
    const before = await log.lastSeq();
    const header = await call("/v1/nodes/gpu-a2/drain", OPERATOR, {
      method: "POST",
      headers: { ...json, "x-llmgw-operator": "root-ops" },
      body: "{}",
    });
    assert.equal(header.status, 400, JSON.stringify(header.body));
    assert.match(
      header.body.error.message,
      /recorded as the token's name, "alice"; the X-Llmgw-Operator header says "root-ops"/,
    );
    const body = await call("/v1/nodes/gpu-a2/drain", OPERATOR, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ operator: "root-ops" }),
    });
    assert.equal(body.status, 400, JSON.stringify(body.body));
    assert.match(body.body.error.message, /"alice"; remove the body's operator field \(it says "root-ops"\)/);
    const catalog = await call("/v1/catalog", ADMIN, {
      method: "PUT",
      headers: { "content-type": "application/yaml", "x-llmgw-operator": "alice" },
      body: "models: []\n",
    });
    assert.equal(catalog.status, 400, JSON.stringify(catalog.body));
    assert.equal(await log.lastSeq(), before);

    // The header with the token's own name is no claim: accepted, and the name is the token's.
    const same = await call("/v1/nodes/gpu-a2/uncordon", OPERATOR, {
      method: "POST",
      headers: { ...json, "x-llmgw-operator": "alice" },
      body: "{}",
    });
    assert.equal(same.status, 200, JSON.stringify(same.body));
    assert.equal(lastRecordedOperator(await readAll(log)), "alice");
  });

  it("only an admin applies the catalog; it is recorded as applied by the token's name", async () => {
    const yaml = { "content-type": "application/yaml" };
    const before = await log.lastSeq();
    const denied = await call("/v1/catalog", OPERATOR, {
      method: "PUT",
      headers: yaml,
      body: "models: []\n",
    });
    assert.equal(denied.status, 403, JSON.stringify(denied.body));
    assert.equal(
      denied.body.error.message,
      'PUT /v1/catalog needs the admin role; token "alice" has operator',
    );
    assert.equal(
      (await call("/v1/catalog", VIEWER, { method: "PUT", headers: yaml, body: "models: []\n" })).status,
      403,
    );
    assert.equal(await log.lastSeq(), before);
    const put = await call("/v1/catalog", ADMIN, { method: "PUT", headers: yaml, body: "models: []\n" });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal(lastRecordedOperator(await readAll(log)), "root-ops");
    const got = await call("/v1/catalog", VIEWER);
    assert.deepEqual([got.status, got.body.appliedBy], [200, "root-ops"]);
    // An admin does what an operator does.
    const c = await call("/v1/nodes/gpu-b1/cordon", ADMIN, { method: "POST", headers: json, body: "{}" });
    assert.equal(c.status, 200);
    assert.equal(lastRecordedOperator(await readAll(log)), "root-ops");
  });

  it("still answers 401 without a token or with an unknown one, whatever the role needed", async () => {
    for (const token of [null, "unknown-token-1234", `${OPERATOR}x`]) {
      const r = await call("/v1/nodes/gpu-a1/cordon", token, { method: "POST", headers: json, body: "{}" });
      assert.equal(r.status, 401, JSON.stringify(r.body));
      assert.equal((await call("/v1/nodes", token)).status, 401);
    }
  });

  it("the CLI sends no operator name: llmgw cordon records the token's name; a viewer's cordon exits 1 with the 403", async () => {
    const env = { LLMGW_API_URL: api.url };
    const denied = await runCli(["cordon", "gpu-a2", "--reason", "x"], {
      env: { ...env, LLMGW_API_TOKEN: VIEWER },
    });
    assert.equal(denied.code, 1, denied.stderr);
    assert.match(denied.stderr, /needs the operator role; token "ci-bot" has viewer/);
    const ok = await runCli(["cordon", "gpu-a2", "--reason", "fan"], {
      env: { ...env, LLMGW_API_TOKEN: OPERATOR },
    });
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(lastRecordedOperator(await readAll(log)), "alice");
  });
});

describe("llmgw api --tokens (the real process)", () => {
  let server: NatsServer & { close(): Promise<void> };
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.close();
  });

  const yamlOf = (tokens: ApiToken[]) =>
    tokens.map((t) => `- name: ${t.name}\n  role: ${t.role}\n  sha256: ${t.sha256}\n`).join("");

  it("refuses a bad tokens file with exit 2, naming the entry and the field", async () => {
    const dir = tempDir("tokens");
    const cases: Array<[string, string, RegExp]> = [
      [
        "short hex",
        `- {name: a, role: viewer, sha256: abc123}\n`,
        /\[0\]\.sha256: must be the token's SHA-256 as 64 lowercase hex/,
      ],
      [
        "a hash of digits unquoted",
        `- {name: a, role: viewer, sha256: ${"1".repeat(64)}}\n`,
        /\[0\]\.sha256: must be a string .*quote it in YAML/,
      ],
      [
        "unknown role",
        `${yamlOf(TOKENS.slice(0, 1))}- {name: b, role: root, sha256: ${"d4".repeat(32)}}\n`,
        /\[1\]\.role: must be one of viewer, operator, admin/,
      ],
      [
        "duplicate name",
        `${yamlOf(TOKENS.slice(0, 1))}- {name: ci-bot, role: admin, sha256: ${"a1".repeat(32)}}\n`,
        /\[1\]\.name: duplicate name: entry 0 has it too/,
      ],
      [
        "duplicate sha256",
        `${yamlOf(TOKENS.slice(0, 1))}- {name: b, role: admin, sha256: ${TOKENS[0]?.sha256}}\n`,
        /\[1\]\.sha256: duplicate sha256/,
      ],
      ["empty list", "[]\n", /the list is empty/],
      [
        "the token itself",
        `[{"name": "a", "role": "viewer", "sha256": "${VIEWER}"}]`,
        /\[0\]\.sha256: .*not the token itself/,
      ],
      [
        "an unknown field",
        `- {name: a, role: viewer, sha256: ${"b2".repeat(32)}, token: x}\n`,
        /\[0\]: unknown field token/,
      ],
      [
        "--token named admin in the file too",
        `- {name: admin, role: viewer, sha256: ${"c3".repeat(32)}}\n`,
        /\[0\]\.name: admin is the name --token is recorded as/,
      ],
    ];
    for (const [what, text, message] of cases) {
      const file = join(dir, `${what.replaceAll(" ", "-")}.yaml`);
      writeFileSync(file, text);
      const r = await runCli([
        "api",
        "--tokens",
        file,
        "--token",
        ADMIN,
        "--listen",
        "127.0.0.1:0",
        "--nats",
        server.url,
      ]);
      assert.equal(r.code, 2, `${what}: ${r.stderr}`);
      assert.match(r.stderr, message, what);
      assert.ok(r.stderr.includes(file), `${what}: the message names the file`);
    }
    const missing = await runCli(["api", "--tokens", join(dir, "nope.yaml"), "--listen", "127.0.0.1:0"]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /nope\.yaml: cannot read it/);
  });

  it("serves the file's tokens and --token as admin, and re-reads the file when it changes", async () => {
    const dir = tempDir("tokens");
    const file = join(dir, "tokens.yaml");
    writeFileSync(file, yamlOf(TOKENS.slice(0, 2)));
    const proc: ChildProcess = spawn(
      process.execPath,
      [
        LLMGW_BIN,
        "api",
        "--listen",
        "127.0.0.1:0",
        ...logFlags(server.url, uniqueStream("TOK"), `t${rand()}.evt`),
      ],
      {
        env: { ...process.env, LLMGW_API_TOKENS: file, LLMGW_API_TOKEN: ADMIN },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    proc.stdout?.on("data", (b) => (out += b));
    proc.stderr?.on("data", (b) => (out += b));
    const url = await listeningUrl(proc, () => out);
    const status = async (
      path: string,
      token: string,
      init: { method?: string; body?: string; headers?: Record<string, string> } = {},
    ) =>
      (await callApi(url, path, { ...init, authorization: `Bearer ${token}` }).catch(() => ({ status: 0 })))
        .status;
    try {
      await eventually(async () => (await status("/readyz", ADMIN)) === 200, {
        what: `the API to be ready:\n${out}`,
      });
      assert.equal(await status("/v1/nodes", VIEWER), 200);
      // --token is the admin beside the file: it applies the catalog, recorded as "admin".
      const yaml = { "content-type": "application/yaml" };
      assert.equal(
        await status("/v1/catalog", OPERATOR, { method: "PUT", headers: yaml, body: "models: []\n" }),
        403,
      );
      assert.equal(
        await status("/v1/catalog", ADMIN, { method: "PUT", headers: yaml, body: "models: []\n" }),
        200,
      );
      const cat = await callApi(url, "/v1/catalog", { authorization: `Bearer ${VIEWER}` });
      assert.equal(cat.body.appliedBy, "admin");

      // Revoke ci-bot, promote alice: the running API follows the file.
      writeFileSync(file, yamlOf([entry("alice", "admin", OPERATOR)]));
      await eventually(async () => (await status("/v1/nodes", VIEWER)) === 401, {
        what: "the removed token refused",
        timeoutMs: 15_000,
      });
      assert.equal(
        await status("/v1/catalog", OPERATOR, { method: "PUT", headers: yaml, body: "models: []\n" }),
        200,
      );

      // A broken edit is reported and changes nothing.
      writeFileSync(file, "- {name: alice, role: superuser, sha256: nothex}\n");
      await eventually(() => out.includes("the changed tokens file is invalid"), {
        what: `the invalid edit reported:\n${out}`,
        timeoutMs: 15_000,
      });
      assert.equal(await status("/v1/nodes", OPERATOR), 200, "the tokens in force stay");
      assert.equal(await status("/v1/nodes", ADMIN), 200);
      for (const secret of [VIEWER, OPERATOR, ADMIN])
        assert.ok(!out.includes(secret), "a token reached the output");
    } finally {
      proc.kill("SIGTERM");
      await new Promise((r) => (proc.exitCode === null ? proc.once("exit", r) : r(null)));
    }
  });

  it("--token alone still works as one admin token", async () => {
    const proc = spawn(
      process.execPath,
      [
        LLMGW_BIN,
        "api",
        "--token",
        ADMIN,
        "--listen",
        "127.0.0.1:0",
        ...logFlags(server.url, uniqueStream("TOK"), `t${rand()}.evt`),
      ],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LLMGW_API_TOKENS: "" } },
    );
    let out = "";
    proc.stdout?.on("data", (b) => (out += b));
    proc.stderr?.on("data", (b) => (out += b));
    try {
      const url = await listeningUrl(proc, () => out);
      await eventually(
        async () =>
          (await callApi(url, "/readyz", { authorization: null }).catch(() => ({ status: 0 }))).status ===
          200,
        { what: "the API to be ready" },
      );
      const put = await callApi(url, "/v1/catalog", {
        method: "PUT",
        headers: { "content-type": "application/yaml" },
        body: "models: []\n",
        authorization: `Bearer ${ADMIN}`,
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      const got = await callApi(url, "/v1/catalog", { authorization: `Bearer ${ADMIN}` });
      assert.equal(got.body.appliedBy, "admin");
      assert.equal((await callApi(url, "/v1/nodes", { authorization: `Bearer ${VIEWER}` })).status, 401);
    } finally {
      proc.kill("SIGTERM");
      await new Promise((r) => (proc.exitCode === null ? proc.once("exit", r) : r(null)));
    }
  });

  it("llmgw api new-token prints a token and an entry the API accepts; token-hash agrees", async () => {
    const made = await runCli(["api", "new-token", "--name", "deploy-bot", "--role", "operator"]);
    assert.equal(made.code, 0, made.stderr);
    const token = /it is not shown again\):\n(\S+)\n/.exec(made.stdout)?.[1] ?? "";
    assert.ok(token.length >= 40, made.stdout);
    const entryText = made.stdout.slice(made.stdout.indexOf("- name:"));
    assert.equal(entryText, `- name: deploy-bot\n  role: operator\n  sha256: ${tokenSha256(token)}\n`);
    const hashed = await runCli(["api", "token-hash"], { input: `${token}\n` });
    assert.deepEqual([hashed.code, hashed.stdout], [0, `${tokenSha256(token)}\n`]);
    const bad = await runCli(["api", "new-token", "--name", "two words", "--role", "viewer"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--name: must be 1 to 64 letters/);
  });
});
