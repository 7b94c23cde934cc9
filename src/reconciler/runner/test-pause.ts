/**
 * A test-only pause point between deciding a pass and appending it.
 *
 * With `LLMGW_TEST_PAUSE_BEFORE_APPEND=<file>` in its environment, a runner
 * that has decided a pass (and checked its lease) waits, before the append,
 * until `<file>` exists. A test can thus hold a real leader process exactly
 * where only the log's fencing stands between it and a stale append
 * (docs/reconciler-runner.md, "Fencing by the log"). Unset, it costs one
 * environment lookup per append.
 */
import { access } from "node:fs/promises";
import type { Logger } from "pino";

export const TEST_PAUSE_ENV = "LLMGW_TEST_PAUSE_BEFORE_APPEND";

const POLL_MS = 50;

export async function testPauseBeforeAppend(logger: Logger): Promise<void> {
  const file = process.env[TEST_PAUSE_ENV];
  if (!file) return;
  let logged = false;
  while (!(await exists(file))) {
    if (!logged) {
      logger.warn({ file }, "test pause: holding a decided pass before its append until the file exists");
      logged = true;
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await access(file);
    return true;
  } catch {
    return false;
  }
}
