/**
 * Where the golden log of each fleet-schema version and its expected replay
 * by the current code are kept (recorded by record-schema-golden-logs.ts).
 */
import { join } from "node:path";
import { FIXTURES } from "./golden-log.js";

export const SCHEMA_GOLDEN_DIR = join(FIXTURES, "golden-logs");

export function schemaGoldenLog(schema: number): string {
  return join(SCHEMA_GOLDEN_DIR, `fleet-schema-${schema}.bin`);
}

export function schemaGoldenReplay(schema: number): string {
  return join(SCHEMA_GOLDEN_DIR, `fleet-schema-${schema}.replay.json`);
}
