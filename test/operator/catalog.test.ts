import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { ModelSchema } from "../../src/gen/llmgw/v1/events_pb.js";
import {
  catalogFileFrom,
  formatDuration,
  formatMemory,
  parseCatalogText,
  parseDuration,
  parseMemory,
  toProtoCatalog,
  validateCatalog,
} from "../../src/operator/index.js";
import { modelFrom } from "../../src/projections/convert.js";
import { canonicalJson } from "../../src/projections/index.js";

const example = readFileSync(new URL("../../examples/catalog.yaml", import.meta.url), "utf8");

/** A catalog of one model with one profile; tests append the profile's further fields. */
const ONE_PROFILE = `models:
  - name: big
    replicas: 1
    profiles:
      - name: tp8
        gpusPerShard: 8
        memoryPerGpu: 70GiB
`;

function issuesOf(text: string, format: "yaml" | "json" = "yaml") {
  const r = parseCatalogText(text, format);
  assert.equal(r.ok, false, "expected the catalog to be refused");
  return r.ok ? [] : r.issues;
}

describe("catalog file", () => {
  it("accepts the example catalog, and it fits the dev fleet (8 nodes x 8 H100, pods of 4)", () => {
    const r = parseCatalogText(example, "yaml");
    assert.ok(r.ok, JSON.stringify(!r.ok && r.issues));
    const gpus = r.catalog.models.map((m) => {
      const p = m.profiles[0];
      assert.ok(p);
      assert.match(p.gpuProduct, /H100/);
      assert.ok(p.memoryPerGpu <= 80 * 1024, `${m.name} asks more memory than an 80 GB card has`);
      return m.replicas * p.shards * p.gpusPerShard;
    });
    const total = gpus.reduce((a, b) => a + b, 0);
    assert.ok(
      total <= 64 - 8,
      `the example takes ${total} of 64 GPUs; a node's worth must stay free for drains`,
    );
    const big = r.catalog.models.find((m) => m.name === "llama-3.1-405b")?.profiles[0];
    assert.deepEqual([big?.shards, big?.gpusPerShard, big?.fabricKind], [2, 8, "infiniband"]);
    assert.deepEqual(
      r.catalog.models.find((m) => m.name === "llama-3.3-70b")?.profiles.map((p) => p.name),
      ["tp4", "tp8"],
    );
  });

  it("converts to the proto Catalog and back to the same file", () => {
    const r = parseCatalogText(example, "yaml");
    assert.ok(r.ok);
    const proto = toProtoCatalog(r.catalog);
    assert.equal(proto.models[3]?.profiles[0]?.memoryPerGpuMb, BigInt(72 * 1024));
    const file = catalogFileFrom(proto.models.map(modelFrom));
    const again = validateCatalog(file);
    assert.ok(again.ok);
    // Compared as projected (maps sorted): the map order of a message is not meaningful.
    assert.equal(
      canonicalJson(toProtoCatalog(again.catalog).models.map(modelFrom)),
      canonicalJson(proto.models.map(modelFrom)),
    );
  });

  it("rollout: defaults 1/0/10m; both 0, a negative count or a bare deadline are refused naming the field", () => {
    const r = parseCatalogText(example, "yaml");
    assert.ok(r.ok);
    const m70 = toProtoCatalog(r.catalog)
      .models.map(modelFrom)
      .find((m) => m.name === "llama-3.3-70b");
    assert.deepEqual(m70?.rollout, { maxSurge: 1, maxUnavailable: 0, progressDeadlineMs: 15 * 60_000 });
    const m8 = toProtoCatalog(r.catalog)
      .models.map(modelFrom)
      .find((m) => m.name === "llama-3.1-8b");
    assert.deepEqual(m8?.rollout, { maxSurge: 1, maxUnavailable: 0, progressDeadlineMs: 10 * 60_000 });
    const zero = modelFrom(
      toProtoCatalog({
        models: [{ name: "m", replicas: 1, profiles: [], rollout: { maxSurge: 0, maxUnavailable: 2 } }],
      }).models[0]!,
    );
    assert.deepEqual(zero.rollout, { maxSurge: 0, maxUnavailable: 2, progressDeadlineMs: 10 * 60_000 });
    const base = "models:\n  - name: m\n    replicas: 0\n    rollout: ";
    assert.deepEqual(issuesOf(`${base}{maxSurge: 0}\n`), [
      {
        path: "models[0].rollout.maxSurge",
        message: "maxSurge and maxUnavailable cannot both be 0: the rollout could never replace a replica",
      },
    ]);
    assert.equal(issuesOf(`${base}{maxUnavailable: -1}\n`)[0]?.path, "models[0].rollout.maxUnavailable");
    assert.equal(issuesOf(`${base}{progressDeadline: 600}\n`)[0]?.path, "models[0].rollout.progressDeadline");
    assert.equal(issuesOf(`${base}{maxSurges: 1}\n`)[0]?.path, "models[0].rollout.maxSurges");
  });

  it("accepts the empty catalog, refuses an empty file", () => {
    assert.ok(parseCatalogText("models: []\n", "yaml").ok);
    assert.deepEqual(issuesOf(""), [
      { path: "", message: "the catalog is empty; write `models: []` to serve nothing" },
    ]);
  });

  it("reports every invalid field at once", () => {
    const issues = issuesOf(
      JSON.stringify({
        models: [
          { name: "x/y", replicas: 1.5, profiles: [{ name: "p", gpusPerShard: 65, memoryPerGpu: "1TB" }] },
          { name: "ok", replicas: 3, profiles: [] },
          { name: "ok", replicas: 0, typo: true },
        ],
        extra: 1,
      }),
      "json",
    );
    assert.deepEqual(
      issues.map((i) => i.path),
      [
        "models[0].name",
        "models[0].replicas",
        "models[0].profiles[0].gpusPerShard",
        "models[0].profiles[0].memoryPerGpu",
        "models[2].typo",
        "extra",
        "models[1].profiles",
        "models[2].name",
      ],
    );
  });

  it("names wrong types and missing fields", () => {
    const issues = issuesOf("models:\n  - name: [1]\n    replicas: '3'\n    profiles:\n      - shards: 1\n");
    const byPath = Object.fromEntries(issues.map((i) => [i.path, i.message]));
    assert.match(byPath["models[0].name"] ?? "", /expected string, received array/);
    assert.match(byPath["models[0].replicas"] ?? "", /expected number, received string/);
    assert.equal(byPath["models[0].profiles[0].name"], "required");
    assert.equal(byPath["models[0].profiles[0].gpusPerShard"], "required");
    assert.equal(byPath["models[0].profiles[0].memoryPerGpu"], "required");
  });

  it("reports YAML syntax errors with their position, and duplicate keys", () => {
    const syntax = issuesOf("models:\n  - name: a\n    replicas: [1\n");
    assert.match(syntax[0]?.message ?? "", /^invalid YAML: .*line \d+, column \d+$/);
    const dup = issuesOf("models: []\nmodels: []\n");
    assert.match(dup[0]?.message ?? "", /^invalid YAML: Map keys must be unique/);
  });

  it("checks names, env names and label keys", () => {
    const long = "a".repeat(65);
    const issues = issuesOf(
      [
        "models:",
        `  - name: ${long}`,
        "    replicas: 1",
        "    profiles:",
        "      - name: 'tp 4'",
        "        gpusPerShard: 4",
        "        memoryPerGpu: 72GiB",
        "        engineEnv: { '1BAD': x }",
        "        nodeLabels: { 'bad key': x }",
      ].join("\n"),
    );
    assert.deepEqual(
      issues.map((i) => i.path),
      [
        "models[0].name",
        "models[0].profiles[0].name",
        'models[0].profiles[0].nodeLabels["bad key"]',
        'models[0].profiles[0].engineEnv["1BAD"]',
      ],
    );
  });

  it("reads and writes memory sizes with binary units", () => {
    assert.deepEqual(parseMemory("72GiB"), { mb: 73728 });
    assert.deepEqual(parseMemory("512 MiB"), { mb: 512 });
    assert.deepEqual(parseMemory("1.5Gi"), { mb: 1536 });
    assert.match((parseMemory("80GB") as { error: string }).error, /ambiguous/);
    assert.match((parseMemory("80") as { error: string }).error, /binary unit/);
    assert.match((parseMemory("0GiB") as { error: string }).error, /positive/);
    assert.match((parseMemory("1.3MiB") as { error: string }).error, /whole number/);
    assert.equal(formatMemory(73728), "72GiB");
    assert.equal(formatMemory(1000), "1000MiB");
  });

  it("reads and writes lifecycle deadlines with units, and refuses bare or absurd ones naming the field", () => {
    assert.deepEqual(parseDuration("90s"), { ms: 90_000 });
    assert.deepEqual(parseDuration("1h30m"), { ms: 5_400_000 });
    assert.deepEqual(parseDuration("250ms"), { ms: 250 });
    assert.match((parseDuration("90") as { error: string }).error, /duration like "90s"/);
    assert.match((parseDuration("0s") as { error: string }).error, /positive/);
    assert.match((parseDuration("25h") as { error: string }).error, /longer than 24h/);
    assert.equal(formatDuration(1_200_000), "20m");
    assert.equal(formatDuration(1500), "1500ms");

    const withDeadlines = `${ONE_PROFILE}        startTimeout: 2m
        startAttempts: 5
        readyTimeout: 45m
`;
    const r = parseCatalogText(withDeadlines, "yaml");
    assert.ok(r.ok, JSON.stringify(!r.ok && r.issues));
    const spec = modelFrom(toProtoCatalog(r.catalog).models[0]!).profiles[0];
    assert.deepEqual(
      [spec?.startTimeoutMs, spec?.startAttempts, spec?.readyTimeoutMs],
      [120_000, 5, 2_700_000],
    );
    // Back to the file's shape as written; unset deadlines are not written out.
    const back = catalogFileFrom([modelFrom(toProtoCatalog(r.catalog).models[0]!)]).models[0]?.profiles?.[0];
    assert.deepEqual([back?.startTimeout, back?.startAttempts, back?.readyTimeout], ["2m", 5, "45m"]);

    assert.deepEqual(
      issuesOf(
        withDeadlines
          .replace("readyTimeout: 45m", "readyTimeout: 1200")
          .replace("startAttempts: 5", "startAttempts: 0"),
      ),
      [
        { path: "models[0].profiles[0].startAttempts", message: "must be at least 1" },
        {
          path: "models[0].profiles[0].readyTimeout",
          message: 'expected a duration with a unit, like "90s", "20m" or "1h30m"',
        },
      ],
    );
  });

  it("names the engine a profile runs with: the default one unless set, a bad name refused naming the field and the rule", () => {
    const withEngine = (engine: string | undefined) =>
      `${ONE_PROFILE}${engine === undefined ? "" : `        engine: ${JSON.stringify(engine)}\n`}`;
    const plain = parseCatalogText(withEngine(undefined), "yaml");
    assert.ok(plain.ok, JSON.stringify(!plain.ok && plain.issues));
    assert.equal(plain.catalog.models[0]?.profiles[0]?.engine, "default");
    const named = parseCatalogText(withEngine("vllm-0_8"), "yaml");
    assert.ok(named.ok, JSON.stringify(!named.ok && named.issues));
    const proto = toProtoCatalog(named.catalog);
    assert.equal(proto.models[0]?.profiles[0]?.engine, "vllm-0_8");
    const spec = modelFrom(proto.models[0]!);
    assert.equal(spec.profiles[0]?.engine, "vllm-0_8");
    assert.equal(catalogFileFrom([spec]).models[0]?.profiles?.[0]?.engine, "vllm-0_8");
    // A log written before profiles named an engine means the default one.
    assert.equal(
      modelFrom(create(ModelSchema, { name: "old", profiles: [{ name: "tp1" }] })).profiles[0]?.engine,
      "default",
    );
    for (const bad of ["", "vLLM", "-vllm", "vllm.nightly", "a b", "x".repeat(64)]) {
      assert.deepEqual(
        issuesOf(withEngine(bad)),
        [
          {
            path: "models[0].profiles[0].engine",
            message:
              "must be 1 to 63 characters: lower-case letters, digits, '_' or '-', starting with a letter or digit",
          },
        ],
        bad,
      );
    }
  });

  it("reads a disruption budget as a count or a percentage, refuses others naming the field, and round-trips it", () => {
    const withBudget = (v: string) =>
      ONE_PROFILE.replace("    replicas: 1\n", `    replicas: 1\n    minAvailable: ${v}\n`);
    for (const [written, stored, back] of [
      ["2", "2", 2],
      ['"2"', "2", 2],
      ['"75%"', "75%", "75%"],
      ['"0%"', "0%", "0%"],
    ] as const) {
      const r = parseCatalogText(withBudget(written), "yaml");
      assert.ok(r.ok, JSON.stringify(!r.ok && r.issues));
      const proto = toProtoCatalog(r.catalog).models[0]!;
      assert.equal(proto.minAvailable, stored);
      const spec = modelFrom(proto);
      assert.equal(spec.minAvailable, stored);
      assert.equal(catalogFileFrom([spec]).models[0]?.minAvailable, back);
    }
    // Without one, nothing is written and the state holds no field (old logs fold as before).
    const plain = parseCatalogText(ONE_PROFILE, "yaml");
    assert.ok(plain.ok);
    const spec = modelFrom(toProtoCatalog(plain.catalog).models[0]!);
    assert.equal("minAvailable" in spec, false);
    assert.equal("minAvailable" in (catalogFileFrom([spec]).models[0] ?? {}), false);
    for (const [bad, message] of [
      ['"150%"', "a percentage must be at most 100%"],
      [
        '"many"',
        'must be a whole number of replicas (e.g. "2") or a percentage of the desired replicas (e.g. "75%")',
      ],
      ["-1", "must not be negative"],
      [
        "1.5",
        'must be a whole number of replicas (e.g. 2) or a percentage of the desired replicas (e.g. "75%")',
      ],
    ] as const) {
      assert.deepEqual(issuesOf(withBudget(bad)), [{ path: "models[0].minAvailable", message }], bad);
    }
  });

  it("reads a model's autoscale setting, round-trips it, and refuses a bad one naming each field", () => {
    const withAutoscale = `${ONE_PROFILE}    autoscale:
      min: 1
      max: 6
      metric: queue_depth
      target: 8
      scaleUpCooldown: 20s
      scaleDownCooldown: 3m
`;
    const r = parseCatalogText(withAutoscale, "yaml");
    assert.ok(r.ok, JSON.stringify(!r.ok && r.issues));
    const spec = modelFrom(toProtoCatalog(r.catalog).models[0]!);
    assert.deepEqual(spec.autoscale, {
      min: 1,
      max: 6,
      metric: "queue_depth",
      target: 8,
      tolerance: 0.1,
      upCooldownMs: 20_000,
      downCooldownMs: 180_000,
      stabilizationMs: 15_000,
    });
    const back = catalogFileFrom([spec]).models[0]?.autoscale;
    assert.deepEqual(back, {
      min: 1,
      max: 6,
      metric: "queue_depth",
      target: 8,
      tolerance: 0.1,
      scaleUpCooldown: "20s",
      scaleDownCooldown: "3m",
      stabilization: "15s",
    });
    const again = validateCatalog(catalogFileFrom([spec]));
    assert.ok(again.ok, "what GET returns is accepted by PUT");
    assert.equal(modelFrom(create(ModelSchema, { name: "x", replicas: 1 })).autoscale, undefined);

    const cooldownsInverted = {
      path: "models[0].autoscale.scaleDownCooldown",
      message: "must be at least scaleUpCooldown (20000 ms): scaling down is the slower direction",
    };
    /** Edits of the valid autoscale block (text replaced in order), and the issues they must raise. */
    const invalid: Array<[edits: Array<[string, string]>, issues: Array<{ path: string; message: string }>]> =
      [
        [
          [
            ["min: 1", "min: 0"],
            ["metric: queue_depth", "metric: tokens"],
            ["scaleDownCooldown: 3m", "scaleDownCooldown: 10s"],
          ],
          [
            { path: "models[0].autoscale.min", message: "must be at least 1" },
            { path: "models[0].autoscale.metric", message: "must be one of queue_depth, kv_cache_use" },
          ],
        ],
        [
          [
            ["max: 6", "max: 0"],
            ["min: 1", "min: 2"],
            ["scaleDownCooldown: 3m", "scaleDownCooldown: 10s"],
          ],
          [
            { path: "models[0].autoscale.max", message: "must be at least 1" },
            { path: "models[0].autoscale.max", message: "must be at least min (2)" },
            cooldownsInverted,
          ],
        ],
        [
          [
            ["max: 6", "max: 1"],
            ["min: 1", "min: 2"],
            ["3m", "10s"],
          ],
          [{ path: "models[0].autoscale.max", message: "must be at least min (2)" }, cooldownsInverted],
        ],
        [
          [
            ["metric: queue_depth", "metric: kv_cache_use"],
            ["target: 8", "target: 80"],
          ],
          [
            {
              path: "models[0].autoscale.target",
              message: "kv_cache_use is a share from 0 to 1: the target must be at most 1",
            },
          ],
        ],
      ];
    for (const [edits, issues] of invalid) {
      const text = edits.reduce((t, [from, to]) => t.replace(from, to), withAutoscale);
      assert.deepEqual(issuesOf(text), issues, edits.map(([, to]) => to).join(", "));
    }
  });
});
