/**
 * What explains a latency tail: the slowest passes, the process's own
 * event-loop delay, and the garbage collections of a process that serves
 * prom-client's default metrics.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";

/** The garbage-collection totals of a process, from its /metrics. */
export interface GcTotals {
  minorCount: number;
  minorMs: number;
  majorCount: number;
  majorMs: number;
}

export async function gcTotals(metricsUrl: string): Promise<GcTotals | undefined> {
  try {
    const text = await (await fetch(metricsUrl)).text();
    const read = (name: string, kind: string) =>
      Number(
        new RegExp(`^nodejs_gc_duration_seconds_${name}\\{kind="${kind}"\\} (\\S+)$`, "m").exec(text)?.[1] ??
          0,
      );
    return {
      minorCount: read("count", "minor"),
      minorMs: read("sum", "minor") * 1000,
      // Incremental marking steps are part of a major collection.
      majorCount: read("count", "major"),
      majorMs: (read("sum", "major") + read("sum", "incremental")) * 1000,
    };
  } catch {
    return undefined;
  }
}

/** "N young-generation collections (X ms), M major (Y ms)" between two readings. */
export function describeGc(a: GcTotals | undefined, b: GcTotals | undefined): string {
  if (!a || !b) return "no GC figures (metrics unreachable)";
  const minor = b.minorCount - a.minorCount;
  const major = b.majorCount - a.majorCount;
  const ms = (x: number) => `${x.toFixed(0)} ms`;
  return `${minor} young-generation collections (${ms(b.minorMs - a.minorMs)}${minor > 0 ? `, ${ms((b.minorMs - a.minorMs) / minor)} each` : ""}), ${major} major (${ms(b.majorMs - a.majorMs)})`;
}

/** This process's event-loop delay over a span: a stalled benchmark process delays what it receives. */
export function watchOwnEventLoop(): { stop(): { p99Ms: number; maxMs: number } } {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  return {
    stop() {
      h.disable();
      return { p99Ms: h.percentile(99) / 1e6, maxMs: h.max / 1e6 };
    },
  };
}

/** The slowest of several passes: its worst latency and its index, and how many passes passed `overMs`. */
export function slowestPass(passes: number[][], overMs: number): { index: number; ms: number; over: number } {
  let index = 0;
  let ms = 0;
  let over = 0;
  for (const [i, lat] of passes.entries()) {
    const worst = Math.max(0, ...lat);
    if (worst > overMs) over++;
    if (worst > ms) {
      ms = worst;
      index = i;
    }
  }
  return { index, ms, over };
}
