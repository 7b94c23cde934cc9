/** The router's settings (flags of `llmgw router`), checked with zod: a bad value names its flag. */
import { z } from "zod";

const int = (min: number) => z.int().min(min);

export const routerConfigSchema = z.strictObject({
  /** Largest request body accepted (bytes): a larger one gets a 413. */
  maxBodyBytes: int(1).default(8 * 1024 * 1024),
  /** Largest request head (request line and headers, bytes): a larger one gets a 431. */
  maxHeaderBytes: int(1024).default(16 * 1024),
  /** Requests one client (API key, or address without keys) may have in flight; more get a 429. */
  maxConcurrentPerClient: int(1).default(256),
  /** Other replicas a request is tried on when one fails before its first response byte. */
  retries: int(0).default(2),
  /** How long a replica that failed is kept out (passive health), ms. */
  ejectMs: int(0).default(5_000),
  /** Retry-After of a 503 for a model with no ready replica, seconds. */
  retryAfterSeconds: int(1).default(2),
  /** Prompt-prefix affinity: requests that share the prompt's start go to the same replica. */
  affinity: z.enum(["none", "prefix"]).default("none"),
  /** Characters of the prompt the affinity key is made of. */
  affinityChars: int(1).default(256),
  /** Body bytes kept to resend on a retry; a larger body is not retried once it was sent. */
  retryBodyBytes: int(0).default(1024 * 1024),
});

export type RouterConfig = z.output<typeof routerConfigSchema>;
export type RouterConfigInput = z.input<typeof routerConfigSchema>;

/** Flag names of the fields, for messages. */
export const CONFIG_FLAGS: Record<keyof RouterConfig, string> = {
  maxBodyBytes: "--max-body-bytes",
  maxHeaderBytes: "--max-header-bytes",
  maxConcurrentPerClient: "--max-concurrent-per-client",
  retries: "--retries",
  ejectMs: "--eject-ms",
  retryAfterSeconds: "--retry-after-seconds",
  affinity: "--affinity",
  affinityChars: "--affinity-chars",
  retryBodyBytes: "--retry-body-bytes",
};
