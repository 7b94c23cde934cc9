import { createServer, type Server } from "node:net";

/**
 * A loopback port on which nothing can be reached, for as long as it is
 * held: a listener that resets every connection as soon as it has accepted
 * it. A port bound and released first (then "closed") can be taken by
 * another process before the client connects; this one cannot. A client
 * sees the connection reset (ECONNRESET), not refused: only a port nothing
 * holds refuses.
 */
export interface UnreachablePort {
  readonly port: number;
  close(): Promise<void>;
}

export async function unreachablePort(): Promise<UnreachablePort> {
  const server: Server = createServer((socket) => {
    socket.on("error", () => {});
    socket.resetAndDestroy();
  });
  server.unref();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  return {
    port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
