/**
 * The GPU problem occurrences already reported, kept in the agent's state
 * directory (`gpu-problems.json`, mode 0600) so an agent restart does not
 * report them again. A file that cannot be read is a warning and an empty
 * ledger: at worst a problem is reported once more.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { ProblemLedgerData, ProblemLedgerStore } from "./hardware-watch.js";

const ledgerSchema = z.object({
  levels: z.record(z.string(), z.number()),
  events: z.array(z.string()),
});

export function fileProblemLedger(
  stateDir: string,
  warn: (obj: object, msg: string) => void,
): ProblemLedgerStore {
  const path = join(stateDir, "gpu-problems.json");
  return {
    load() {
      let text: string;
      try {
        text = readFileSync(path, "utf8");
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT")
          warn({ path, err: String(err) }, "cannot read the reported GPU problems: all are reported again");
        return undefined;
      }
      try {
        return ledgerSchema.parse(JSON.parse(text));
      } catch (err) {
        warn({ path, err: String(err) }, "the reported GPU problems file is damaged: all are reported again");
        return undefined;
      }
    },
    save(data: ProblemLedgerData) {
      try {
        mkdirSync(stateDir, { recursive: true, mode: 0o700 });
        writeFileSync(`${path}.tmp`, JSON.stringify(data), { mode: 0o600 });
        renameSync(`${path}.tmp`, path);
      } catch (err) {
        warn(
          { path, err: String(err) },
          "cannot keep the reported GPU problems: a restart reports them again",
        );
      }
    },
  };
}
