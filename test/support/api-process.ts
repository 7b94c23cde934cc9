/**
 * `llmgw api` as a real child process over a real nats-server: `spawnApi`
 * for the tests that run it with NATS role credentials in development mode;
 * `startApiProcess` with a tokens file of a viewer, an operator and an
 * admin, what the operator CLI tests talk to through HTTP, as an
 * operator's machine would.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tokenSha256 } from "../../src/operator/index.js";
import { tempDir } from "../harness/nats.js";
import { type Child, spawnLlmgw } from "../harness/proc.js";
import { LLMGW_BIN, logFlags } from "./cli.js";
import { eventually } from "./eventually.js";

export interface ApiProcess {
  proc: ChildProcess;
  url: string;
  output(): string;
}

/** `llmgw api --dev` on a port it picks; resolves with its URL once it serves. */
export async function spawnApi(args: string[]): Promise<ApiProcess> {
  const proc = spawn(process.execPath, [LLMGW_BIN, "api", "--dev", "--listen", "127.0.0.1:0", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  proc.stdout?.on("data", (b) => (out += b));
  proc.stderr?.on("data", (b) => (out += b));
  let url = "";
  try {
    await eventually(
      () => {
        url = /operator API listening on (http:\/\/[^\s"]+)/.exec(out)?.[1] ?? "";
        if (proc.exitCode !== null) throw new Error(`llmgw api exited with ${proc.exitCode}`);
        return url !== "";
      },
      { what: "llmgw api to listen", timeoutMs: 30_000 },
    );
  } catch (err) {
    proc.kill("SIGKILL");
    throw new Error(`${(err as Error).message}:\n${out}`, { cause: err });
  }
  return { proc, url, output: () => out };
}

export const VIEWER_TOKEN = "viewer-token-7d1e5a9c3bQx2Lm8Rt4Wz6Hy0Pk";
export const OPERATOR_TOKEN = "operator-token-2c8f6b0e4aJd5Nv9Bs3Fg7Uc";
export const ADMIN_TOKEN = "admin-token-9a4c2e7f1bMw6Ye0Tq4Ra8Zx2Kp";

export interface TokenedApiProcess {
  readonly url: string;
  readonly child: Child;
  stop(): Promise<void>;
}

export async function startApiProcess(o: {
  nats: string;
  stream: string;
  prefix: string;
}): Promise<TokenedApiProcess> {
  const dir = tempDir("api-tokens");
  const tokens = join(dir, "tokens.yaml");
  writeFileSync(
    tokens,
    [
      ["ci-viewer", "viewer", VIEWER_TOKEN],
      ["alice", "operator", OPERATOR_TOKEN],
      ["root-ops", "admin", ADMIN_TOKEN],
    ]
      .map(([name, role, t]) => `- {name: ${name}, role: ${role}, sha256: "${tokenSha256(t ?? "")}"}\n`)
      .join(""),
  );
  const child = spawnLlmgw(["api", "--listen", "127.0.0.1:0", ...logFlags(o.nats, o.stream, o.prefix)], {
    LLMGW_LOG_LEVEL: "info",
    LLMGW_API_TOKENS: tokens,
  });
  try {
    const line = await child.waitForLine(/operator API listening/);
    const url = /"url":"(http:\/\/[^"]+)"/.exec(line)?.[1];
    if (!url) throw new Error(`no URL in ${line}`);
    return { url, child, stop: () => child.stop() };
  } catch (err) {
    await child.stop();
    throw err;
  }
}
