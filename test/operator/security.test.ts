// biome-ignore-all lint/suspicious/noExplicitAny: response bodies are loosely typed JSON, checked by the assertions
/**
 * The operator surface under hostile use, against a real API on a real
 * nats-server with its log output captured at the most verbose level:
 * tokens, sizes, ids and catalog input that try to reach subjects or paths,
 * and secrets that must never reach a log line.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { pino } from "pino";
import { Gateway } from "../../src/gateway/index.js";
import { type Log, openLog } from "../../src/log/index.js";
import { type ApiServer, startApi } from "../../src/operator/index.js";
import { type NatsServer, natsServerBinary, startServer, tempDir, uniqueStream } from "../harness/nats.js";
import { LLMGW_BIN } from "../support/cli.js";
import { rand, readAll } from "../support/gateway.js";
import { assertLogHygiene } from "../support/log-hygiene.js";
import { type ApiFixture, appendAll, callApi, smallFleet, startApiFixture } from "../support/operator-api.js";
import { unreachablePort } from "../support/unreachable.js";

const TOKEN = "op-token-7f3a9c2e5b1d4a8f6c0e2b9d7a3f5c1e";
const WRONG = "not-the-token-4e8b2a";
const ENGINE_SECRET = "hf_engine-secret-9d7c";

/** A pino logger at trace level whose every line is kept. */
function capturedLogger() {
  const lines: string[] = [];
  const logger = pino({ level: "trace" }, { write: (s: string) => void lines.push(s) });
  return { logger, text: () => lines.join("") };
}

