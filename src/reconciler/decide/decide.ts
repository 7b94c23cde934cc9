/**
 * One reconcile pass: a pure function of the projected fleet, the config,
 * the time and the live gateways. Rules run in a fixed priority order; when
 * the pass is full, what is left waits for the next pass:
 *   1. gateway loss        4. failures, cooldowns    7. GPU faults
 *   2. node expiry         5. command re-issues      8. scale
 *   3. adoption            6. drains                 9. placement
 * Scale and placement wait until every connected node's registration has
 * been handled (adoption may claim replicas they would otherwise create or
 * place twice).
 */
import { adoptSessions } from "./adoption.js";
import { reissueCommands } from "./commands.js";
import { nextDeadline } from "./deadline.js";
import { handleDrains } from "./drains.js";
import { failIncomplete, handleFailures } from "./failures.js";
import { expireLostGateways } from "./gateways.js";
import { moveOffFaultyGpus } from "./gpu-faults.js";
import { expireNodes } from "./liveness.js";
import { Pass } from "./pass.js";
import { placePending } from "./placing.js";
import { scaleModels } from "./scale.js";
import type { DecideInput, DecideOutput } from "./types.js";

export function decide(input: DecideInput): DecideOutput {
  const pass = new Pass(input);
  expireLostGateways(pass);
  expireNodes(pass);
  adoptSessions(pass);
  handleFailures(pass);
  const adopting = pass.unadopted.size > 0;
  if (!adopting) failIncomplete(pass);
  reissueCommands(pass);
  handleDrains(pass);
  moveOffFaultyGpus(pass);
  if (!adopting) {
    scaleModels(pass);
    placePending(pass);
  }
  return {
    decisions: pass.decisions,
    commands: pass.commands,
    truncated: pass.truncated,
    nextDeadlineMs: nextDeadline(pass.work, input.config, input.nowMs),
  };
}
