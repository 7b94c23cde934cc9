/** Prometheus metrics of the API: process defaults plus requests by route and status. */
import type { FastifyInstance } from "fastify";
import { Counter, collectDefaultMetrics, Histogram, Registry } from "prom-client";

export function apiRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "llmgw_api_" });
  return registry;
}

export function instrument(app: FastifyInstance, registry: Registry): void {
  const requests = new Counter({
    name: "llmgw_api_requests_total",
    help: "HTTP requests served, by method, route and status",
    labelNames: ["method", "route", "status"],
    registers: [registry],
  });
  const duration = new Histogram({
    name: "llmgw_api_request_duration_seconds",
    help: "Time to serve an HTTP request, by method and route",
    labelNames: ["method", "route"],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10],
    registers: [registry],
  });
  app.addHook("onResponse", async (req, reply) => {
    // The route pattern, not the URL: ids in paths would make a series per node.
    const route = req.routeOptions.url ?? "unmatched";
    requests.inc({ method: req.method, route, status: String(reply.statusCode) });
    duration.observe({ method: req.method, route }, reply.elapsedTime / 1000);
  });
}
