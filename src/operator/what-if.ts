/** The log as the what-if comparison reads it (the comparison itself is the reconciler's, pure). */
import { type Log, readPasses } from "../log/index.js";
import type { WhatIfReader } from "../reconciler/index.js";

export function logWhatIfReader(log: Log, signal?: AbortSignal): WhatIfReader {
  const sig = signal ? { signal } : {};
  return {
    passes: (fromSeq, untilSeq) =>
      readPasses(log, { fromSeq, ...(untilSeq === undefined ? {} : { untilSeq }), ...sig }),
    all: (untilSeq) => log.read({ untilSeq, ...sig }),
  };
}
