/**
 * The import graph of src (test/lint/import-graph.ts): no circle of value
 * imports between files, and every pure room pure by what it reaches, not
 * only by its own imports. Shown to fire on planted trees (a circle, a deep
 * import of a NATS client, a clock two files away) and on the real tree
 * with one import added.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import {
  buildGraph,
  checkImportGraph,
  describeReport,
  findImpurities,
  PURE_ROOMS,
  parseSource,
  sourceFiles,
} from "./import-graph.js";

const ROOT = join(import.meta.dirname, "../..");

/** The real tree of src, parsed once for every planted case (each plants into a copy of the map). */
let srcGraph: ReturnType<typeof buildGraph> | undefined;

/** What the real tree of src, with one file planted at `planted`, makes impure in the pure room `room`. */
function impuritiesWithPlanted(room: string, planted: string, text: string) {
  srcGraph ??= buildGraph(ROOT, sourceFiles(ROOT, "src"));
  const graph = new Map(srcGraph);
  graph.set(planted, parseSource(planted, text));
  return findImpurities(
    graph,
    PURE_ROOMS.filter((r) => r.name === room),
  );
}

describe("the import graph of src", () => {
  const report = checkImportGraph(ROOT);
  const lines = describeReport(report);

  it("has no circle of value imports between files (type-only imports carry no code and do not count)", () => {
    const cycles = lines.filter((l) => l.startsWith("import cycle:"));
    assert.deepEqual(
      cycles,
      [],
      "a new import cycle: break it (a type-only import, or the shared part in a file of its own)",
    );
  });

  it("keeps every pure room free of NATS, node: I/O, clocks, randomness and timers through all it reaches", () => {
    const impure = lines.filter((l) => l.startsWith("pure room"));
    assert.deepEqual(impure, []);
  });

  it("fires on the real tree when a pure room's file imports something that reaches NATS", () => {
    const planted = "src/codec/planted.ts";
    const found = impuritiesWithPlanted(
      "codec",
      planted,
      `import { openLog } from "../log/index.js";\nexport const x = openLog;\n`,
    );
    const nats = found.filter((i) => i.what.startsWith("@nats-io/"));
    assert.ok(nats.length > 0, "the log's barrel reaches a NATS client");
    for (const i of nats) assert.equal(i.chain.at(-1), planted, "the chain leads back to the planted import");
  });

  it("fires when the session core names a type of its shell (the shell's identity.ts loads node:http2)", () => {
    const planted = "src/gateway/session-core/planted.ts";
    const found = impuritiesWithPlanted(
      "gateway/session-core",
      planted,
      `import type { SessionHost } from "../session-host.js";\nexport type X = SessionHost;\n`,
    );
    assert.deepEqual(
      found.map((i) => `${i.what} <- ${i.chain.join(" <- ")}`),
      [`src/gateway/session-host.ts (outside src/gen/, src/codec/, src/ids/) <- ${planted}`],
    );
  });
});

describe("the simulation's own files (src/simulation)", () => {
  it("fire on a clock, a timer or randomness of their own, and not on the end of a turn", () => {
    const planted = "src/simulation/planted.ts";
    const found = impuritiesWithPlanted(
      "simulation",
      planted,
      "export const t = () => Date.now();\nexport const r = () => Math.random();\nsetTimeout(() => {}, 1);\n",
    );
    assert.deepEqual(
      found.map((i) => i.what),
      [`Date.now at ${planted}:1`, `Math.random at ${planted}:2`, `setTimeout() at ${planted}:3`],
    );
  });
});

describe("the import-graph checker on planted trees", () => {
  const dir = mkdtempSync(join(tmpdir(), "import-graph-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const plant = (files: Record<string, string>) => {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(join(dir, dirname(path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
  };
  plant({
    // A circle of value imports, one through a re-export.
    "src/circle/a.ts": `import { b } from "./b.js";\nexport const a = () => b;\n`,
    "src/circle/b.ts": `export { c as b } from "./c.js";\n`,
    "src/circle/c.ts": `import { a } from "./a.js";\nexport const c = () => a;\n`,
    // Types only both ways: no code runs, no circle.
    "src/types/x.ts": `import type { Y } from "./y.js";\nexport interface X { y?: Y }\n`,
    "src/types/y.ts": `import type { X } from "./x.js";\nexport interface Y { x?: X }\n`,
    // Inline type specifiers keep the import (verbatimModuleSyntax): a circle.
    "src/inline/p.ts": `import { type Q } from "./q.js";\nexport interface P { q?: Q }\n`,
    "src/inline/q.ts": `import { type P } from "./p.js";\nexport interface Q { p?: P }\n`,
    // A pure room reaching a NATS client two imports deep.
    "src/pure/uses-helper.ts": `import { helper } from "../shell/helper.js";\nexport const f = helper;\n`,
    "src/shell/helper.ts": `import { nats } from "./deep.js";\nexport const helper = nats;\n`,
    "src/shell/deep.ts": `import { connect } from "@nats-io/transport-node";\nexport const nats = connect;\n`,
    // A pure room reaching a clock, and names of clocks only in comments and strings.
    "src/pure/stamps.ts": `import { stamp } from "../shell/clock.js";\nexport const g = stamp;\n`,
    "src/shell/clock.ts": `// Date.now() in a comment\nconst s = "Math.random()";\nexport const stamp = () => [Date.now(), s, new Date(0)];\n`,
    "src/pure/times.ts": `export const t = () => { setTimeout(() => {}, 1); return new Date(); };\n`,
    // node: modules: one that does I/O, one that only computes; a type-only NATS import.
    "src/pure/reads.ts": `import { readFileSync } from "node:fs";\nimport assert from "node:assert/strict";\nexport const r = () => { assert.ok(1); return readFileSync; };\n`,
    "src/pure/typed.ts": `import type { NatsConnection } from "@nats-io/transport-node";\nexport type C = NatsConnection;\n`,
  });
  const report = checkImportGraph(dir, [{ name: "planted", paths: ["src/pure"] }]);

  it("finds a circle of value imports, through a re-export, and one of inline type specifiers", () => {
    assert.deepEqual(report.cycles, [
      ["src/circle/a.ts", "src/circle/b.ts", "src/circle/c.ts", "src/circle/a.ts"],
      ["src/inline/p.ts", "src/inline/q.ts", "src/inline/p.ts"],
    ]);
  });

  it("finds a NATS client imported deep in a pure room's closure, with the chain that reaches it", () => {
    const nats = report.impurities.filter((i) => i.what.startsWith("@nats-io/"));
    assert.deepEqual(
      nats.map((i) => i.chain),
      [["src/shell/deep.ts", "src/shell/helper.ts", "src/pure/uses-helper.ts"]],
      "the type-only import of typed.ts does not count",
    );
  });

  it("finds clocks, timers and node: I/O by what the code calls, not by comments or strings", () => {
    const whats = report.impurities.map((i) => i.what).sort();
    assert.deepEqual(whats, [
      "@nats-io/transport-node (a NATS client)",
      "Date.now at src/shell/clock.ts:3",
      "new Date() at src/pure/times.ts:1",
      "node:fs (a node: module with I/O, a clock or randomness)",
      "setTimeout() at src/pure/times.ts:1",
    ]);
  });
});
