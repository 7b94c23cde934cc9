/** The agent config's `engineLogs` section: how engines' output files are rotated and how long a removed shard's are kept. */
import { z } from "zod";

export const engineLogsSchema = z
  .strictObject({
    /** A shard's log is rotated once it is larger than this (bytes; default 10 MiB). */
    maxFileBytes: z
      .number()
      .int()
      .min(4096)
      .max(2 ** 40)
      .default(10 * 1024 * 1024),
    /** Rotated files kept per shard (`<shard>.log.1` newest); 0 keeps none (default 3). */
    keepFiles: z.number().int().min(0).max(100).default(3),
    /** How often the logs' sizes are checked (default 1 s); an engine may write past the cap for this long. */
    checkIntervalMs: z.number().int().min(50).max(600_000).default(1000),
    /** The logs of a shard this node no longer runs are deleted this long after their last write (default 24 h). */
    removedRetentionMs: z
      .number()
      .int()
      .min(0)
      .max(365 * 86_400_000)
      .default(86_400_000),
  })
  .prefault({});

export type EngineLogsConfig = z.output<typeof engineLogsSchema>;

/** Defaults, for code that has no config file (tests, the simulator). */
export const DEFAULT_ENGINE_LOGS: EngineLogsConfig = engineLogsSchema.parse(undefined);
