import type { Server, Socket } from "node:net";
import type { Logger } from "pino";
import type { ConnectionCaps } from "./limits.js";
import type { ConnectionMetrics } from "./metrics.js";

/**
 * Closes, on accept, a connection over the listener's total cap or over the
 * cap of its source address, so one address cannot take every file
 * descriptor. It counts raw TCP connections: TLS and HTTP have not read a
 * byte yet, which is what makes refusing them cheap.
 */
export function capConnections(
  server: Server,
  caps: ConnectionCaps,
  metrics: ConnectionMetrics,
  logger: Logger,
): void {
  const byAddress = new Map<string, number>();
  let open = 0;
  metrics.setLimits(caps);
  metrics.busiest = () => {
    let most = 0;
    for (const n of byAddress.values()) if (n > most) most = n;
    return most;
  };
  server.on("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "";
    const here = byAddress.get(address) ?? 0;
    const over =
      open >= caps.maxConnections
        ? "total_cap"
        : here >= caps.maxConnectionsPerAddress
          ? "address_cap"
          : undefined;
    if (over) {
      metrics.count(over);
      logger.debug({ address, open, fromAddress: here, reason: over }, "connection refused over its cap");
      socket.destroy();
      return;
    }
    open++;
    byAddress.set(address, here + 1);
    metrics.open.set(open);
    socket.once("close", () => {
      open--;
      const left = (byAddress.get(address) ?? 1) - 1;
      if (left > 0) byAddress.set(address, left);
      else byAddress.delete(address);
      metrics.open.set(open);
    });
  });
}
