/**
 * The subject layout of the log (docs/ARCHITECTURE.md, "The log"). One writer family per subject.
 * Ids that become subject tokens are validated first: a wildcard or a space
 * in an id must never create a new subject. Node ids are DNS names and go in
 * encoded (node-id.ts), so their dots never become subject levels.
 */
import { invalidIdReason, nodeIdToken } from "../ids/index.js";

export const DEFAULT_STREAM = "LLMGW";
export const DEFAULT_PREFIX = "llmgw.evt";

/** Node subjects kept by one Subjects; past this many it starts over (ids are the fleet's, but not trusted). */
const NODE_SUBJECTS_KEPT = 65_536;

/** Subjects for one stream prefix. */
export class Subjects {
  /**
   * A node's subjects (node, session, operator), each validated and built
   * once: a gateway appends one event per agent message to one, and a read
   * checks every event against the one its kind belongs on; validating and
   * building it each time is a visible share of either's CPU per event.
   */
  readonly #nodeSubjects = new Map<string, string>();
  readonly #sessionSubjects = new Map<string, string>();
  readonly #operatorSubjects = new Map<string, string>();
  /** The subjects that name no id and the heads of the node subjects, built once for the same reason. */
  readonly #fixed: {
    catalog: string;
    rollouts: string;
    reconciler: string;
    node: string;
    session: string;
    operator: string;
  };

  constructor(readonly prefix: string = DEFAULT_PREFIX) {
    this.#fixed = {
      catalog: `${prefix}.catalog`,
      rollouts: `${prefix}.operator._rollouts`,
      reconciler: `${prefix}.reconciler`,
      // The heads of the node subjects, a token to follow.
      node: `${prefix}.node.`,
      session: `${prefix}.session.`,
      operator: `${prefix}.operator.`,
    };
  }

  /** Every event: the stream's subject filter. */
  get all(): string {
    return `${this.prefix}.>`;
  }
  session(nodeId: string): string {
    return nodeSubject(this.#sessionSubjects, this.#fixed.session, nodeId);
  }
  get sessions(): string {
    return `${this.prefix}.session.*`;
  }
  node(nodeId: string): string {
    return nodeSubject(this.#nodeSubjects, this.#fixed.node, nodeId);
  }
  gateway(gatewayId: string): string {
    return `${this.prefix}.gateway.${token(gatewayId)}`;
  }
  get gateways(): string {
    return `${this.prefix}.gateway.*`;
  }
  get catalog(): string {
    return this.#fixed.catalog;
  }
  operator(nodeId: string): string {
    return nodeSubject(this.#operatorSubjects, this.#fixed.operator, nodeId);
  }
  /**
   * Rollout intent (pause, resume) of every model. An operator subject, so
   * only the API writes it; no node's token starts with `_`.
   */
  get rollouts(): string {
    return this.#fixed.rollouts;
  }
  get reconciler(): string {
    return this.#fixed.reconciler;
  }
}

/** The subject `head` + the node's token, from `kept` or built (validated) and kept. */
function nodeSubject(kept: Map<string, string>, head: string, nodeId: string): string {
  let subject = kept.get(nodeId);
  if (subject === undefined) {
    subject = head + nodeIdToken(nodeId);
    if (kept.size >= NODE_SUBJECTS_KEPT) kept.clear();
    kept.set(nodeId, subject);
  }
  return subject;
}

function token(id: string): string {
  const why = invalidIdReason(id);
  if (why) throw new RangeError(`cannot build a subject: ${why}`);
  return id;
}
