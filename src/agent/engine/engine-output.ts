/**
 * An engine's output as `llmgw logs` reads it, whatever keeps it: a log
 * file under the agent's state directory (log-files.ts), or an engine the
 * agent simulates in process. A position is the reader's cursor, opaque to
 * the caller: what `tail` or `readFrom` returned is handed back next time.
 */
export interface EngineOutput {
  /** The last `lines` lines (at most `maxBytes`, whole lines where they fit), and where what follows starts. */
  tail(lines: number, maxBytes: number): Promise<OutputRead>;
  /**
   * What was printed from `position` on (at most `maxBytes`), and the
   * position after it. Output dropped meanwhile (a rotation) is skipped.
   */
  readFrom(position: number, maxBytes: number): Promise<OutputRead>;
}

export interface OutputRead {
  data: Uint8Array;
  position: number;
}

/** The engines' output by shard: undefined when this node has none for the shard (never ran it, or deleted it). */
export interface EngineOutputSource {
  output(shardId: string): EngineOutput | undefined;
}
