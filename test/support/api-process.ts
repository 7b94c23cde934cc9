/**
 * `llmgw api` as a real child process over a real nats-server, with a
 * tokens file of a viewer, an operator and an admin: what the operator
 * CLI tests talk to through HTTP, as an operator's machine would.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tokenSha256 } from "../../src/operator/index.js";
import { tempDir } from "../harness/nats.js";
import { type Child, spawnLlmgw } from "../harness/proc.js";

export const VIEWER_TOKEN = "viewer-token-7d1e5a9c3b";
export const OPERATOR_TOKEN = "operator-token-2c8f6b0e4a";
export const ADMIN_TOKEN = "admin-token-9a4c2e7f1b";

export interface ApiProcess {
  readonly url: string;
  readonly child: Child;
  stop(): Promise<void>;
}

export async function startApiProcess(o: {
  nats: string;
  stream: string;
  prefix: string;
}): Promise<ApiProcess> {
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
  const child = spawnLlmgw(
    ["api", "--listen", "127.0.0.1:0", "--nats", o.nats, "--stream", o.stream, "--subject-prefix", o.prefix],
    { LLMGW_LOG_LEVEL: "info", LLMGW_API_TOKENS: tokens },
  );
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
