/** Ids drawn from the seed: a run makes no randomness of its own. */
import type { Rng } from "../sim/rng.js";

/** A uuid-shaped id from `rng` (32 hex digits). */
export function seededId(rng: Rng): string {
  let hex = "";
  for (let i = 0; i < 4; i++)
    hex += Math.floor(rng() * 0x1_0000_0000)
      .toString(16)
      .padStart(8, "0");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
