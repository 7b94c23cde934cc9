/** Faults drawn from the seed (filled in by kind below). */
import type { World } from "./world.js";

export function scheduleFaults(_world: World, _untilMs: number): void {}
