/** Waits until `cond` holds, polling, or fails after `timeoutMs` naming what it waited for. */
export async function eventually(
  cond: () => boolean | Promise<boolean>,
  opts: { what: string; timeoutMs?: number; everyMs?: number },
): Promise<void> {
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  let last: unknown;
  for (;;) {
    try {
      if (await cond()) return;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${opts.timeoutMs ?? 30_000} ms waiting for ${opts.what}${last ? `: ${String(last)}` : ""}`,
      );
    }
    await new Promise((r) => setTimeout(r, opts.everyMs ?? 50));
  }
}
