import type { Http2ServerRequest } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import type { CallbackIterator } from "../../async/read-into.js";
import { compileDecoder } from "../../codec/index.js";
import { type AgentMessage, AgentMessageSchema } from "../../gen/llmgw/v1/agent_pb.js";
import { COMPRESSED_FLAG, EnvelopeReader } from "./envelopes.js";
import { type AgentCallProtocol, skipsEnvelope } from "./protocol.js";

/**
 * The log's decoder planned for agent messages: what `fromBinary` returns,
 * and what it throws (it hands anything it does not read itself to
 * `fromBinary`), in a fraction of its time (src/codec/binary-decoder.ts).
 */
const decodeAgentMessage = compileDecoder(AgentMessageSchema);

/**
 * Messages decoded ahead of the handler before the request body is paused;
 * HTTP/2 flow control then holds the agent back, as it does when Connect's
 * handler stops pulling.
 */
const READ_AHEAD = 64;

/**
 * The request body of an agent stream as the handler's messages, decoded
 * as their bytes arrive. A body that is not a sequence of whole, decodable,
 * uncompressed envelopes ends the iteration with the error Connect's
 * handler gives the same bytes, after the messages before the bad one (as
 * Connect's lazy pipeline hands them over). A stream reset before the
 * agent ended it ends the same way as an ended body (`closed` is called
 * first), as Node ends the request of a reset stream for Connect's handler.
 * Once the handler stops reading, the request is read to its end unheeded,
 * so a paused stream can still close.
 */
export function readRequests(
  req: Http2ServerRequest,
  protocol: AgentCallProtocol,
  readMaxBytes: number,
  closed: (rstCode: number) => void,
): MessageQueue {
  const detach = () => {
    req.off("data", onData);
    req.resume();
  };
  const queue = new MessageQueue(() => req.resume(), detach);
  const reader = new EnvelopeReader(readMaxBytes);
  const stop = (err: unknown) => {
    detach();
    queue.end(err);
  };
  const onData = (chunk: Buffer) => {
    let envelopes: ReturnType<EnvelopeReader["push"]>;
    try {
      envelopes = reader.push(chunk);
    } catch (err) {
      stop(err);
      return;
    }
    for (const { flags, data } of envelopes) {
      // Connect's order: decompression (refused: none was negotiated), then the end-stream skip.
      if ((flags & COMPRESSED_FLAG) === COMPRESSED_FLAG) {
        stop(
          new ConnectError("received compressed envelope, but do not know how to decompress", Code.Internal),
        );
        return;
      }
      if (skipsEnvelope(protocol, flags)) continue;
      let m: AgentMessage;
      try {
        m = decodeAgentMessage(data);
      } catch (err) {
        stop(
          new ConnectError(
            `parse binary: ${err instanceof Error ? err.message : String(err)}`,
            Code.Internal,
          ),
        );
        return;
      }
      queue.push(m);
    }
    if (queue.length >= READ_AHEAD) req.pause();
  };
  req.on("data", onData);
  const ended = () => {
    try {
      reader.end();
    } catch (err) {
      stop(err);
      return;
    }
    stop(undefined);
  };
  req.once("end", ended);
  req.once("error", (err) => stop(ConnectError.from(err, Code.Internal)));
  req.once("close", () => {
    closed(req.stream.rstCode ?? 0);
    ended();
  });
  return queue;
}

/**
 * The messages on their way to the handler: one read waiting at a time (the
 * handler's), an end that comes after what was queued before it (an error
 * or the body's end), and a failure that does not wait (the stream is gone).
 * The handler's read takes callbacks (`readInto`): no promise waits per
 * stream between two messages.
 */
export class MessageQueue implements CallbackIterator<AgentMessage>, AsyncIterable<AgentMessage> {
  readonly #items: AgentMessage[] = [];
  /** Reads waiting, oldest first (normally one: the handler's; an interrupted read stays first in line, as with next()). */
  readonly #waiting: Reader[] = [];
  /** Set once the body ended: `error` undefined for a clean end. */
  #end: { error: unknown } | undefined;
  #failed: { error: unknown } | undefined;

  /** `drained`: the handler took enough for reading to go on; `stopped`: it will read no more. */
  constructor(
    private readonly drained: () => void,
    private readonly stopped: () => void,
  ) {}

  get length(): number {
    return this.#items.length;
  }

  push(m: AgentMessage): void {
    if (this.#end || this.#failed) return;
    const w = this.#waiting.shift();
    if (w) w.onResult({ value: m, done: false });
    else this.#items.push(m);
  }

  /** Nothing more comes: after what is queued, the iteration ends (or fails with `error`). */
  end(error: unknown): void {
    if (this.#end || this.#failed) return;
    this.#end = { error };
    if (this.#items.length === 0) for (const w of this.#waiting.splice(0)) this.#settleEnd(w);
  }

  /** The iteration fails now; what is queued is dropped. */
  fail(error: unknown): void {
    if (this.#failed) return;
    this.#failed = { error };
    this.stopped();
    this.#items.length = 0;
    for (const w of this.#waiting.splice(0)) w.onError(error);
  }

  readInto(onResult: (r: IteratorResult<AgentMessage>) => void, onError: (err: unknown) => void): void {
    if (this.#failed) {
      onError(this.#failed.error);
      return;
    }
    const m = this.#items.shift();
    if (m !== undefined) {
      if (this.#items.length === READ_AHEAD / 2) this.drained();
      onResult({ value: m, done: false });
      return;
    }
    if (this.#end) {
      this.#settleEnd({ onResult, onError });
      return;
    }
    this.#waiting.push({ onResult, onError });
  }

  takeWaiting(): AgentMessage | undefined {
    if (this.#failed) return undefined;
    const m = this.#items.shift();
    if (m !== undefined && this.#items.length === READ_AHEAD / 2) this.drained();
    return m;
  }

  next(): Promise<IteratorResult<AgentMessage>> {
    return new Promise((resolve, reject) => this.readInto(resolve, reject));
  }

  return(): Promise<IteratorResult<AgentMessage>> {
    this.fail(new ConnectError("the handler stopped reading", Code.Canceled));
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  #settleEnd(r: Reader): void {
    const error = this.#end?.error;
    if (error === undefined) r.onResult({ value: undefined, done: true });
    else r.onError(error);
  }
}

interface Reader {
  onResult(r: IteratorResult<AgentMessage>): void;
  onError(err: unknown): void;
}
