/**
 * Earlier versions of this repository, taken from its own git history, to
 * run beside the current code: the fleet-schema golden logs are recorded
 * by them, and the rolling-upgrade test runs the previous release's gateway
 * and reconciler. A version is exported with `git archive` into a temp
 * directory (no checkout, the work tree is untouched) and runs on this
 * tree's node_modules through a symlink, which is only sound when its
 * package-lock.json is this tree's byte for byte (`sameLock`).
 *
 * The history must be there: a shallow clone fails with what to run.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../harness/nats.js";

export const REPO_ROOT = join(import.meta.dirname, "../..");

/**
 * The previous release for the rolling-upgrade test: the last commit of
 * fleet schema 9 on the main line (the merge before disruption budgets
 * brought schema 10), whose package-lock.json is this tree's.
 */
export const PREVIOUS_RELEASE = {
  commit: "717b229d475b705868f96c5b71c4ee20776e4b1e",
  fleetSchemaVersion: 9,
} as const;

/**
 * For each fleet-schema version, a commit of this repository at that
 * version (the newest on the main line when recorded; 2 and 3 lived on a
 * branch) whose
 * golden-log builder recorded test/fixtures/golden-logs/fleet-schema-N.bin.
 */
export const SCHEMA_COMMITS: ReadonlyArray<{ schema: number; commit: string }> = [
  { schema: 2, commit: "464b7675d8b58b81836f307843a742406f954adb" },
  { schema: 3, commit: "62bcf451d9f5b2fc128ee85e0cdec8a437783e42" },
  { schema: 4, commit: "a1a608f6bc03c91ae2ca694850bdafe2e83f2004" },
  { schema: 5, commit: "0c16b77b162a8a08aa4f85c59c816a76258fa90e" },
  { schema: 6, commit: "2a64799d105f02b52b3dbb7af00c7a65daae6dee" },
  { schema: 7, commit: "c074ea25a0bcc44fae0c57df823839e3e8283b5a" },
  { schema: 8, commit: "ac5410071332491952161a2b976cc1b89ebcd985" },
  { schema: 9, commit: PREVIOUS_RELEASE.commit },
  { schema: 10, commit: "e8c0aceadeaf9bc73cede4186c0eeaa9cc9f60b8" },
];

function git(args: string[], input?: Buffer): Buffer {
  return execFileSync("git", ["-C", REPO_ROOT, ...args], {
    maxBuffer: 512 * 1024 * 1024,
    ...(input ? { input } : {}),
    stdio: ["pipe", "pipe", "pipe"],
  });
}

/** Fails with what to do when the commit is not in this clone's history. */
function requireCommit(commit: string): void {
  try {
    git(["cat-file", "-e", `${commit}^{commit}`]);
  } catch {
    throw new Error(
      `commit ${commit} is not in this clone's history; the upgrade tests need the full history (git fetch --unshallow)`,
    );
  }
}

/** True when the commit's package-lock.json is this tree's, byte for byte. */
export function sameLock(commit: string): boolean {
  requireCommit(commit);
  const theirs = git(["rev-parse", `${commit}:package-lock.json`])
    .toString()
    .trim();
  const ours = git(["hash-object", "--stdin"], readFileSync(join(REPO_ROOT, "package-lock.json")))
    .toString()
    .trim();
  return theirs === ours;
}

export interface ExportedRelease {
  commit: string;
  dir: string;
  /** Its `llmgw` command (bin/llmgw.js, which runs its TypeScript through tsx). */
  bin: string;
  remove(): void;
}

/**
 * Exports a commit into a temp directory with this tree's node_modules.
 * `requireSameLock` (default true) refuses a commit whose lock differs:
 * it would run on dependencies it was not written for.
 */
export function exportRelease(commit: string, opts: { requireSameLock?: boolean } = {}): ExportedRelease {
  requireCommit(commit);
  if ((opts.requireSameLock ?? true) && !sameLock(commit)) {
    throw new Error(
      `commit ${commit} has another package-lock.json than this tree: it cannot run on this node_modules; pin a commit whose lock is identical`,
    );
  }
  const dir = join(tempDir("release"), commit.slice(0, 12));
  mkdirSync(dir, { recursive: true });
  const tar = git(["archive", "--format=tar", commit]);
  execFileSync("tar", ["-x", "-C", dir], { input: tar, maxBuffer: 512 * 1024 * 1024 });
  symlinkSync(join(REPO_ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  const bin = join(dir, "bin/llmgw.js");
  if (!existsSync(bin)) throw new Error(`commit ${commit} has no bin/llmgw.js`);
  return {
    commit,
    dir,
    bin,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
