/**
 * A planted nondeterminism for `check-log --redecide`'s test: the real
 * decide, whose decisions then name how many times decide ran in this
 * process, a counter no input holds. Loaded only through register.mjs.
 */
import { decide as realDecide } from "../../../src/reconciler/decide/decide.js";
import type { DecideInput, DecideOutput } from "../../../src/reconciler/decide/types.js";

let calls = 0;

export function decide(input: DecideInput): DecideOutput {
  const out = realDecide(input);
  calls++;
  for (const d of out.decisions) d.explanation = `${d.explanation} (call ${calls})`;
  return out;
}
