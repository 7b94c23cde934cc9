/** Checks of a systemd unit file for the host install tests. */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";

/** A unit's keys by section (`Service.KillMode` → its values, in order). */
export function unitKeys(text: string): Map<string, string[]> {
  const keys = new Map<string, string[]>();
  let section = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) {
      section = header[1]!;
      continue;
    }
    const kv = /^([A-Za-z]+)=(.*)$/.exec(line);
    assert.ok(kv && section, `not a unit line: ${line}`);
    const k = `${section}.${kv[1]}`;
    keys.set(k, [...(keys.get(k) ?? []), kv[2]!]);
  }
  return keys;
}

/** The path of systemd-analyze, or undefined where this machine has none. */
export function systemdAnalyze(): string | undefined {
  try {
    return (
      execFileSync("bash", ["-c", "command -v systemd-analyze"], { encoding: "utf8" }).trim() || undefined
    );
  } catch {
    return undefined;
  }
}

/**
 * `systemd-analyze verify UNIT`: it exits 0 on mere warnings (an unknown key,
 * a value it ignores), so any output at all fails the check too.
 */
export function assertVerifies(analyze: string, unitPath: string): void {
  const r = spawnSync(analyze, ["verify", unitPath], { encoding: "utf8", timeout: 60_000 });
  assert.equal(r.status, 0, `systemd-analyze verify failed:\n${r.stderr}${r.stdout}`);
  assert.equal(
    `${r.stderr}${r.stdout}`.trim(),
    "",
    `systemd-analyze verify warned about ${unitPath}:\n${readFileSync(unitPath, "utf8")}`,
  );
}
