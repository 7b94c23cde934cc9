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
   * A node's subject, validated once: a gateway appends one event per agent
   * message to it, and validating and building it each time is a visible
   * share of the gateway's CPU per event.
   */
  readonly #nodeSubjects = new Map<string, string>();

  constructor(readonly prefix: string = DEFAULT_PREFIX) {}

  /** Every event: the stream's subject filter. */
  get all(): string {
    return `${this.prefix}.>`;
  }
  session(nodeId: string): string {
    return `${this.prefix}.session.${nodeIdToken(nodeId)}`;
  }
  get sessions(): string {
    return `${this.prefix}.session.*`;
  }
  node(nodeId: string): string {
    let subject = this.#nodeSubjects.get(nodeId);
    if (subject === undefined) {
      subject = `${this.prefix}.node.${nodeIdToken(nodeId)}`;
      if (this.#nodeSubjects.size >= NODE_SUBJECTS_KEPT) this.#nodeSubjects.clear();
      this.#nodeSubjects.set(nodeId, subject);
    }
    return subject;
  }
  gateway(gatewayId: string): string {
    return `${this.prefix}.gateway.${token(gatewayId)}`;
  }
  get gateways(): string {
    return `${this.prefix}.gateway.*`;
  }
  get catalog(): string {
    return `${this.prefix}.catalog`;
  }
  operator(nodeId: string): string {
    return `${this.prefix}.operator.${nodeIdToken(nodeId)}`;
  }
  /**
   * Rollout intent (pause, resume) of every model. An operator subject, so
   * only the API writes it; no node's token starts with `_`.
   */
  get rollouts(): string {
    return `${this.prefix}.operator._rollouts`;
  }
  get reconciler(): string {
    return `${this.prefix}.reconciler`;
  }
}

function token(id: string): string {
  const why = invalidIdReason(id);
  if (why) throw new RangeError(`cannot build a subject: ${why}`);
  return id;
}
