import type { DecideInput, DecideOutput } from "./types.js";

export function decide(_input: DecideInput): DecideOutput {
  return { decisions: [], commands: [], truncated: false, nextDeadlineMs: null };
}
