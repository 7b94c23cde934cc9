import { createServer, type Server, type Socket } from "node:net";

/** A TCP server on a free loopback port, handing each connection to `onConnection`; resolves once it listens. */
export async function listenOnLoopback(
  onConnection: (client: Socket) => void,
): Promise<{ server: Server; port: number }> {
  const server = createServer(onConnection);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const addr = server.address();
  return { server, port: typeof addr === "object" && addr ? addr.port : 0 };
}
