/**
 * No two leaders' passes both accepted: once a pass of lease revision R
 * is in the log, a pass of an older revision landing before the next pass
 * of revision R or newer is a stale leader's, accepted while the newer
 * lease was in force on both sides of it.
 *
 * A pass records the revision of its leader's last write of the lease key
 * (src/reconciler/runner/lease.ts). The key's revisions are its bucket's
 * stream sequences, so they only grow, across renewals and across leaders,
 * for as long as the bucket lives; and a stale leader cannot renew (the key
 * moved past its revision), so all its passes carry one revision.
 *
 * A log that continues on a new lease bucket (a restore into another
 * server, another `--lease-bucket`) starts the revisions again: its first
 * passes are older than the last ones before, but the newer lease never
 * acts again, and the new lease's revisions climb (a renewal): a pass of
 * a pass of the same leader at a revision above the lowered one and below
 * R ends the suspicion (a renewal is always its holder's, so two stale
 * leaders of different revisions do not pass for one). Only a new bucket
 * whose next pass after the first jumps straight past R would read as an
 * interleaving. A stale pass is reported once a pass of the newer lease
 * follows it: one at the very end of a log cannot be told from a new
 * bucket's first.
 */
import type { CheckedEvent, Violation } from "./types.js";

interface Suspect {
  seq: number;
  leaderId: string;
  revision: number;
}

export class LeaseOrderRule {
  readonly violations: Violation[] = [];
  /** The newest revision a pass recorded, and that pass. */
  #newest: { revision: number; seq: number; leaderId: string } | undefined;
  /** Passes of an older revision since the last pass of `#newest`'s revision or newer. */
  #suspects: Suspect[] = [];

  observe(r: CheckedEvent): void {
    const body = r.event.body;
    if (body.case !== "reconcilePass") return;
    const revision = Number(body.value.leaseRevision);
    const leaderId = body.value.leaderId;
    const newest = this.#newest;
    if (newest === undefined || revision >= newest.revision) {
      for (const s of this.#suspects) {
        this.violations.push({
          rule: "stale-leader-pass",
          seq: s.seq,
          message: `pass at ${s.seq} by ${s.leaderId} holds lease revision ${s.revision}, but the passes at ${newest?.seq} by ${newest?.leaderId} (revision ${newest?.revision}) and at ${r.seq} by ${leaderId} (revision ${revision}) surround it: two leaders' passes both accepted`,
        });
      }
      this.#suspects = [];
      this.#newest = { revision, seq: r.seq, leaderId };
      return;
    }
    const last = this.#suspects.at(-1);
    if (last !== undefined && revision > last.revision && leaderId === last.leaderId) {
      // The lowered lease renewed (a renewal is its holder's): a new lease bucket, whose revisions start again.
      this.#suspects = [];
      this.#newest = { revision, seq: r.seq, leaderId };
      return;
    }
    this.#suspects.push({ seq: r.seq, leaderId, revision });
  }
}
