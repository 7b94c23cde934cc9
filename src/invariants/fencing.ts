/**
 * Invariant 4, at most one pass per log position: every pass decided on a
 * state that had folded the pass before it. Passes are appended with
 * `expect last subject sequence`, so a leader whose view was behind the last
 * pass is refused; a pass that observed less than the previous pass means
 * two leaders acted from one position.
 */
import type { CheckedEvent, Violation } from "./types.js";

export class FencingRule {
  #previousPass = 0;
  readonly violations: Violation[] = [];

  observe(r: CheckedEvent): void {
    const body = r.event.body;
    if (body.case !== "reconcilePass") return;
    const p = body.value;
    const observed = Number(p.observedSeq);
    if (observed < this.#previousPass) {
      this.violations.push({
        rule: "fencing",
        seq: r.seq,
        message: `pass at ${r.seq} by ${p.leaderId} decided on the log up to ${observed}, before the previous pass at ${this.#previousPass}: two passes from one log position`,
      });
    } else if (observed >= r.seq) {
      this.violations.push({
        rule: "fencing",
        seq: r.seq,
        message: `pass at ${r.seq} by ${p.leaderId} claims to have observed ${observed}, at or after its own position`,
      });
    }
    this.#previousPass = r.seq;
  }
}
