/**
 * Two agents presenting one identity (a cloned machine, a certificate copied
 * to a second host): without a check, each registration supersedes the
 * other's session and the two knock each other off forever. A newcomer is
 * a duplicate when a *live* session of its node is held by *another agent
 * process*:
 *
 * - another process: the registrations' `instance_id`s differ. The same
 *   process reconnecting (its old stream looked dead from its side) carries
 *   the same id and takes over. A newcomer that sends no id (built before
 *   the id existed, or a copied certificate whose holder leaves it out) is
 *   another process than a live holder that has one: it never takes over,
 *   else leaving the id out would skip the check. Between two sessions
 *   without an id nothing tells the processes apart, so the newcomer takes
 *   over, as before the id existed;
 * - live, on this gateway: its stream is open, not closing, and its last
 *   message came within twice the longest gap between its messages so far
 *   (at least 1 s; the heartbeat timeout before it has sent two). An agent
 *   killed and restarted left a stream that ended (the kernel closed its
 *   socket) or fell silent, so the restarted one takes over;
 * - live, on another gateway: the log shows it opened and not closed. A
 *   gateway closes a stream when it ends or falls silent past the heartbeat
 *   timeout, so this is as live as that gateway knows.
 *
 * The newcomer is told to reconnect after the retry window and refused; the
 * live session keeps its stream.
 */
/** The live session a newcomer collides with. */
export interface Holder {
  where: "local" | "remote";
  sessionId: string;
  gatewayId: string;
  instanceId: string;
  remoteAddress: string;
}

/** What the check needs of a session held by this gateway. */
export interface LocalSession {
  readonly sessionId: string;
  readonly instanceId: string;
  readonly remoteAddress: string;
  readonly closing: boolean;
  /** Milliseconds since its last message. */
  readonly silentForMs: number;
  /** Longest gap between two of its messages; undefined before its second. */
  readonly longestGapMs: number | undefined;
}

/** The newest session of a node as this gateway's log follower saw it. */
export interface LoggedSession {
  sessionId: string;
  gatewayId: string;
  instanceId: string;
  remoteAddress: string;
  closed: boolean;
}

const MIN_LIVE_WINDOW_MS = 1_000;

/** Whether a local session counts as alive: it has spoken within its own rhythm. */
export function isLive(s: LocalSession, heartbeatTimeoutMs: number): boolean {
  if (s.closing || s.sessionId === "") return false;
  const window =
    s.longestGapMs === undefined
      ? heartbeatTimeoutMs
      : Math.min(heartbeatTimeoutMs, Math.max(MIN_LIVE_WINDOW_MS, 2 * s.longestGapMs));
  return s.silentForMs < window;
}

/**
 * The live session of another agent process that `instanceId` collides with,
 * if any. A holder with an id is another process than any newcomer with
 * another id, no id ("") included; a holder without one is nobody's.
 */
export function liveHolder(
  instanceId: string,
  local: readonly LocalSession[],
  logged: LoggedSession | undefined,
  ownGatewayId: string,
  heartbeatTimeoutMs: number,
): Holder | undefined {
  const other = (id: string) => id !== "" && id !== instanceId;
  for (const s of local) {
    if (other(s.instanceId) && isLive(s, heartbeatTimeoutMs)) {
      return {
        where: "local",
        sessionId: s.sessionId,
        gatewayId: ownGatewayId,
        instanceId: s.instanceId,
        remoteAddress: s.remoteAddress,
      };
    }
  }
  if (logged && !logged.closed && logged.gatewayId !== ownGatewayId && other(logged.instanceId)) {
    return { where: "remote", ...logged };
  }
  return undefined;
}

/**
 * At most one DuplicateIdentity event (and one warning) per node and retry
 * window: a duplicate that ignores retry_after must not write the log at the
 * pace of its reconnects. Every refusal is counted in the metric all the same.
 */
export class DuplicateReports {
  readonly #last = new Map<string, { atMs: number; attempts: number }>();

  constructor(private readonly windowMs: number) {}

  /** Counts one refusal of `nodeId`; returns the attempts to report, or undefined to stay quiet. */
  refused(nodeId: string, nowMs: number): number | undefined {
    const prev = this.#last.get(nodeId);
    if (prev && nowMs - prev.atMs < this.windowMs) {
      prev.attempts++;
      return undefined;
    }
    const attempts = (prev?.attempts ?? 0) + 1;
    this.#last.set(nodeId, { atMs: nowMs, attempts: 0 });
    if (this.#last.size > 10_000) this.#forgetOlderThan(nowMs - this.windowMs);
    return attempts;
  }

  #forgetOlderThan(ms: number): void {
    for (const [k, v] of this.#last) if (v.atMs < ms) this.#last.delete(k);
  }
}
