/**
 * The gateway's session core is pure by what it reaches, not only by its own
 * imports: following every import that carries code (type-only imports
 * carry none), it reaches no NATS client, no Node built-in module and no
 * clock. A deep import that adds one fails here; a planted fixture shows
 * the check fires, and that type-only imports do not count.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { checkClosure, describeFinding } from "../support/import-closure.js";

const ROOT = join(import.meta.dirname, "../..");
/** Packages the core may use: protobuf messages and Connect's error codes, neither doing I/O. */
const ALLOWED = ["@bufbuild/protobuf", "@connectrpc/connect"];

describe("the session core's import closure", () => {
  it("reaches no NATS client, no node: module and no clock", () => {
    const dir = join(ROOT, "src/gateway/session-core");
    const roots = readdirSync(dir)
      .filter((f) => f.endsWith(".ts"))
      .map((f) => join(dir, f));
    const findings = checkClosure(roots, { allowedPackages: ALLOWED, base: ROOT });
    assert.deepEqual(findings.map(describeFinding), []);
  });

  it("would catch the log's barrel, which reaches the NATS client", () => {
    const findings = checkClosure([join(ROOT, "src/log/index.ts")], { allowedPackages: ALLOWED, base: ROOT });
    assert.ok(findings.some((f) => f.what.startsWith("@nats-io/")));
  });

  it("fires on a planted fixture: deep value imports of NATS, node: I/O and each clock, never type-only imports", (t) => {
    const dir = mkdtempSync(join(tmpdir(), "closure-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const files: Record<string, string> = {
      // The root: type-only imports and re-exports of modules that would be forbidden, and one value import.
      "core/step.ts": [
        'import type { Nats } from "../io/nats-types.js";',
        'export type { Wall } from "../io/wall.js";',
        'import { type Hidden, helper } from "../lib/helper.js";',
        'import { type OnlyType } from "../lib/side-effect.js";',
        "export const step = (n: Nats, w: Wall, h: Hidden, o: OnlyType) => helper(n, w, h, o);",
      ].join("\n"),
      // Type-only targets: forbidden things in them do not count.
      "io/nats-types.ts":
        'import { connect } from "@nats-io/transport-node";\nexport type Nats = typeof connect;',
      "io/wall.ts": "export type Wall = number;\nexport const wall = Date.now();",
      // A value import two levels down reaches NATS, node:fs and every clock.
      "lib/helper.ts":
        'import { deep } from "./deep.js";\nexport type Hidden = string;\nexport const helper = (...a: unknown[]) => deep(a);',
      "lib/deep.ts": [
        'import { jetstream } from "@nats-io/jetstream";',
        'import { readFileSync } from "node:fs";',
        'import { randomUUID } from "crypto";',
        'import { z } from "zod";',
        'export * from "./timers.js";',
        "export const deep = (a: unknown) => [a, jetstream, readFileSync, randomUUID, z, new Date(), new Date(0)];",
        '// Date.now() in a comment is not a call, nor is "performance.now()" in a string.',
      ].join("\n"),
      "lib/timers.ts": [
        "export const t1 = setTimeout(() => {}, 1);",
        "export const t2 = setInterval(() => {}, 1);",
        "export const t3 = performance.now();",
        "export const t4 = Date.now();",
      ].join("\n"),
      // Only inline type specifiers: kept as `import {} from` under verbatimModuleSyntax, so it loads.
      "lib/side-effect.ts": 'import "node:net";\nexport type OnlyType = number;',
    };
    for (const [name, text] of Object.entries(files)) {
      const path = join(dir, name);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, text);
    }
    const findings = checkClosure([join(dir, "core/step.ts")], { allowedPackages: ALLOWED, base: dir });
    assert.deepEqual(findings.map(describeFinding).sort(), [
      "@nats-io/jetstream <- lib/deep.ts <- lib/helper.ts <- core/step.ts",
      "Date.now() <- lib/timers.ts <- lib/deep.ts <- lib/helper.ts <- core/step.ts",
      "crypto <- lib/deep.ts <- lib/helper.ts <- core/step.ts",
      "new Date() <- lib/deep.ts <- lib/helper.ts <- core/step.ts",
      "node:fs <- lib/deep.ts <- lib/helper.ts <- core/step.ts",
      "node:net <- lib/side-effect.ts <- core/step.ts",
      "performance.now() <- lib/timers.ts <- lib/deep.ts <- lib/helper.ts <- core/step.ts",
      "setInterval() <- lib/timers.ts <- lib/deep.ts <- lib/helper.ts <- core/step.ts",
      "setTimeout() <- lib/timers.ts <- lib/deep.ts <- lib/helper.ts <- core/step.ts",
      "zod (a package not on the allow list) <- lib/deep.ts <- lib/helper.ts <- core/step.ts",
    ]);
  });
});
