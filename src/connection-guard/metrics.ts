import { Counter, Gauge, type Registry } from "prom-client";
import type { ConnectionCaps } from "./limits.js";

/** Why the guard closed a connection or session. */
export type GuardReason =
  | "total_cap"
  | "address_cap"
  | "handshake_timeout"
  | "first_stream_deadline"
  | "idle"
  | "unauthenticated"
  | "stream_resets";

/**
 * Connection limits, current counts and what was closed, as Prometheus
 * metrics named `<prefix>_connections_*` on the listener's registry.
 */
export class ConnectionMetrics {
  readonly open: Gauge;
  readonly limit: Gauge<"scope">;
  readonly busiestAddress: Gauge;
  readonly closed: Counter<"reason">;
  /** The highest count of open connections from one address, read at scrape time. */
  busiest: () => number = () => 0;

  constructor(registry: Registry, prefix: string) {
    this.open = new Gauge({
      name: `${prefix}_connections_open`,
      help: "TCP connections open on the listener",
      registers: [registry],
    });
    this.limit = new Gauge({
      name: `${prefix}_connections_limit`,
      help: "Connection caps: total (scope=total) and per source address (scope=per_address)",
      labelNames: ["scope"] as const,
      registers: [registry],
    });
    const self = this;
    this.busiestAddress = new Gauge({
      name: `${prefix}_connections_busiest_address`,
      help: "Open connections from the source address with the most of them",
      registers: [registry],
      collect() {
        this.set(self.busiest());
      },
    });
    this.closed = new Counter({
      name: `${prefix}_connections_closed_total`,
      help: "Connections and sessions closed by the listener's limits, by reason (total_cap, address_cap, handshake_timeout, first_stream_deadline, idle, unauthenticated, stream_resets)",
      labelNames: ["reason"] as const,
      registers: [registry],
    });
  }

  setLimits(caps: ConnectionCaps): void {
    this.limit.set({ scope: "total" }, caps.maxConnections);
    this.limit.set({ scope: "per_address" }, caps.maxConnectionsPerAddress);
  }

  count(reason: GuardReason): void {
    this.closed.inc({ reason });
  }
}
