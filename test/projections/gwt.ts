/**
 * given(events) → when(event) → then(state): the shape of the fold tests.
 * Stream sequences are 1, 2, 3, ... and stream times T0 + seq seconds, so a
 * test can name the sequence and time an event was folded at.
 */
import type { Event } from "../../src/gen/llmgw/v1/events_pb.js";
import { cloneFleet, evolveFleet, type FleetState, initialFleet } from "../../src/projections/index.js";

export const T0 = 1_790_000_000_000;
export const timeOf = (seq: number) => T0 + seq * 1000;

export interface Scenario {
  /** The state after the given events (a copy: `when` does not change it). */
  before: FleetState;
  /** The state after the given events and then the `when` events. */
  after: FleetState;
  /** Sequence of the first `when` event. */
  whenSeq: number;
}

export function given(...history: Event[]) {
  return {
    when(...events: Event[]): Scenario {
      let s = initialFleet();
      let seq = 0;
      for (const e of history) s = evolveFleet(s, e, { seq: ++seq, timeMs: timeOf(seq) });
      const before = cloneFleet(s);
      const whenSeq = seq + 1;
      for (const e of events) s = evolveFleet(s, e, { seq: ++seq, timeMs: timeOf(seq) });
      return { before, after: s, whenSeq };
    },
  };
}
