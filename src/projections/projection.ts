import type { Event } from "../gen/llmgw/v1/events_pb.js";

/** Where an event sits in the log: what a fold may know besides the event itself. */
export interface EventMeta {
  /** Stream sequence. */
  seq: number;
  /**
   * The stream's time for the message (ms since the epoch). Folds use this,
   * not the writer's clock in the envelope, so replay is exact.
   */
  timeMs: number;
}

/**
 * A projection: a pure fold of the log. No I/O, no clock, no randomness.
 *
 * `evolve` may update the state it is given in place and returns it: folding
 * a million events must not copy the fleet a million times. The state
 * serializes to JSON and back without loss: `revive` makes a state again
 * from its parsed JSON (a snapshot), and a copy is `revive` of the state's
 * JSON form.
 */
export interface Projection<S> {
  /** Short name, used in snapshot keys. */
  readonly name: string;
  /**
   * Bumped whenever the shape or the meaning of the state changes. A snapshot
   * of another version is ignored (refolded from the log), never misread.
   */
  readonly schemaVersion: number;
  initialState(): S;
  evolve(state: S, event: Event, meta: EventMeta): S;
  /** The state whose JSON form is `json` (parsed): a snapshot loaded. */
  revive(json: unknown): S;
}
