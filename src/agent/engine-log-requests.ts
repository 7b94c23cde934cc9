/**
 * The agent's side of `llmgw logs`: answers the gateway's EngineLogRequests
 * with EngineLogChunks read from the shards' output (the supervisor's, or a
 * simulated engine's: any EngineOutputSource). Engine output is untrusted
 * and unbounded, so each request is bounded here: chunks of at most
 * CHUNK_BYTES, at most RATE_BYTES_PER_S, at most TOTAL_BYTES in all, and at
 * most MAX_REQUESTS at once. A follow is polled, and pauses while the
 * stream's send queue is long (the gateway is not reading). It ends when the
 * gateway cancels it or the stream ends.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  EngineLogChunk_End as End,
  type EngineLogChunkSchema,
  type EngineLogRequest,
} from "../gen/llmgw/v1/agent_pb.js";
import type { EngineOutput, EngineOutputSource } from "./engine/engine-output.js";

export type EngineLogChunkInit = MessageInitShape<typeof EngineLogChunkSchema>;

export interface EngineLogLimits {
  /** Bytes per chunk. */
  chunkBytes: number;
  /** Bytes per second per request, once its tail is sent. */
  rateBytesPerS: number;
  /** Bytes per request, its tail included; then it ends with END_LIMIT. */
  totalBytes: number;
  /** The most a tail sends (its newest bytes). */
  tailBytes: number;
  /** Requests served at once; more end with END_BUSY. */
  maxRequests: number;
  /** How often a follow looks for new output. */
  pollMs: number;
  /** A follow pauses while the stream's send queue holds more messages than this. */
  maxQueued: number;
}

export const DEFAULT_ENGINE_LOG_LIMITS: EngineLogLimits = {
  chunkBytes: 16 * 1024,
  rateBytesPerS: 512 * 1024,
  totalBytes: 64 * 1024 * 1024,
  tailBytes: 1024 * 1024,
  maxRequests: 8,
  pollMs: 250,
  maxQueued: 64,
};

export interface EngineLogRequestsOptions {
  /** Undefined: this agent keeps no engine output (every request ends NOT_FOUND). */
  source: EngineOutputSource | undefined;
  /** Says a chunk on the stream; false when it could not (no stream: the request ends). */
  send(chunk: EngineLogChunkInit): boolean;
  /** Messages waiting in the stream's send queue. */
  queued(): number;
  limits?: Partial<EngineLogLimits>;
  /** A request ended: how (the protocol's End name in lower case, or "cancelled"). */
  onEnd?(end: string): void;
}

interface Running {
  cancelled: boolean;
  timer: NodeJS.Timeout | undefined;
}

export class EngineLogRequests {
  readonly #o: EngineLogRequestsOptions;
  readonly #limits: EngineLogLimits;
  readonly #running = new Map<string, Running>();

  constructor(o: EngineLogRequestsOptions) {
    this.#o = o;
    this.#limits = { ...DEFAULT_ENGINE_LOG_LIMITS, ...o.limits };
  }

  /** Requests under way. */
  get size(): number {
    return this.#running.size;
  }

  handle(req: EngineLogRequest): void {
    const id = req.requestId;
    if (id === "") return;
    if (req.cancel) {
      this.#cancel(id);
      return;
    }
    if (this.#running.has(id)) return;
    const output = this.#o.source?.output(req.shardId);
    if (!output) {
      this.#end(id, End.NOT_FOUND, `this node has no log of shard ${JSON.stringify(req.shardId)}`);
      return;
    }
    if (this.#running.size >= this.#limits.maxRequests) {
      this.#end(id, End.BUSY, `this agent serves ${this.#limits.maxRequests} log requests at once`);
      return;
    }
    const r: Running = { cancelled: false, timer: undefined };
    this.#running.set(id, r);
    void this.#serve(id, r, output, req).catch((err: unknown) => {
      if (this.#running.get(id) !== r) return;
      this.#running.delete(id);
      clearTimeout(r.timer);
      this.#end(
        id,
        End.FAILED,
        `reading the log failed: ${err instanceof Error ? err.message : String(err)}`,
      );
    });
  }

  /** The stream ended: nobody is listening to what is under way. */
  cancelAll(): void {
    for (const r of this.#running.values()) {
      r.cancelled = true;
      clearTimeout(r.timer);
    }
    this.#running.clear();
  }

  #cancel(id: string): void {
    const r = this.#running.get(id);
    if (!r) return;
    r.cancelled = true;
    clearTimeout(r.timer);
    this.#running.delete(id);
    this.#o.onEnd?.("cancelled");
  }

  async #serve(id: string, r: Running, output: EngineOutput, req: EngineLogRequest): Promise<void> {
    const l = this.#limits;
    let sent = 0;
    const tail = await output.tail(Math.min(req.tailLines, 100_000), Math.min(l.tailBytes, l.totalBytes));
    if (r.cancelled) return;
    if (!this.#chunks(id, tail.data)) return this.#stop(id, r);
    sent += tail.data.length;
    if (!req.follow) {
      this.#running.delete(id);
      this.#end(id, End.DONE, "");
      return;
    }
    let position = tail.position;
    const perPoll = Math.max(l.chunkBytes, Math.floor((l.rateBytesPerS * l.pollMs) / 1000));
    const poll = async (): Promise<void> => {
      if (r.cancelled) return;
      if (this.#o.queued() <= l.maxQueued) {
        const budget = Math.min(perPoll, l.totalBytes - sent);
        const read = await output.readFrom(position, budget);
        if (r.cancelled) return;
        position = read.position;
        if (!this.#chunks(id, read.data)) return this.#stop(id, r);
        sent += read.data.length;
        if (sent >= l.totalBytes) {
          this.#running.delete(id);
          this.#end(id, End.LIMIT, `the agent sends at most ${l.totalBytes} bytes per log request`);
          return;
        }
      }
      r.timer = setTimeout(() => void poll().catch(fail), l.pollMs);
    };
    const fail = (err: unknown) => {
      if (this.#running.get(id) !== r) return;
      this.#running.delete(id);
      this.#end(
        id,
        End.FAILED,
        `reading the log failed: ${err instanceof Error ? err.message : String(err)}`,
      );
    };
    r.timer = setTimeout(() => void poll().catch(fail), l.pollMs);
  }

  /** Says `data` in chunks; false when the stream could not take them. */
  #chunks(id: string, data: Uint8Array): boolean {
    for (let at = 0; at < data.length; at += this.#limits.chunkBytes) {
      const part = data.subarray(at, at + this.#limits.chunkBytes);
      if (!this.#o.send({ requestId: id, data: part })) return false;
    }
    return true;
  }

  /** The stream went away under a request: it ends here (nothing can be said). */
  #stop(id: string, r: Running): void {
    r.cancelled = true;
    clearTimeout(r.timer);
    if (this.#running.get(id) === r) this.#running.delete(id);
  }

  #end(id: string, end: End, error: string): void {
    this.#o.onEnd?.((End[end] ?? "unspecified").toLowerCase().replace("_", "-"));
    this.#o.send({ requestId: id, end, error });
  }
}