describe("operator API: hostile use", () => {
  let server: NatsServer & { close(): Promise<void> };
  let fx: ApiFixture | undefined;
  let log: Log;
  let api: ApiServer;
  let logs: ReturnType<typeof capturedLogger>;
  let prefix: string;

  before(async () => {
    server = await startServer();
    logs = capturedLogger();
    fx = await startApiFixture(server.url, { auth: { kind: "token", token: TOKEN }, logger: logs.logger });
    ({ log, api, prefix } = fx);
    await api.runtime.waitFor(await appendAll(log, smallFleet()));
  });
  after(async () => {
    await fx?.close();
    await server?.close();
  });

  async function call(
    path: string,
    init: {
      method?: string;
      body?: string | Buffer;
      headers?: Record<string, string>;
      auth?: string | null;
    } = {},
  ): Promise<{ status: number; headers: Headers; body: any }> {
    return callApi(api.url, path, {
      ...init,
      authorization: init.auth === undefined ? `Bearer ${TOKEN}` : init.auth,
    });
  }

  /** Asserts the JSON error shape with a message a person can act on. */
  function isError(r: { status: number; body: any }, status: number, code: string, message?: RegExp) {
    assert.equal(r.status, status, JSON.stringify(r.body));
    assert.equal(r.body?.error?.code, code, JSON.stringify(r.body));
    assert.ok(typeof r.body.error.message === "string" && r.body.error.message.length > 0);
    if (message) assert.match(r.body.error.message, message);
  }

  const protectedRoutes: Array<[string, string, string?]> = [
    ["GET", "/v1/nodes"],
    ["GET", "/v1/nodes/gpu-a1"],
    ["POST", "/v1/nodes/gpu-a1/cordon", "{}"],
    ["POST", "/v1/nodes/gpu-a1/drain", "{}"],
    ["GET", "/v1/replicas"],
    ["GET", "/v1/replicas/r-70b-1/explain"],
    ["GET", "/v1/events"],
    ["GET", "/v1/fleet"],
    ["GET", "/v1/catalog"],
    ["PUT", "/v1/catalog", "models: []\n"],
    ["GET", "/metrics"],
    ["GET", "/v1/no-such-route"],
  ];

  describe("tokens", () => {
    const bad: Array<[string, string | null]> = [
      ["no Authorization header", null],
      ["a wrong token", `Bearer ${WRONG}`],
      ["the token with a character more", `Bearer ${TOKEN}x`],
      ["a prefix of the token", `Bearer ${TOKEN.slice(0, -1)}`],
      ["Basic credentials", `Basic ${Buffer.from(`ops:${TOKEN}`).toString("base64")}`],
      ["the token without a scheme", TOKEN],
      ["an empty bearer", "Bearer "],
      ["two tokens", `Bearer ${TOKEN} ${TOKEN}`],
    ];
    for (const [what, auth] of bad) {
      it(`answers 401 to ${what}, on every protected route, and writes nothing`, async () => {
        const before = await log.lastSeq();
        for (const [method, path, body] of protectedRoutes) {
          const r = await call(path, {
            method,
            auth,
            ...(body === undefined
              ? {}
              : {
                  body,
                  headers: { "content-type": method === "PUT" ? "application/yaml" : "application/json" },
                }),
          });
          isError(r, 401, "unauthorized");
          assert.match(r.headers.get("www-authenticate") ?? "", /^Bearer/, `${method} ${path}`);
          assert.ok(!JSON.stringify(r.body).includes(TOKEN), `${method} ${path} echoes the token`);
        }
        assert.equal(await log.lastSeq(), before, "a refused request appended an event");
      });
    }

    it("does not take the token from a query string, and never logs it from there", async () => {
      // As a value of any parameter, as a parameter name, and as a value of the API's own parameters.
      const queries = [
        ...["token", "access_token", "auth", "after", "model", "subject"].map((k) => `${k}=${TOKEN}`),
        TOKEN,
        `${TOKEN}=1`,
      ];
      for (const query of queries) {
        const r = await call(`/v1/nodes?${query}`, { auth: null });
        isError(r, 401, "unauthorized");
        // With the header, the token in the query is an unknown parameter or a value that does not fit.
        const withHeader = await call(`/v1/events?${query}`);
        assert.ok([200, 400].includes(withHeader.status), `${query}: ${withHeader.status}`);
        assert.ok(!JSON.stringify(withHeader.body).includes(TOKEN), JSON.stringify(withHeader.body));
      }
      assert.ok(logs.text().includes("/v1/nodes"), "requests are logged at all");
    });

    it("accepts the right token with any case of the scheme, and the open probes without one", async () => {
      assert.equal((await call("/v1/nodes", { auth: `bearer ${TOKEN}` })).status, 200);
      assert.equal((await call("/v1/nodes", { auth: `BEARER   ${TOKEN}` })).status, 200);
      assert.equal((await call("/healthz", { auth: null })).status, 200);
      assert.equal((await call("/readyz", { auth: null })).status, 200);
    });
  });

  describe("sizes", () => {
    const big = Buffer.alloc(5 * 1024 * 1024, "a");

    it("answers 413 with a message to a catalog over 4 MiB, and writes nothing", async () => {
      const before = await log.lastSeq();
      const yaml = Buffer.concat([Buffer.from("models: []\n# "), big]);
      const r = await call("/v1/catalog", {
        method: "PUT",
        body: yaml,
        headers: { "content-type": "application/yaml" },
      });
      isError(r, 413, "payload-too-large", /./);
      const json = await call("/v1/nodes/gpu-a1/cordon", {
        method: "POST",
        body: Buffer.concat([Buffer.from('{"reason":"'), big, Buffer.from('"}')]),
        headers: { "content-type": "application/json" },
      });
      isError(json, 413, "payload-too-large", /./);
      assert.equal(await log.lastSeq(), before);
    });

    it("answers 401, not 413, to an oversized body without a token", async () => {
      const r = await call("/v1/catalog", {
        method: "PUT",
        auth: null,
        body: big,
        headers: { "content-type": "application/yaml" },
      });
      isError(r, 401, "unauthorized");
    });

    it("refuses a cordon reason over 500 characters by name", async () => {
      const r = await call("/v1/nodes/gpu-a1/cordon", {
        method: "POST",
        body: JSON.stringify({ reason: "r".repeat(501) }),
        headers: { "content-type": "application/json" },
      });
      isError(r, 400, "invalid-argument", /reason: must be at most 500 characters/);
    });
  });

  describe("ids and catalog input never reach subjects or paths", () => {
    it("refuses node ids that are not DNS names (400) and writes no intent for them", async () => {
      const before = await log.lastSeq();
      const dns = /must be a DNS name \(RFC 1123\)/;
      // Each id with the answer it must get: the DNS rule's 400, except two that
      // are not refused by it — `gpu%2Ea1` decodes to the valid `gpu.a1` (no such
      // node), and the client resolves `..` away before sending (no such route).
      const cases: Array<[id: string, status: number, message: RegExp]> = [
        ["gpu_a1", 400, dns],
        ["GPU-a1", 400, dns],
        ["gpu-.a1", 400, dns],
        ["g".repeat(254), 400, dns],
        ["*", 400, dns],
        [">", 400, dns],
        ["gpu%20a1", 400, dns],
        ["gpu%2Ea1", 404, /node gpu\.a1 not found/],
        ["%C3%BC", 400, dns],
        ["..", 404, /no such endpoint/],
        ["g".repeat(64), 400, dns],
        ["gpu-a1%00", 400, dns],
      ];
      for (const [id, status, message] of cases) {
        for (const [method, path] of [
          ["GET", `/v1/nodes/${id}`],
          ["POST", `/v1/nodes/${id}/cordon`],
        ] as const) {
          const r = await call(path, {
            method,
            ...(method === "POST" ? { body: "{}", headers: { "content-type": "application/json" } } : {}),
          });
          assert.equal(r.status, status, `${method} ${path}: ${JSON.stringify(r.body)}`);
          assert.match(String(r.body?.error?.message), message, `${method} ${path}`);
        }
      }
      assert.equal(await log.lastSeq(), before);
    });

    it("refuses ids that would reach an object's prototype in the projected state (400, never 500)", async () => {
      for (const id of ["__proto__", "constructor", "toString", "hasOwnProperty"]) {
        // Only `constructor` is a DNS name; the others are refused by that rule first.
        isError(await call(`/v1/nodes/${id}`), 400, "invalid-argument", /reserved name|must be a DNS name/);
        isError(await call(`/v1/replicas/${id}`), 400, "invalid-argument", /reserved name/);
        isError(await call(`/v1/replicas/${id}/explain`), 400, "invalid-argument", /reserved name/);
      }
    });

    it("limits the length of ids in URLs", async () => {
      isError(
        await call(`/v1/nodes/${"g".repeat(254)}`),
        400,
        "invalid-argument",
        /254 characters long; it must be a DNS name/,
      );
      isError(await call(`/v1/replicas/${"r".repeat(129)}`), 400, "invalid-argument", /1 to 128/);
      isError(await call(`/v1/replicas/${"r".repeat(129)}/explain`), 400, "invalid-argument", /1 to 128/);
      const huge = await call(`/v1/nodes/${"g".repeat(4000)}`);
      assert.ok(huge.status >= 400 && huge.status < 500, String(huge.status));
    });

    it("refuses event subjects that are not tokens of the layout", async () => {
      for (const s of ["a b", "a..b", "a.>.b", "..", "a/b", "x".repeat(300)]) {
        isError(
          await call(`/v1/events?subject=${encodeURIComponent(s)}`),
          400,
          "invalid-argument",
          /subject/,
        );
      }
    });

    const badCatalogs: Array<[string, unknown, string]> = [
      ...[
        ".",
        "..",
        "../etc",
        ".hidden",
        "a/b",
        "a\\b",
        "a*",
        "a>",
        "a b",
        "ü",
        "",
        "x".repeat(65),
        "a\nb",
      ].map(
        (n) =>
          [`model name ${JSON.stringify(n)}`, model({ name: n }), "models[0].name"] as [
            string,
            unknown,
            string,
          ],
      ),
      [`model name "constructor"`, model({ name: "constructor" }), "models[0].name"],
      [`profile name "__proto__"`, model({}, { name: "__proto__" }), "models[0].profiles[0].name"],
      [`profile name ".."`, model({}, { name: ".." }), "models[0].profiles[0].name"],
      [`profile name "tp/1"`, model({}, { name: "tp/1" }), "models[0].profiles[0].name"],
      [`fabric kind "ib.*"`, model({}, { fabricKind: "ib.*" }), "models[0].profiles[0].fabricKind"],
      [
        `an engine env name with "="`,
        model({}, { engineEnv: { "A=B": "x" } }),
        'models[0].profiles[0].engineEnv["A=B"]',
      ],
      [
        "an engine env name with a newline",
        model({}, { engineEnv: { "A\nB": "x" } }),
        'models[0].profiles[0].engineEnv["A\\nB"]',
      ],
      ...["LD_PRELOAD", "ld_preload", "NODE_OPTIONS", "PYTHONPATH", "PATH", "BASH_ENV", "PERL5OPT"].map(
        (n) =>
          [
            `${n} in engineEnv`,
            model({}, { engineEnv: { [n]: "x" } }),
            `models[0].profiles[0].engineEnv.${n}`,
          ] as [string, unknown, string],
      ),
      [
        "more engine arguments than the limit",
        model({}, { engineArgs: Array.from({ length: 129 }, () => "--x") }),
        "models[0].profiles[0].engineArgs",
      ],
      [
        "an engine argument of 2,000 characters",
        model({}, { engineArgs: ["x".repeat(2000)] }),
        "models[0].profiles[0].engineArgs[0]",
      ],
      [
        `a node label key with a space`,
        model({}, { nodeLabels: { "a b": "x" } }),
        "models[0].profiles[0].nodeLabels",
      ],
      ["an unknown field", model({ script: "rm -rf /" }), "models[0]"],
    ];
    for (const [what, catalog, path] of badCatalogs) {
      it(`refuses a catalog with ${what} (400 naming the field), writing nothing`, async () => {
        const before = await log.lastSeq();
        const r = await call("/v1/catalog", {
          method: "PUT",
          body: JSON.stringify(catalog),
          headers: { "content-type": "application/json" },
        });
        isError(r, 400, "invalid-catalog");
        const paths = (r.body.error.issues as Array<{ path: string }>).map((i) => i.path);
        assert.ok(
          paths.some((p) => p.startsWith(path)),
          `${what}: issues at ${JSON.stringify(paths)}, wanted ${path}`,
        );
        assert.equal(await log.lastSeq(), before);
      });
    }

    it("refuses an operator name in the request (header or body) and writes nothing", async () => {
      const before = await log.lastSeq();
      const header = await call("/v1/nodes/gpu-a1/cordon", {
        method: "POST",
        body: JSON.stringify({ reason: "maintenance" }),
        headers: { "content-type": "application/json", "x-llmgw-operator": "ops>*.evil name" },
      });
      isError(header, 400, "invalid-argument", /recorded as the token's name, "admin".*X-Llmgw-Operator/);
      const body = await call("/v1/nodes/gpu-a1/cordon", {
        method: "POST",
        body: JSON.stringify({ reason: "maintenance", operator: "x".repeat(10_000) }),
        headers: { "content-type": "application/json" },
      });
      isError(body, 400, "invalid-argument", /remove the body's operator field/);
      assert.ok(body.body.error.message.length < 400, "the claimed value is cut short in the message");
      assert.equal(await log.lastSeq(), before);
    });

    it("leaves a log with only subjects of the layout", async () => {
      assertLogHygiene(await readAll(log), prefix, (n) => ["gpu-a1", "gpu-a2", "gpu-b1"].includes(n));
    });
  });

  describe("secrets never reach the process log", () => {
    it("keeps engine env values out of the log lines (they are catalog data, recorded in the event log)", async () => {
      const r = await call("/v1/catalog", {
        method: "PUT",
        body: JSON.stringify(model({}, { engineEnv: { HF_TOKEN: ENGINE_SECRET } })),
        headers: { "content-type": "application/json" },
      });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    });

    it("has logged every request above without a token or secret in any line", () => {
      const text = logs.text();
      assert.ok(text.includes("incoming request"), "fastify request logging is on at this level");
      for (const secret of [TOKEN, WRONG, ENGINE_SECRET, TOKEN.slice(0, -1)]) {
        const at = text.indexOf(secret);
        assert.equal(at, -1, `found ${secret} in: ${text.slice(Math.max(0, at - 200), at + 50)}`);
      }
    });
  });
});

function model(over: Record<string, unknown> = {}, profile: Record<string, unknown> = {}) {
  return {
    models: [
      {
        name: "llama",
        replicas: 1,
        profiles: [{ name: "tp1", gpusPerShard: 1, memoryPerGpu: "10GiB", ...profile }],
        ...over,
      },
    ],
  };
}

describe("NATS credentials in URLs", () => {
  const SECRET = "nats-pass-5c1e8f";
  let dir: string;
  let port: number;
  let nats: ReturnType<typeof spawn> | undefined;

  before(async () => {
    dir = tempDir("nats-auth");
    // Port -1: the server chooses one and says which.
    const server = spawn(
      natsServerBinary(),
      ["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", dir, "--user", "llmgw", "--pass", SECRET],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    nats = server;
    port = await new Promise<number>((resolve, reject) => {
      let out = "";
      const timer = setTimeout(() => reject(new Error(`nats-server named no port:\n${out}`)), 15_000);
      const onData = (b: Buffer) => {
        out += b.toString();
        const m = /Listening for client connections on [^\s]*:(\d+)/.exec(out);
        if (!m) return;
        clearTimeout(timer);
        server.stdout?.off("data", onData);
        server.stderr?.off("data", onData);
        server.stdout?.resume();
        server.stderr?.resume();
        resolve(Number(m[1]));
      };
      server.stdout?.on("data", onData);
      server.stderr?.on("data", onData);
    });
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        const l = await openLog({
          url: `nats://llmgw:${SECRET}@127.0.0.1:${port}`,
          clientName: "probe",
          name: uniqueStream("PROBE"),
          prefix: "probe.evt",
        });
        await l.jsm.streams.delete(l.stream).catch(() => {});
        await l.close();
        break;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  });
  after(() => {
    nats?.kill("SIGKILL");
  });

  it("keeps the password out of the API's and the gateway's logs while they run", async () => {
    const url = `nats://llmgw:${SECRET}@127.0.0.1:${port}`;
    const logs = capturedLogger();
    const prefix = `t${rand()}.evt`;
    const stream = uniqueStream("OPSECN");
    const log = await openLog({ url, clientName: "test", name: stream, prefix });
    const api = await startApi({
      log,
      host: "127.0.0.1",
      port: 0,
      auth: { kind: "dev" },
      logger: logs.logger,
    });
    const gw = await Gateway.start(
      {
        id: `gw-${rand()}`,
        listen: "127.0.0.1:0",
        insecureDev: true,
        nats: url,
        stream,
        prefix,
        leaseBucket: `l_${rand()}`,
      },
      { logger: logs.logger },
    );
    try {
      assert.equal((await fetch(`${api.url}/v1/nodes`)).status, 200);
    } finally {
      await gw.drain("test over");
      await api.close();
      await log.jsm.streams.delete(stream).catch(() => {});
      await log.close();
    }
    assert.ok(logs.text().includes("gateway listening"));
    assert.ok(!logs.text().includes(SECRET), "the NATS password is in a log line");
  });

  it("keeps the password out of the error when NATS cannot be reached or refuses it", async () => {
    const nowhere = await unreachablePort();
    try {
      for (const url of [
        `nats://llmgw:${SECRET}@127.0.0.1:${nowhere.port}`,
        `nats://llmgw:${SECRET}x@127.0.0.1:${port}`,
        `nats://127.0.0.1:1,nats://llmgw:${SECRET}@127.0.0.1:${nowhere.port}`,
      ]) {
        const err = await openLog({ url, clientName: "t", name: "X", prefix: "x.evt" }).then(
          () => undefined,
          (e: Error) => e,
        );
        assert.ok(err, `${url} connected`);
        assert.ok(!String(err.message).includes(SECRET), err.message);
        assert.match(err.message, /llmgw:\*\*\*@127\.0\.0\.1/, err.message);
      }
    } finally {
      await nowhere.close();
    }
  });

  it("llmgw api prints neither the password nor the token when NATS is unreachable", async () => {
    const nowhere = await unreachablePort();
    const out = await new Promise<{ code: number | null; text: string }>((resolve) => {
      const p = spawn(
        process.execPath,
        [
          LLMGW_BIN,
          "api",
          "--listen",
          "127.0.0.1:0",
          "--nats",
          `nats://llmgw:${SECRET}@127.0.0.1:${nowhere.port}`,
        ],
        { env: { ...process.env, LLMGW_API_TOKEN: TOKEN }, stdio: ["ignore", "pipe", "pipe"] },
      );
      let text = "";
      p.stdout?.on("data", (b) => (text += b));
      p.stderr?.on("data", (b) => (text += b));
      p.once("exit", (code) => resolve({ code, text }));
    }).finally(() => nowhere.close());
    assert.notEqual(out.code, 0, out.text);
    assert.ok(!out.text.includes(SECRET), out.text);
    assert.ok(!out.text.includes(TOKEN), out.text);
  });
});
