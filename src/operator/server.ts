/**
 * The operator API server. It serves from its own projection of the log
 * (ProjectionRuntime over the fleet projection): every API instance reads
 * the same state the reconciler decides on, and writes only through the log.
 */
import { hostname } from "node:os";
import Fastify, { type FastifyInstance, type FastifyReply } from "fastify";
import { type Logger, pino } from "pino";
import type { Registry } from "prom-client";
import {
  ConnectionMetrics,
  capConnections,
  type Http1LimitsInput,
  Http1LimitsSchema,
} from "../connection-guard/index.js";
import { ConnectionState, type Log } from "../log/index.js";
import { type FleetState, fleetProjection } from "../projections/index.js";
import { ProjectionRuntime, type SnapshotStore } from "../projections/runtime/index.js";
import { type AuthMode, installAuth, isLoopbackHost } from "./auth.js";
import type { ApiContext } from "./context.js";
import { installErrorHandlers, invalid } from "./errors.js";
import { FleetHistory } from "./history.js";
import { apiRegistry, instrument } from "./metrics.js";
import { requestForLog } from "./request-log.js";
import { catalogRoutes } from "./routes/catalog.js";
import { endpointRoutes } from "./routes/endpoints.js";
import { engineLogRoutes } from "./routes/engine-logs.js";
import { eventRoutes } from "./routes/events.js";
import { fleetRoutes } from "./routes/fleet.js";
import { healthRoutes } from "./routes/health.js";
import { logReadRoutes } from "./routes/log-reads.js";
import { modelRoutes } from "./routes/models.js";
import { nodeRoutes } from "./routes/nodes.js";
import { openApiRoutes } from "./routes/openapi.js";
import { replicaRoutes } from "./routes/replicas.js";
import { rolloutRoutes } from "./routes/rollouts.js";
import { routerRequestRoutes } from "./routes/router-requests.js";
import { streamRoutes } from "./routes/stream.js";
import { DEFAULT_UI_DIR, uiRoutes } from "./routes/ui.js";
import { whatIfRoutes } from "./routes/what-if.js";
import { installSiteGuard } from "./site-guard.js";
import { weakTokenReason } from "./token-strength.js";

/** Longest path segment the router matches at all. */
const MAX_PATH_SEGMENT = 256;

export interface ApiOptions {
  /** An open log; the server does not close it. */
  log: Log;
  host: string;
  /** 0 picks a free port. */
  port: number;
  auth: AuthMode;
  logger?: Logger;
  /** Writer id of this instance in the events it appends (default `api-<hostname>`). */
  instanceId?: string;
  /** How long a write waits for the projection to fold it (default 10 s). */
  waitTimeoutMs?: number;
  /** Projection snapshots (default none: the API folds the log at start). */
  snapshots?: SnapshotStore<FleetState> | false;
  /**
   * Snapshots the fleet history (time slider) may start a jump from; default
   * the same store as `snapshots`. The CLI passes the reconciler's store read-only.
   */
  historySnapshots?: SnapshotStore<FleetState>;
  /** Where the built UI is (default dist/ui of the project); a missing folder serves a page saying how to build it. */
  uiDir?: string;
  /** Connection caps, timeouts and size limits of the listener (defaults in docs/operator-api.md). */
  limits?: Http1LimitsInput;
  /** Serve HTTPS with this certificate and key (PEM); plain HTTP without. */
  tls?: ApiTls;
  /** Routers (`llmgw router` base URLs) whose request counts GET /v1/router/requests reads. */
  routerUrls?: readonly string[];
}

/** The API's own certificate and key (PEM), as `--tls-cert` and `--tls-key` name them. */
export interface ApiTls {
  cert: string | Buffer;
  key: string | Buffer;
}

export interface ApiServer {
  readonly app: FastifyInstance;
  /** Base URL, e.g. http://127.0.0.1:8080 (https:// with TLS) */
  readonly url: string;
  readonly runtime: ProjectionRuntime<FleetState>;
  readonly registry: Registry;
  /** Every route registered (method and URL as fastify writes them): what the OpenAPI document must describe. */
  readonly routes: ReadonlyArray<{ method: string; url: string }>;
  close(): Promise<void>;
}

/** Refuses an unauthenticated server anywhere but on loopback. */
export function checkAuth(host: string, auth: AuthMode): void {
  if (auth.kind === "dev" && !isLoopbackHost(host)) {
    throw new RangeError(
      `development mode (no token) listens on loopback only, not ${host}; use --listen 127.0.0.1:PORT or give a --token`,
    );
  }
  if (auth.kind === "token") {
    const weak = weakTokenReason(auth.token);
    if (weak !== undefined) throw new RangeError(`the API token (--token) is too weak: ${weak}`);
  }
  if (auth.kind === "tokens" && auth.tokens.size === 0) {
    throw new RangeError("the API needs at least one token");
  }
}

/** Validates the listener's limits, naming every problem in one error. */
export function parseApiLimits(input: Http1LimitsInput = {}) {
  const r = Http1LimitsSchema.safeParse(input);
  if (r.success) return r.data;
  const problems = r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  throw new RangeError(`invalid API limits: ${problems.join("; ")}`);
}

