/**
 * Gateway loss: a gateway the log believes alive (running or draining) whose
 * lease is gone died without a word. Its sessions count as closed from now;
 * their nodes then go through two-stage expiry like any disconnected node.
 */
import { decision, sortedValues } from "./messages.js";
import type { Pass } from "./pass.js";

export function expireLostGateways(pass: Pass): void {
  for (const g of sortedValues(pass.work.inventory.gateways)) {
    if (g.status !== "running" && g.status !== "draining") continue;
    if (pass.liveGateways.has(g.gatewayId)) continue;
    const sessions = pass.work.inventory.nodes
      .sortedValues()
      .filter((n) => n.session?.gatewayId === g.gatewayId)
      .map((n) => ({ nodeId: n.nodeId, sessionId: n.session?.sessionId ?? "" }));
    const explanation =
      `gateway ${g.gatewayId} lost its lease while ${g.status}; ` +
      (sessions.length === 0
        ? "it held no sessions"
        : `${sessions.length} session(s) count as closed: ${sessions.map((s) => s.nodeId).join(", ")}`);
    pass.add({
      decisions: [
        decision(explanation, { case: "sessionsExpired", value: { gatewayId: g.gatewayId, sessions } }),
      ],
      commands: [],
    });
  }
}
