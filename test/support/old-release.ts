/**
 * Earlier versions of this repository, taken from its own git history, to
 * run beside the current code: the fleet-schema golden logs are recorded
 * by them, and the rolling-upgrade test runs the previous release's gateway
 * and reconciler. A version is exported with `git archive` into a temp
 * directory (no checkout, the work tree is untouched) and runs on this
 * tree's node_modules through a symlink, which is only sound when every
 * package its lock shares with this tree's is at the same version and the
 * ones this tree dropped are imported by none of its code (`compatibleLock`).
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
 * brought schema 10), whose dependencies this tree's node_modules serve.
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

/** Runs git here; `noMatchIsEmpty`: exit status 1 (git grep found nothing) is an empty answer. */
function git(args: string[], input?: Buffer, noMatchIsEmpty = false): Buffer {
  try {
    return execFileSync("git", ["-C", REPO_ROOT, ...args], {
      maxBuffer: 512 * 1024 * 1024,
      ...(input ? { input } : {}),
      stdio: ["pipe", "pipe", "pipe"],
    });
  } catch (err) {
    if (noMatchIsEmpty && (err as { status?: number }).status === 1) return Buffer.alloc(0);
    throw err;
  }
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

/** The installed packages of a lockfile: path under node_modules → version. */
function lockPackages(text: string): Map<string, string> {
  const lock = JSON.parse(text) as { packages?: Record<string, { version?: string }> };
  const out = new Map<string, string>();
  for (const [path, p] of Object.entries(lock.packages ?? {})) {
    if (path.startsWith("node_modules/") && p.version) out.set(path, p.version);
  }
  return out;
}

/**
 * Why the commit cannot run on this tree's node_modules, or undefined when
 * it can: every package both locks hold is at the same version, and every
 * top-level package only the commit's lock holds is imported by none of the
 * commit's code (a dependency dropped since because nothing used it).
 */
export function lockIncompatibility(commit: string): string | undefined {
  requireCommit(commit);
  const theirs = lockPackages(git(["show", `${commit}:package-lock.json`]).toString());
  const ours = lockPackages(readFileSync(join(REPO_ROOT, "package-lock.json"), "utf8"));
  for (const [path, version] of theirs) {
    const mine = ours.get(path);
    if (mine !== undefined && mine !== version) return `${path} is ${version} there and ${mine} here`;
    if (mine !== undefined) continue;
    const name = path.slice("node_modules/".length);
    if (name.includes("/node_modules/")) continue;
    const used = git(["grep", "-l", "-F", `"${name}`, commit, "--", "src", "bin", "bench"], undefined, true)
      .toString()
      .trim();
    if (used !== "") return `its code imports ${name}, which this tree no longer installs`;
  }
  return undefined;
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
 * `requireSameLock` (default true) refuses a commit whose dependencies
 * this tree does not serve (`lockIncompatibility`): it would run on
 * dependencies it was not written for.
 */
export function exportRelease(commit: string, opts: { requireSameLock?: boolean } = {}): ExportedRelease {
  requireCommit(commit);
  const why = (opts.requireSameLock ?? true) ? lockIncompatibility(commit) : undefined;
  if (why !== undefined) {
    throw new Error(
      `commit ${commit} cannot run on this tree's node_modules (${why}); pin a commit whose dependencies this tree serves`,
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
