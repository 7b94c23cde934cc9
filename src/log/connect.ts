import {
  AuthorizationError,
  connect,
  type NatsConnection,
  UserAuthenticationExpiredError,
} from "@nats-io/transport-node";
import type { NatsSecurity } from "../nats-auth/index.js";
import { LogError } from "./errors.js";

export const DEFAULT_NATS_URL = "nats://127.0.0.1:4222";

export interface ConnectOptions {
  /** One URL or a comma-separated list (a cluster). */
  url: string;
  /** Shown in the server's connection list. */
  name: string;
  /** Give up the first connection attempt after this long. Default 5 s. */
  timeoutMs?: number;
  /** Credentials and TLS; none: an anonymous plain-text connection (or the URL's user and password). */
  security?: NatsSecurity;
}

/**
 * A NATS URL (or comma-separated list) fit for messages and logs: the
 * password or token of `nats://user:password@host` is replaced by `***`.
 */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/)([^/@,\s]*)@/g, (_m, slashes: string, userinfo: string) => {
    const colon = userinfo.indexOf(":");
    // A bare userinfo is a token; with a colon, the user stays readable.
    return `${slashes}${colon >= 0 ? `${userinfo.slice(0, colon)}:***` : "***"}@`;
  });
}

/**
 * The server list of a NATS URL, with credentials taken out of the URLs:
 * the client does not read `user:password@` or `token@` in a URL, it takes
 * them as options (and keeping them out of the server list keeps them out of
 * the client's own messages). The first credentials given apply to all.
 */
export function splitCredentials(url: string): {
  servers: string[];
  auth: { user: string; pass: string } | { token: string } | Record<string, never>;
} {
  let auth: { user: string; pass: string } | { token: string } | Record<string, never> = {};
  const servers = url
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((s) => {
      const m = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/)?([^/@]*)@(.*)$/.exec(s);
      if (!m) return s;
      const userinfo = m[2] ?? "";
      if (Object.keys(auth).length === 0 && userinfo !== "") {
        const colon = userinfo.indexOf(":");
        auth =
          colon >= 0
            ? {
                user: decodeURIComponent(userinfo.slice(0, colon)),
                pass: decodeURIComponent(userinfo.slice(colon + 1)),
              }
            : { token: decodeURIComponent(userinfo) };
      }
      return `${m[1] ?? ""}${m[3] ?? ""}`;
    });
  return { servers, auth };
}

/**
 * Connects to NATS the way every llmgw process does: reconnect forever once
 * connected (a restarted server must not end the process), and no async
 * stack traces (they cost throughput on every publish).
 */
export async function connectNats(opts: ConnectOptions): Promise<NatsConnection> {
  const { servers, auth } = splitCredentials(opts.url);
  const security = opts.security ?? {};
  try {
    return await connect({
      servers,
      ...auth,
      ...(security.authenticator ? { authenticator: security.authenticator } : {}),
      ...(security.tls ? { tls: security.tls } : {}),
      name: opts.name,
      noAsyncTraces: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      timeout: opts.timeoutMs ?? 5000,
      pingInterval: 10_000,
    });
  } catch (err) {
    if (err instanceof AuthorizationError || err instanceof UserAuthenticationExpiredError) {
      throw new LogError(
        "unauthenticated",
        `NATS at ${redactUrl(opts.url)} refused the connection: ${err.message} (${
          security.authenticator
            ? "the credentials given are not those of a user it knows"
            : "it requires credentials: --nats-creds or LLMGW_NATS_CREDS names the file"
        })`,
        { cause: err },
      );
    }
    throw new LogError(
      "unavailable",
      `cannot connect to NATS at ${redactUrl(opts.url)}: ${redactUrl((err as Error).message)}. Is nats-server running? (llmgw dev starts one; --nats or LLMGW_NATS_URL chooses another)`,
      { cause: err },
    );
  }
}
