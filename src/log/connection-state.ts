/**
 * Whether a NATS connection is up now: down from a `disconnect` status until
 * its `reconnect`, and for good once closed. The client reconnects by
 * itself; readiness probes ask this (a process whose NATS is gone is not ready).
 */
import type { NatsConnection } from "@nats-io/transport-node";

export class ConnectionState {
  #up = true;

  constructor(private readonly nc: NatsConnection) {
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect") this.#up = false;
        else if (s.type === "reconnect") this.#up = true;
      }
    })().catch(() => {});
  }

  get up(): boolean {
    return this.#up && !this.nc.isClosed();
  }
}
