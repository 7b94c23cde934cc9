/**
 * The Prometheus endpoint every llmgw process serves: `GET /metrics` of one
 * registry on a plain HTTP listener, with the probes of its process:
 * `GET /livez` (the event loop answers: 200 whenever it is served) and,
 * when the process says what ready means, `GET /readyz` (200, or 503 with
 * the reason). Kubernetes probes these (deploy/kubernetes).
 */
import { createServer, type Server, type ServerResponse } from "node:http";
import type { Registry } from "prom-client";
import { parseListen } from "./listen-address.js";

/** Ready, or why not. */
export type Readiness = { ready: true; detail?: Record<string, unknown> } | { ready: false; reason: string };

/** How a process answers `GET /readyz`. */
export type ReadinessCheck = () => Promise<Readiness>;

const json = (res: ServerResponse, status: number, body: unknown) =>
  res.writeHead(status, { "content-type": "application/json" }).end(`${JSON.stringify(body)}\n`);

/** Serves `GET /metrics`, `GET /livez` and, with `ready`, `GET /readyz` on a plain HTTP listener. */
export async function serveRegistry(
  registry: Registry,
  listen: string,
  ready?: ReadinessCheck,
): Promise<{ url: string; server: Server }> {
  const { host, port } = parseListen(listen);
  const paths = ["/metrics", "/livez", ...(ready ? ["/readyz"] : [])];
  const server = createServer((req, res) => {
    const path = req.url?.split("?")[0];
    if (req.method !== "GET" || path === undefined || !paths.includes(path)) {
      res.writeHead(404, { "content-type": "text/plain" }).end(`not found; try ${paths.join(", ")}\n`);
      return;
    }
    if (path === "/livez") {
      json(res, 200, { status: "ok" });
      return;
    }
    if (path === "/readyz" && ready) {
      ready().then(
        (r) =>
          r.ready
            ? json(res, 200, { status: "ready", ...r.detail })
            : json(res, 503, { status: "not-ready", reason: r.reason }),
        (err: Error) => json(res, 503, { status: "not-ready", reason: err.message }),
      );
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
