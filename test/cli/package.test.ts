/**
 * The npm package: `npm pack` ships only what package.json's `files` names (no
 * tests, benchmarks or TypeScript sources), and the code compiled by
 * tsconfig.build.json runs as the package lays it out, through bin/llmgw.js
 * and without the sources beside it.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";

const ROOT = join(import.meta.dirname, "../..");
const run = promisify(execFile);

describe("the npm package", () => {
  let pkg: string;

  before(async () => {
    pkg = mkdtempSync(join(tmpdir(), "llmgw-package-"));
    await run(
      process.execPath,
      [
        join(ROOT, "node_modules/typescript/bin/tsc"),
        "-p",
        "tsconfig.build.json",
        "--outDir",
        join(pkg, "dist"),
      ],
      { cwd: ROOT },
    );
    // Nothing under src/ imports bench/ or test/: the compiled package holds neither.
    for (const d of ["bench", "test"]) assert.ok(!existsSync(join(pkg, "dist", d)), `dist/${d} was compiled`);
    for (const f of ["package.json", "bin", "examples"])
      cpSync(join(ROOT, f), join(pkg, f), { recursive: true });
    symlinkSync(join(ROOT, "node_modules"), join(pkg, "node_modules"));
  });
  after(() => rmSync(pkg, { recursive: true, force: true }));

  it("packs only the built code, the UI, examples and the nats-server helper", async () => {
    const { stdout } = await run("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: ROOT });
    const files = (JSON.parse(stdout) as { files: { path: string }[] }[])[0]?.files.map((f) => f.path) ?? [];
    assert.ok(files.includes("bin/llmgw.js"), `bin/llmgw.js is not packed: ${files.join(" ")}`);
    assert.ok(
      files.includes("examples/catalog.yaml"),
      "examples/catalog.yaml (llmgw dev's catalog) is not packed",
    );
    assert.ok(
      files.includes("scripts/ensure-nats-server"),
      "scripts/ensure-nats-server (llmgw dev) is not packed",
    );
    const allowed =
      /^(bin\/|dist\/src\/|dist\/ui\/|examples\/|scripts\/ensure-nats-server$|README\.md$|package\.json$)/;
    for (const f of files) assert.match(f, allowed, `${f} should not be in the package`);
  });

  it("runs the compiled code: --help, completion, and the UI found beside it", async () => {
    const bin = join(pkg, "bin/llmgw.js");
    const help = await run(process.execPath, [bin, "--help"]);
    assert.match(help.stdout, /^Usage: llmgw/);
    const completion = await run(process.execPath, [bin, "completion", "bash"]);
    assert.match(completion.stdout, /complete -o bashdefault -o default -F _llmgw llmgw/);
    // Only the compiled layout lacks bench/: reaching this message proves dist/src ran.
    const bench = await run(process.execPath, [bin, "bench"]).then(
      () => assert.fail("llmgw bench ran benchmarks from the package"),
      (err: { code: number; stderr: string }) => err,
    );
    assert.equal(bench.code, 2);
    assert.match(bench.stderr, /the benchmarks are not in this installation/);
    const ui = await run(process.execPath, [
      "--input-type=module",
      "-e",
      `const m = await import(${JSON.stringify(join(pkg, "dist/src/operator/routes/ui.js"))}); console.log(m.DEFAULT_UI_DIR);`,
    ]);
    assert.equal(ui.stdout.trim(), join(pkg, "dist/ui/"));
  });
});
