/**
 * Asking the stream's leader, and waiting out its election: what every way
 * of reading the log (reader.ts, direct-read.ts) does before it reads.
 */
import type { JetStreamManager, StreamInfo } from "@nats-io/jetstream";
import { LogError, logErrorFrom } from "./errors.js";

/** Tries (about 15 s of backoff in all) before giving up. */
const OPEN_ATTEMPTS = 10;

/**
 * The stream's info as its leader has it. A member of a replicated stream
 * that has seen no leader for a while answers info requests too, from its
 * own copy, which may end early; its answer names no leader, and is treated
 * as the election it is (unavailable, retried by `whileElecting`).
 */
export async function leaderInfo(jsm: JetStreamManager, stream: string): Promise<StreamInfo> {
  const info = await jsm.streams.info(stream);
  if ((info.config.num_replicas ?? 1) > 1 && !info.cluster?.leader) {
    throw new LogError("unavailable", `stream ${stream} has no leader (an election under way?)`);
  }
  return info;
}

/**
 * Runs `fn`, retrying while the log is unavailable for a while (about 15 s of
 * backoff in all). While a cluster elects a new stream leader after a server
 * died, stream info and consumer creation time out; that is worth waiting
 * out rather than failing a replay or a follower.
 */
export async function whileElecting<T>(fn: () => Promise<T>, what: string, signal?: AbortSignal): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const e = logErrorFrom(err, what);
      if (e.code !== "unavailable" || attempt >= OPEN_ATTEMPTS || signal?.aborted) throw e;
      await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** attempt)));
    }
  }
}
