/**
 * One reconcile pass: a pure function of the projected fleet, the config,
 * the time and the live gateways. Rules run in a fixed priority order; when
 * the pass is full, what is left waits for the next pass:
 *   1. gateway loss        4. failures (faults the fold recorded),
 *   2. node expiry            start and ready deadlines, cooldowns
 *   3. adoption            5. undeliverable commands   8. GPU faults
 *                          6. command re-issues        9. rollouts
 *                          7. drains                  10. autoscale, then scale
 *                                                    11. placement
 * Then, outside the limit, the routing table is restated for every model
 * whose ready replicas this pass (or earlier facts) changed.
 * Scale and placement wait until every connected node's registration has
 * been handled (adoption may claim replicas they would otherwise create or
 * place twice).
 */
import { adoptSessions } from "./adoption.js";
import { autoscaleModels } from "./autoscale.js";
import { reissueCommands } from "./commands.js";
import { nextDeadline } from "./deadline.js";
import { handleDrains } from "./drains.js";
import { publishEndpoints } from "./endpoints.js";
import { failIncomplete, handleFailures, startCooldowns } from "./failures.js";
import { expireLostGateways } from "./gateways.js";
import { moveOffFaultyGpus } from "./gpu-faults.js";
import { expireNodes } from "./liveness.js";
import { Pass } from "./pass.js";
import { placePending } from "./placing.js";
import { rollModels } from "./rollouts.js";
import { scaleModels } from "./scale.js";
import { enforceStartDeadlines } from "./start-deadlines.js";
import type { DecideInput, DecideOutput } from "./types.js";
import { handleUndeliverable } from "./undeliverable.js";

export function decide(input: DecideInput): DecideOutput {
  const pass = new Pass(input);
  try {
    return run(pass, input);
  } finally {
    pass.end();
  }
}

function run(pass: Pass, input: DecideInput): DecideOutput {
  expireLostGateways(pass);
  expireNodes(pass);
  adoptSessions(pass);
  handleFailures(pass);
  enforceStartDeadlines(pass);
  startCooldowns(pass);
  const adopting = pass.unadopted.size > 0;
  if (!adopting) failIncomplete(pass);
  handleUndeliverable(pass);
  reissueCommands(pass);
  handleDrains(pass); // node drains honour each model's disruption budget (budgets.ts)
  moveOffFaultyGpus(pass); // GPU-fault moves honour it too, after the drains of the same pass
  if (!adopting) {
    // Rollouts before scale: a replacement counts for its old replica's slot.
    rollModels(pass);
    autoscaleModels(pass); // autoscale: load moves a model's desired count, before scale acts on it
    scaleModels(pass);
    placePending(pass);
  }
  publishEndpoints(pass);
  return {
    decisions: pass.decisions,
    commands: pass.commands,
    truncated: pass.truncated,
    nextDeadlineMs: nextDeadline(pass.work, input.config, input.nowMs),
  };
}
