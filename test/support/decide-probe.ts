/**
 * Whether the real `decide` places anything yet: one node, one catalog
 * model, one live gateway. Tests that need placements skip, saying why,
 * while decide has no placement rules.
 */
import { evolveFleet, foldFleet } from "../../src/projections/index.js";
import { DEFAULT_RECONCILER_CONFIG, decide } from "../../src/reconciler/decide/index.js";
import { EventFactory, h100Node, llamaCatalog } from "./fleet-events.js";

export function decidePlaces(): boolean {
  const f = new EventFactory("probe");
  const now = Date.now();
  const events = [
    f.gatewayStarted("gw-1"),
    f.catalog(llamaCatalog(1, 0)),
    f.sessionOpened("gpu-a1", "s-1", "gw-1", h100Node("gpu-a1")),
  ];
  let seq = 0;
  const state = foldFleet(events.map((event) => ({ event, seq: ++seq, timeMs: now })));
  try {
    // A registration is adopted before anything is placed on the node: give decide a few passes.
    for (let round = 0; round < 3; round++) {
      const out = decide({
        state,
        config: DEFAULT_RECONCILER_CONFIG,
        nowMs: now,
        liveGateways: new Set(["gw-1"]),
      });
      if (out.commands.some((c) => c.action.case === "start")) return true;
      if (out.decisions.length === 0) return false;
      evolveFleet(state, f.pass(out.decisions, out.commands, seq), { seq: ++seq, timeMs: now });
    }
  } catch {
    return false;
  }
  return false;
}

export const DECIDE_NOT_READY =
  "decide places nothing yet (its rules are still being built on the reconciler branch)";
