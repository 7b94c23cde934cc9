/**
 * Planted bugs for the simulation's test: each a patch to a copy of src/
 * (the tree under test is never changed), whose simulation must find it.
 * `plantedCopy` writes the copy and says whether the patch applied (a patch
 * that no longer applies is a failure of the test, not a silent pass).
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface PlantedBug {
  name: string;
  file: string;
  /** Text replaced in `file`, each `from` once, in order. */
  patches: Array<{ from: string; to: string }>;
  /** The simulation options under which the test asserts it is found, and within how many seeds. */
  run: { minutes: number; nodes: number; faults: string[]; convergeMinutes?: number; seeds: number };
}

export const PLANTED_BUGS: PlantedBug[] = [
  {
    name: "fencing removed from the log's append path",
    file: "src/log/append.ts",
    patches: [
      {
        from: "{ stream: this.stream, lastSubjectSeq: opts.expectLastSubjectSeq }",
        to: "{ stream: this.stream, lastSubjectSeq: undefined }",
      },
    ],
    // Leader losses fence only while there are passes to make: agent restarts keep the reconciler busy.
    run: { minutes: 40, nodes: 10, faults: ["leader-loss", "agent-crash"], convergeMinutes: 10, seeds: 12 },
  },
  {
    name: "make-before-break removed from drains",
    file: "src/reconciler/decide/drains.ts",
    patches: [{ from: "    if (budget?.stated === undefined && !nextReady) return undefined;\n", to: "" }],
    run: { minutes: 60, nodes: 20, faults: ["operator"], convergeMinutes: 10, seeds: 12 },
  },
  {
    name: "the disruption budget ignored by rollouts",
    file: "src/reconciler/decide/rollouts.ts",
    patches: [
      {
        from: "return Math.min(policy, disruptionBudget(pass, model.name).allowed);",
        // Every ready replica may go: neither the budget nor the rollout's maxUnavailable holds.
        to: "return rolling?.ready ?? 0;",
      },
    ],
    run: { minutes: 40, nodes: 10, faults: ["operator"], convergeMinutes: 10, seeds: 12 },
  },
  {
    name: "adoption skipped for one node",
    file: "src/reconciler/decide/adoption.ts",
    patches: [
      {
        from: "if (session?.adoptionSeq !== 0 || session === null) continue;",
        to: 'if (session?.adoptionSeq !== 0 || session === null || id === "node-0000") continue;',
      },
    ],
    run: { minutes: 40, nodes: 10, faults: ["agent-crash"], convergeMinutes: 10, seeds: 12 },
  },
  {
    // In the pure session core, which the gateway's shell (src/gateway/session.ts) and the
    // simulated gateway both run: an agent message is acknowledged at once, when its event is
    // drafted, instead of once the log stored it. The real gateway acks unstored messages the same.
    name: "a gateway that acks before the log stores",
    file: "src/gateway/session-core/messages.ts",
    patches: [
      {
        from: 'import { closeNow, NONE, nothing } from "./result.js";\n',
        to: 'import { closeNow, NONE, nothing } from "./result.js";\nimport { ack } from "./replies.js";\n',
      },
      {
        from: "    events: [{ id: sessionEventId(state.sessionId, seq), body, ackId: acked ? String(seq) : undefined }],\n    replies: NONE,\n",
        to: '    events: [{ id: sessionEventId(state.sessionId, seq), body, ackId: undefined }],\n    replies: acked ? [{ kind: "ack", message: ack(String(seq)) }] : NONE,\n',
      },
    ],
    // What is acked early is lost only if the log never takes it (retries store the rest): an outage
    // past the gateway's limit closes the sessions waiting on it. Restarts and operator moves keep
    // the agents talking.
    run: {
      minutes: 40,
      nodes: 10,
      faults: ["log", "agent-crash", "operator"],
      convergeMinutes: 10,
      seeds: 12,
    },
  },
];

/** A copy of `root`'s src with `bug` planted; `applied` false when a patch found nothing to replace. */
export function plantedCopy(
  root: string,
  bug: PlantedBug,
): { dir: string; applied: boolean; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-planted-"));
  cpSync(join(root, "src"), join(dir, "src"), { recursive: true });
  for (const f of ["package.json", "tsconfig.json"]) cpSync(join(root, f), join(dir, f));
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir");
  const path = join(dir, bug.file);
  let text = readFileSync(path, "utf8");
  let applied = true;
  for (const p of bug.patches) {
    applied &&= text.includes(p.from);
    text = text.replace(p.from, p.to);
  }
  writeFileSync(path, text);
  return { dir, applied, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
