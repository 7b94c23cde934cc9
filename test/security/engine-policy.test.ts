/**
 * The engine policy as a pure function: what the catalog schema and every
 * agent check before an engine may start (src/engine-policy).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  DENIED_ENV_PATTERNS,
  deniedEnv,
  ENGINE_LIMITS,
  envNameProblem,
  launchIssues,
} from "../../src/engine-policy/index.js";
import { CatalogSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import { type CatalogVersion, undoCatalog } from "../../src/operator/catalog/undo.js";

describe("engine policy: the environment deny list", () => {
  const denied = [
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "ld_preload",
    "Ld_Preload",
    "DYLD_INSERT_LIBRARIES",
    "PATH",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "CLASSPATH",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_EXTRA_CA_CERTS",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "RES_OPTIONS",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "LUA_INIT",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "OPENSSL_CONF",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "HOME",
    "XDG_CONFIG_HOME",
    "CC",
    "CUDA_VISIBLE_DEVICES",
  ];
  for (const name of denied)
    it(`refuses ${name}, naming the pattern and why`, () => {
      const d = deniedEnv(name);
      assert.ok(d, `${name} is denied`);
      assert.ok(DENIED_ENV_PATTERNS.includes(d.pattern));
      assert.match(
        envNameProblem(name) ?? "",
        new RegExp(`deny list ${d.pattern.replace(/\*/g, "\\*")}: .+`),
      );
    });

  for (const name of [
    "VLLM_USE_V1",
    "NCCL_IB_HCA",
    "HF_TOKEN",
    "OMP_NUM_THREADS",
    "CUDA_DEVICE_ORDER",
    "ENVIRONMENT",
    "LDX",
  ])
    it(`lets ${name} through`, () => {
      assert.equal(deniedEnv(name), undefined);
      assert.equal(envNameProblem(name), undefined);
    });

  it("refuses what is no variable name", () => {
    for (const name of ["1BAD", "A=B", "A\nB", "", "x".repeat(129)]) assert.ok(envNameProblem(name), name);
  });
});

describe("engine policy: allow lists and limits", () => {
  it("without allow lists: arguments free, names outside the deny list free", () => {
    assert.deepEqual(launchIssues(["--trust-remote-code", "x"], { VLLM_USE_V1: "1" }), []);
  });

  it("with allow lists: every argument needs an allowed prefix, every name an allowed name or prefix", () => {
    const allow = {
      allowedEnv: ["VLLM_*", "HF_TOKEN"],
      allowedArgPrefixes: ["--max-model-len=", "--served-model-name="],
    };
    assert.deepEqual(launchIssues(["--max-model-len=8192"], { VLLM_USE_V1: "1", HF_TOKEN: "t" }, allow), []);
    const issues = launchIssues(
      ["--served-model-name=a", "--trust-remote-code"],
      { NCCL_DEBUG: "INFO" },
      allow,
    );
    assert.deepEqual(
      issues.map((i) => i.path),
      ["engineArgs[1]", "engineEnv.NCCL_DEBUG"],
    );
    assert.match(issues[0]!.message, /allowedArgPrefixes \(--max-model-len=, --served-model-name=\)/);
    assert.match(issues[1]!.message, /not in this engine's allowedEnv \(VLLM_\*, HF_TOKEN\)/);
  });

  it("an allow list never lets a denied name through", () => {
    const issues = launchIssues([], { LD_PRELOAD: "/x.so" }, { allowedEnv: ["*"] });
    assert.deepEqual(
      issues.map((i) => i.path),
      ["engineEnv.LD_PRELOAD"],
    );
    assert.match(issues[0]!.message, /deny list LD_\*/);
  });

  it("bounds counts and sizes, naming the field", () => {
    const many = Array.from({ length: ENGINE_LIMITS.maxArgs + 1 }, (_, i) => `--a${i}`);
    assert.deepEqual(
      launchIssues(many, {}).map((i) => i.path),
      ["engineArgs"],
    );
    const long = launchIssues(["x".repeat(ENGINE_LIMITS.maxArgChars + 1)], {});
    assert.deepEqual(
      long.map((i) => i.path),
      ["engineArgs[0]"],
    );
    const env = Object.fromEntries(
      Array.from({ length: ENGINE_LIMITS.maxEnv + 1 }, (_, i) => [`V${i}`, "1"]),
    );
    assert.deepEqual(
      launchIssues([], env).map((i) => i.path),
      ["engineEnv"],
    );
    const big = launchIssues([], { V: "x".repeat(ENGINE_LIMITS.maxEnvValueChars + 1) });
    assert.deepEqual(
      big.map((i) => i.path),
      ["engineEnv.V"],
    );
    const total = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`V${i}`, "x".repeat(4000)]));
    assert.match(
      launchIssues([], total)
        .map((i) => i.message)
        .join(),
      /characters together, more than 32768/,
    );
    assert.deepEqual(
      launchIssues(["a\u0000b"], { V: "a\u0000" }).map((i) => i.path),
      ["engineArgs[0]", "engineEnv.V"],
    );
  });
});

describe("engine policy: a rollout undo never applies again what the policy refuses", () => {
  const version = (seq: number, env: Record<string, string>): CatalogVersion => ({
    seq,
    timeMs: seq * 1000,
    appliedBy: "ops",
    catalog: create(CatalogSchema, {
      models: [
        {
          name: "m",
          replicas: 1,
          profiles: [{ name: "p", gpusPerShard: 1, memoryPerGpuMb: 1024n, engineEnv: env }],
        },
      ],
    }),
  });

  it("refuses to undo to a spec with a denied variable, naming it; undoes to a clean one", () => {
    const refused = undoCatalog([version(1, { LD_PRELOAD: "/tmp/x.so" }), version(2, {})], "m");
    assert.equal(refused.ok, false);
    assert.match(
      !refused.ok ? refused.message : "",
      /earlier spec of m \(catalog at sequence 1\) cannot be applied again: profiles\[0\]\.engineEnv\.LD_PRELOAD may not be set/,
    );
    const fine = undoCatalog([version(1, { VLLM_USE_V1: "1" }), version(2, {})], "m");
    assert.ok(fine.ok);
  });
});
