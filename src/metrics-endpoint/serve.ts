/**
 * The Prometheus endpoint every llmgw process serves: `GET /metrics` of one
 * registry on a plain HTTP listener.
 */
import { createServer, type Server } from "node:http";
import type { Registry } from "prom-client";
import { parseListen } from "./listen-address.js";

/** Serves `GET /metrics` on a plain HTTP listener. */
export async function serveRegistry(
  registry: Registry,
  listen: string,
): Promise<{ url: string; server: Server }> {
  const { host, port } = parseListen(listen);
  const server = createServer((req, res) => {
    if (req.method !== "GET" || req.url?.split("?")[0] !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found; try /metrics\n");
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": registry.contentType }).end(text),
      (err: Error) => res.writeHead(500, { "content-type": "text/plain" }).end(`${err.message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  const bound = typeof addr === "object" && addr ? addr.port : port;
  return { url: `http://${host.includes(":") ? `[${host}]` : host}:${bound}/metrics`, server };
}
