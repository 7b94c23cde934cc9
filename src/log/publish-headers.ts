import type { MsgHdrs } from "@nats-io/transport-node";
import { encodeUtf8 } from "../codec/index.js";
import { LogError } from "./errors.js";

const HEADER_LINE = "NATS/1.0";

/**
 * The headers of one JetStream publish (`Nats-Msg-Id`,
 * `Nats-Expected-Stream`, optionally `Nats-Expected-Last-Subject-Sequence`),
 * fixed when made and written straight to their wire form.
 *
 * Why not the client's `headers()`: it keeps a Map of arrays, looks every
 * key up again on each `set`, and builds the wire text by string
 * concatenation before a `TextEncoder` call. For the three short ASCII
 * headers of every event that was about a tenth of what the gateway
 * allocated per event (docs/PERFORMANCE.md). The client only asks a
 * publish's headers to `encode()` themselves; the bytes are the same as the
 * client's (test/log/publish-headers.test.ts compares them). Read-only: the
 * client never changes a publish's headers.
 */
export class PublishHeaders implements MsgHdrs {
  readonly #pairs: ReadonlyArray<readonly [string, string]>;
  readonly hasError = false;
  readonly status = "";
  readonly code = 0;
  readonly description = "";

  constructor(msgId: string, stream: string, lastSubjectSeq?: number) {
    const pairs: Array<readonly [string, string]> = [
      ["Nats-Msg-Id", msgId],
      ["Nats-Expected-Stream", stream],
    ];
    if (lastSubjectSeq !== undefined)
      pairs.push(["Nats-Expected-Last-Subject-Sequence", String(lastSubjectSeq)]);
    for (const [k, v] of pairs) {
      // What the client refuses too: a value that would end the header block early.
      if (/[\r\n]/.test(v) || v.trim() !== v || v === "") {
        throw new LogError("invalid-argument", `header ${k}: ${JSON.stringify(v)} is not a valid value`);
      }
    }
    this.#pairs = pairs;
  }

  /** The wire form: `NATS/1.0\r\n` then `Key: value\r\n` per header, then an empty line. */
  encode(): Uint8Array {
    return encodeUtf8(this.toString());
  }

  toString(): string {
    let text = HEADER_LINE;
    for (const [k, v] of this.#pairs) text += `\r\n${k}: ${v}`;
    return `${text}\r\n\r\n`;
  }

  get(k: string): string {
    return this.#pairs.find(([key]) => key === k)?.[1] ?? "";
  }

  last(k: string): string {
    return this.get(k);
  }

  has(k: string): boolean {
    return this.#pairs.some(([key]) => key === k);
  }

  keys(): string[] {
    return this.#pairs.map(([k]) => k);
  }

  values(k: string): string[] {
    return this.#pairs.filter(([key]) => key === k).map(([, v]) => v);
  }

  set(): void {
    throw new TypeError("the headers of a publish are read-only");
  }

  append(): void {
    throw new TypeError("the headers of a publish are read-only");
  }

  delete(): void {
    throw new TypeError("the headers of a publish are read-only");
  }

  *[Symbol.iterator](): Iterator<[string, string[]]> {
    for (const [k, v] of this.#pairs) yield [k, [v]];
  }
}
