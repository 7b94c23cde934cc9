/**
 * The gateway's session core is pure by what it reaches, not only by its own
 * imports: following every value import (type-only imports carry no code),
 * it reaches no NATS client and no `node:` module. A deep import that adds
 * one (as the log's barrel did, through its error classifier) fails here.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { describe, it } from "node:test";

const ROOT = join(import.meta.dirname, "../..");
const IMPORT = /^(?:import|export)\s+(type\s+)?[^;]*?\s+from\s+"([^"]+)"/gms;

/** What `file` imports for its code: relative files resolved, packages as named. */
function valueImports(file: string): string[] {
  const out: string[] = [];
  for (const m of readFileSync(file, "utf8").matchAll(IMPORT)) {
    if (m[1]) continue;
    const spec = m[2] as string;
    out.push(spec.startsWith(".") ? normalize(join(dirname(file), spec.replace(/\.js$/, ".ts"))) : spec);
  }
  return out;
}

/** Everything `roots` reach, each with the file that first imports it. */
function closure(roots: string[]): Map<string, string | undefined> {
  const via = new Map<string, string | undefined>(roots.map((r) => [r, undefined]));
  const queue = [...roots];
  for (let f = queue.shift(); f !== undefined; f = queue.shift()) {
    if (!f.endsWith(".ts") || !existsSync(f)) continue;
    for (const i of valueImports(f)) {
      if (via.has(i)) continue;
      via.set(i, f);
      queue.push(i);
    }
  }
  return via;
}

const forbidden = (spec: string) => spec.startsWith("@nats-io/") || spec.startsWith("node:");

describe("the session core's import closure", () => {
  it("reaches no NATS client and no node: module", () => {
    const dir = join(ROOT, "src/gateway/session-core");
    const via = closure(readdirSync(dir).map((f) => join(dir, f)));
    const chains = [...via.keys()].filter(forbidden).map((bad) => {
      const chain = [bad];
      for (let f = via.get(bad); f !== undefined; f = via.get(f)) chain.push(relative(ROOT, f));
      return chain.join(" <- ");
    });
    assert.deepEqual(chains, []);
  });

  it("would catch one (the check fires on a file that reaches the log's barrel)", () => {
    const via = closure([join(ROOT, "src/log/index.ts")]);
    assert.ok([...via.keys()].some(forbidden));
  });
});