export async function startApi(opts: ApiOptions): Promise<ApiServer> {
  checkAuth(opts.host, opts.auth);
  const limits = parseApiLimits(opts.limits);
  const logger = opts.logger ?? pino({ level: "silent" });
  const registry = apiRegistry();
  const runtime = new ProjectionRuntime(opts.log, fleetProjection, {
    logger,
    metrics: registry,
    snapshots: opts.snapshots ?? false,
  });
  await runtime.start();

  const connection = new ConnectionState(opts.log.nc);

  const ctx: ApiContext = {
    log: opts.log,
    runtime,
    registry,
    logger,
    instanceId: opts.instanceId ?? `api-${hostname()}`,
    waitTimeoutMs: opts.waitTimeoutMs ?? 10_000,
    natsConnected: () => connection.up,
    history: new FleetHistory(opts.log, {
      snapshots: opts.historySnapshots ?? (opts.snapshots ? opts.snapshots : undefined),
    }),
  };

  const scheme = opts.tls ? "https" : "http";
  const serverOptions = {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    maxHeaderSize: limits.maxHeaderBytes,
    // How often those deadlines are checked (Node's default is 30 s).
    connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
  };
  const app = Fastify({
    loggerInstance: logger.child({}, { serializers: { req: requestForLog } }),
    bodyLimit: limits.bodyLimitBytes,
    // Slow or silent clients must not hold a connection (and its file
    // descriptor) open: headers and the whole request have deadlines, idle
    // keep-alive connections close. Responses may take as long as they need
    // (live streams), so there is no socket inactivity timeout.
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    maxRequestsPerSocket: limits.maxRequestsPerSocket,
    // fastify hands `https` (not `http`) to the server it makes: the same deadlines go in both.
    ...(opts.tls
      ? { https: { ...serverOptions, cert: opts.tls.cert, key: opts.tls.key } }
      : { http: serverOptions }),
    // Ids are validated by the routes with messages that say what is allowed;
    // the router's own limit only stops absurd segments, with the API's error shape.
    routerOptions: { maxParamLength: MAX_PATH_SEGMENT },
    frameworkErrors: (err, _req, reply) => {
      const e =
        err.code === "FST_ERR_MAX_PARAM_LENGTH"
          ? invalid(
              `a path segment is longer than ${MAX_PATH_SEGMENT} characters; node ids have at most 253, replica ids at most 128`,
            )
          : invalid(`the URL cannot be read: ${err.message}`);
      void (reply as unknown as FastifyReply).status(e.status).send(e.body());
    },
  }) as unknown as FastifyInstance;
  const routes: Array<{ method: string; url: string }> = [];
  app.addHook("onRoute", (r) => {
    for (const method of [r.method].flat()) routes.push({ method, url: r.url });
  });
  installErrorHandlers(app);
  if (opts.auth.kind === "dev") installSiteGuard(app, scheme);
  installAuth(app, opts.auth);
  instrument(app, registry);
  healthRoutes(app, ctx);
  nodeRoutes(app, ctx);
  replicaRoutes(app, ctx);
  eventRoutes(app, ctx);
  fleetRoutes(app, ctx);
  logReadRoutes(app, ctx);
  const streams = streamRoutes(app, ctx);
  const endpointStreams = endpointRoutes(app, ctx);
  const engineLogStreams = engineLogRoutes(app, ctx);
  whatIfRoutes(app, ctx);
  routerRequestRoutes(app, opts.routerUrls ?? []);
  modelRoutes(app, ctx);
  rolloutRoutes(app, ctx);
  openApiRoutes(app);
  await uiRoutes(app, opts.uiDir ?? DEFAULT_UI_DIR);
  await app.register(async (scope) => catalogRoutes(scope, ctx));
  // Live streams never end by themselves; close them so the server can.
  app.addHook("preClose", async () => {
    streams.closeAll();
    endpointStreams.closeAll();
    engineLogStreams.closeAll();
  });

  // The slider's anchors over the whole log, built once in the background (a failure only means slower first jumps).
  void ctx.history.prefill().catch((err: unknown) => logger.warn({ err }, "fleet history prefill failed"));

  capConnections(app.server, limits, new ConnectionMetrics(registry, "llmgw_api"), logger);

  try {
    await app.listen({ host: opts.host, port: opts.port });
  } catch (err) {
    await runtime.stop();
    throw err;
  }
  const addr = app.server.address();
  const port = typeof addr === "object" && addr ? addr.port : opts.port;
  const host = opts.host.includes(":") ? `[${opts.host}]` : opts.host;
  const url = `${scheme}://${host}:${port}`;
  logger.info({ url, auth: opts.auth.kind, tls: opts.tls !== undefined }, `operator API listening on ${url}`);

  return {
    app,
    url,
    runtime,
    registry,
    routes,
    async close() {
      await app.close();
      await runtime.stop();
    },
  };
}
