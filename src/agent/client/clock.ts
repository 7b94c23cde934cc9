/**
 * The agent's time, timers and ids, as a port: the real agent runs on the
 * process's clock (`SYSTEM_CLOCK`); `llmgw simulate` hands in its seeded
 * scheduler, so the very same agent code runs on simulated time with ids
 * drawn from the seed (src/simulation).
 */
import { randomUUID } from "node:crypto";

/** A timer's handle, given back to clear it. */
export type TimerHandle = { readonly __timer: unique symbol } | object;

export interface AgentClock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(t: TimerHandle | undefined): void;
  setInterval(fn: () => void, ms: number): TimerHandle;
  clearInterval(t: TimerHandle | undefined): void;
  /** A fresh unique id (a process instance id). */
  newId(): string;
}

export const SYSTEM_CLOCK: AgentClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (t) => clearTimeout(t as NodeJS.Timeout | undefined),
  setInterval: (fn, ms) => setInterval(fn, ms),
  clearInterval: (t) => clearInterval(t as NodeJS.Timeout | undefined),
  newId: () => randomUUID(),
};
