import { connect, type NatsConnection } from "@nats-io/transport-node";
import { LogError } from "./errors.js";

export const DEFAULT_NATS_URL = "nats://127.0.0.1:4222";

export interface ConnectOptions {
  /** One URL or a comma-separated list (a cluster). */
  url: string;
  /** Shown in the server's connection list. */
  name: string;
  /** Give up the first connection attempt after this long. Default 5 s. */
  timeoutMs?: number;
}

/**
 * Connects to NATS the way every llmgw process does: reconnect forever once
 * connected (a restarted server must not end the process), and no async
 * stack traces (they cost throughput on every publish).
 */
export async function connectNats(opts: ConnectOptions): Promise<NatsConnection> {
  const servers = opts.url
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  try {
    return await connect({
      servers,
      name: opts.name,
      noAsyncTraces: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      timeout: opts.timeoutMs ?? 5000,
      pingInterval: 10_000,
    });
  } catch (err) {
    throw new LogError(
      "unavailable",
      `cannot connect to NATS at ${opts.url}: ${(err as Error).message}. Is nats-server running? (llmgw dev starts one; --nats or LLMGW_NATS_URL chooses another)`,
      { cause: err },
    );
  }
}
