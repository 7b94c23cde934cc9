import { setMaxListeners } from "node:events";
import type { HandlerContext } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Logger, pino } from "pino";
import { EngineLogSubjects } from "../engine-logs/index.js";
import type { AgentMessage, ControlMessage, EngineLogChunk } from "../gen/llmgw/v1/agent_pb.js";
import { ConnectionState, type Log, openLog } from "../log/index.js";
import type { Readiness } from "../metrics-endpoint/index.js";
import type { NatsSecurity } from "../nats-auth/index.js";
import { type GatewayConfig, type GatewayConfigInput, parseGatewayConfig } from "./config.js";
import { EngineLogBridge } from "./engine-logs/index.js";
import { gatewayEvent, gatewayStartedEvent } from "./events.js";
import { follow } from "./follow.js";
import { GatewayIdentity } from "./gateway-identity.js";
import { GatewayLease } from "./lease.js";
import { GatewayMetrics, serveMetrics } from "./metrics.js";
import { atMost, PROCESS_CLOCK } from "./process-clock.js";
import { Publisher } from "./publisher.js";
import { SessionRegistry } from "./registry.js";
import { CommandRelay } from "./relay.js";
import { type AgentServer, startAgentServer } from "./server.js";
import { AgentSession } from "./session.js";
import type { Refusal, SessionHost } from "./session-host.js";
import { SessionsWatch } from "./sessions-watch.js";

export interface StartOptions {
  /** Default: pino to stdout at LLMGW_LOG_LEVEL (info). */
  logger?: Logger;
  /** Default: a new registry per gateway. */
  metrics?: GatewayMetrics;
  /** NATS credentials and TLS (the gateway role's; see docs/SECURITY.md). */
  natsSecurity?: NatsSecurity;
}

type State = "starting" | "serving" | "draining" | "stopped";

/** Room for the event envelope and headers around an agent message (ids, times, the message id header). */
const EVENT_HEADROOM_BYTES = 8 * 1024;

/**
 * One gateway: the agent listener, the sessions it holds, the two log
 * followers (reconciler passes for the relay, session openings for
 * newest-wins), its lease, and its metrics.
 */
export class Gateway implements SessionHost {
  readonly registry = new SessionRegistry();
  readonly #live = new Set<AgentSession>();
  readonly #stopFollowing = new AbortController();
  /**
   * Aborted at shutdown. Every open stream listens on it (Connect links each
   * handler's signal to it), so thousands of listeners are expected: the
   * leak warning past ten is turned off.
   */
  readonly #shutdown = unlimitedListeners(new AbortController());
  #state: State = "starting";
  #server: AgentServer | undefined;
  #lease: GatewayLease | undefined;
  #followers: Promise<void>[] = [];
  readonly #watch: SessionsWatch;
  readonly #relay: CommandRelay;
  readonly #identity: GatewayIdentity;
  /** `llmgw logs`: the API's requests for engine output, relayed to the agents and back. */
  readonly #engineLogs: EngineLogBridge;
  #metricsServer: { url: string; server: import("node:http").Server } | undefined;
  #logWatch: NodeJS.Timeout | undefined;
  #drained: Promise<void> | undefined;
  readonly #connection: ConnectionState;
  readonly #stateListeners = new Set<() => void>();

  private constructor(
    readonly config: GatewayConfig,
    readonly log: Log,
    readonly publisher: Publisher,
    readonly metrics: GatewayMetrics,
    readonly logger: Logger,
  ) {
    this.#watch = new SessionsWatch(this.registry);
    this.#relay = new CommandRelay(this.registry, metrics, logger, config.id, (e) => publisher.append(e));
    this.#identity = new GatewayIdentity(this, this.#watch);
    this.#connection = new ConnectionState(log.nc);
    this.#engineLogs = new EngineLogBridge({
      nc: log.nc,
      subjects: new EngineLogSubjects(config.prefix),
      gatewayId: config.id,
      registry: this.registry,
      metrics,
      logger,
    });
  }

  /** Starts a gateway and resolves once it serves agents. */
  static async start(input: GatewayConfigInput, opts: StartOptions = {}): Promise<Gateway> {
    const config = parseGatewayConfig(input);
    const logger = (opts.logger ?? pino({ level: process.env["LLMGW_LOG_LEVEL"] ?? "info" })).child({
      gateway: config.id,
    });
    const metrics = opts.metrics ?? new GatewayMetrics();
    metrics.eventBudget.set({ limit: "per_minute" }, config.eventBudgetPerMinute);
    metrics.eventBudget.set({ limit: "burst" }, config.eventBudgetBurst);
    metrics.byteBudget.set({ limit: "per_minute" }, config.byteBudgetPerMinute);
    metrics.byteBudget.set({ limit: "burst" }, config.byteBudgetBurst);
    metrics.textCap.set({ field: "last_output" }, config.maxOutputChars);
    metrics.textCap.set({ field: "text" }, config.maxTextChars);
    metrics.reconnectLimit.set({ limit: "per_minute" }, config.reconnectsPerMinute);
    metrics.reconnectLimit.set({ limit: "burst" }, config.reconnectBurst);
    const log = await openLog({
      url: config.nats,
      clientName: `llmgw-gateway ${config.id}`,
      name: config.stream,
      prefix: config.prefix,
      replicas: config.streamReplicas,
      // A gateway may create a missing log stream but not change one.
      updateStream: false,
      ...(opts.natsSecurity ? { security: opts.natsSecurity } : {}),
      warn: (m) => logger.warn(m),
    });
    const publisher = new Publisher(
      { appender: log.appender, statuses: log.nc.status() },
      {
        window: config.publishWindow,
        timeoutMs: config.publishTimeoutMs,
        unavailableLimitMs: config.logUnavailableLimitMs,
      },
      metrics,
      logger,
      PROCESS_CLOCK,
    );
    const gw = new Gateway(config, log, publisher, metrics, logger);
    try {
      await gw.#start();
    } catch (err) {
      await gw.#teardown("failed to start");
      throw err;
    }
    return gw;
  }

  /** Where agents connect. */
  get url(): string {
    return this.#server?.url ?? "";
  }

  get metricsUrl(): string | undefined {
    return this.#metricsServer?.url;
  }

  /** `llmgw logs` requests relayed now (for tests and operators). */
  get engineLogRequests(): number {
    return this.#engineLogs.size;
  }

  get draining(): boolean {
    return this.#state !== "serving";
  }

  #setState(state: State): void {
    this.#state = state;
    for (const l of this.#stateListeners) l();
  }

  /**
   * Ready to take agents: serving (not starting, draining or stopped) and
   * connected to NATS. `/readyz` on the metrics listener and
   * grpc.health.v1 on the agent port answer with this.
   */
  readiness(): Readiness {
    if (this.#state !== "serving") return { ready: false, reason: `the gateway is ${this.#state}` };
    if (!this.#connection.up) return { ready: false, reason: "not connected to NATS" };
    return { ready: true, detail: { gatewayId: this.config.id, sessions: this.registry.size } };
  }

  async #start(): Promise<void> {
    const cfg = this.config;
    const tls = await this.#identity.start();
    this.#server = await startAgentServer({
      listen: cfg.listen,
      tls,
      readMaxBytes: this.#readMaxBytes(),
      limits: cfg.connectionLimits,
      metrics: this.metrics,
      shutdownSignal: this.#shutdown.signal,
      logger: this.logger,
      agentStream: (requests, ctx) => this.#openStream(requests, ctx),
      health: {
        serving: () => this.readiness().ready,
        onChange: (listener) => {
          this.#stateListeners.add(listener);
          return () => this.#stateListeners.delete(listener);
        },
      },
      directStreams: cfg.directStreams,
    });
    const server = this.#server;
    this.#identity.onTlsChange((material) => server.setTls(material));
    this.#lease = await GatewayLease.acquire(this.log.nc, {
      bucket: cfg.leaseBucket,
      ttlMs: cfg.leaseTtlMs,
      info: { gatewayId: cfg.id, listen: this.url, version: cfg.version, startedAtMs: Date.now() },
      logger: this.logger,
      replicas: cfg.streamReplicas,
    });
    // Commands and session openings from here on; sessions held by this
    // gateway can only open after this point.
    const fromSeq = (await this.log.lastSeq()) + 1;
    const signal = this.#stopFollowing.signal;
    this.#followers = [
      follow(this.log, {
        subjects: [this.log.subjects.sessions],
        fromSeq,
        signal,
        logger: this.logger,
        onRecord: (r) => this.#watch.onRecord(r),
      }),
      // Only for the duplicate check: which gateways restarted or stopped (sessions-watch.ts).
      follow(this.log, {
        subjects: [this.log.subjects.gateways],
        fromSeq,
        signal,
        logger: this.logger,
        onRecord: (r) => this.#watch.onGatewayRecord(r),
      }),
      follow(this.log, {
        subjects: [this.log.subjects.reconciler],
        fromSeq,
        signal,
        logger: this.logger,
        onRecord: (r) => {
          this.#watch.onPass(r);
          this.#relay.onRecord(r);
        },
      }),
    ];
    await this.publisher.append(
      gatewayStartedEvent(cfg.id, {
        listenAddress: this.url,
        version: cfg.version,
        leaseTtlMs: cfg.leaseTtlMs,
      }),
    );
    this.#engineLogs.start();
    if (cfg.metricsListen !== undefined)
      this.#metricsServer = await serveMetrics(this.metrics, cfg.metricsListen, async () => this.readiness());
    this.#watchLog();
    this.#setState("serving");
    this.logger.info({ url: this.url, metrics: this.metricsUrl }, "gateway listening");
  }

  /**
   * The largest agent message taken. An agent message becomes one event
   * (the registration inside SessionOpened, verbatim), so a message the
   * log's NATS server cannot carry is refused at the door as
   * ResourceExhausted; taken in and then not stored, it would get
   * Unavailable, and the agent would retry it forever.
   */
  #readMaxBytes(): number {
    const maxPayload = this.log.nc.info?.max_payload;
    if (maxPayload === undefined) return this.config.readMaxBytes;
    const fits = maxPayload - EVENT_HEADROOM_BYTES;
    if (this.config.readMaxBytes <= fits) return this.config.readMaxBytes;
    this.logger.warn(
      { readMaxBytes: fits, configured: this.config.readMaxBytes, natsMaxPayload: maxPayload },
      `read limit lowered to ${fits} bytes: the NATS server takes messages of at most ${maxPayload} bytes, and an agent message becomes one event`,
    );
    return fits;
  }

  #openStream(requests: AsyncIterable<AgentMessage>, ctx: HandlerContext): AsyncIterable<ControlMessage> {
    if (this.#state !== "serving") {
      throw new ConnectError(
        `gateway ${this.config.id} is ${this.#state}; connect to another gateway`,
        Code.Unavailable,
      );
    }
    const s = new AgentSession(this, ctx);
    this.#live.add(s);
    void s.finished.then(() => this.#live.delete(s));
    return s.run(requests);
  }

  admit(s: AgentSession): Refusal | undefined {
    return this.#identity.admit(s);
  }

  hold(s: AgentSession): void {
    this.registry.add(s);
    this.#watch.check(s);
    // A revocation that came while the session was opening.
    this.#identity.checkRevoked(s);
    if (this.#state !== "serving")
      s.reconnect(`gateway ${this.config.id} is shutting down`, this.config.reconnectAfterMs);
  }

  release(s: AgentSession): void {
    this.registry.remove(s);
    this.#relay.sessionEnded(s);
    this.#engineLogs.sessionEnded(s);
  }

  engineLog(s: AgentSession, chunk: EngineLogChunk): void {
    this.#engineLogs.onChunk(s, chunk);
  }

  /**
   * The log unreachable past the limit: the gateway can neither record what
   * agents say nor relay commands, so its agents had better go elsewhere.
   */
  #watchLog(): void {
    let downSince: number | undefined;
    const status = this.log.nc.status();
    void (async () => {
      for await (const s of status) {
        if (s.type === "disconnect") downSince ??= Date.now();
        if (s.type === "reconnect") downSince = undefined;
      }
    })().catch(() => {});
    this.#logWatch = setInterval(() => {
      if (downSince === undefined || Date.now() - downSince < this.config.logUnavailableLimitMs) return;
      for (const s of this.registry.all()) {
        const detail = `the log has been unreachable for ${Date.now() - downSince} ms`;
        s.close({ kind: "log-unavailable", detail });
      }
    }, 500);
    this.#logWatch.unref();
  }

  /**
   * Graceful shutdown (SIGTERM): accept nothing new, tell every agent to
   * reconnect elsewhere, close the streams, record draining and stopped, and
   * be done within the drain deadline.
   */
  drain(reason = "gateway shutting down"): Promise<void> {
    this.#drained ??= this.#drain(reason);
    return this.#drained;
  }

  async #drain(reason: string): Promise<void> {
    const cfg = this.config;
    const started = Date.now();
    const deadline = started + cfg.drainDeadlineMs;
    // Keep the end for the stopped event, the lease and closing NATS.
    const streamsDeadline = started + Math.max(cfg.drainDeadlineMs * 0.6, cfg.drainDeadlineMs - 3_000);
    this.#setState("draining");
    this.#server?.stopAccepting();
    this.logger.info({ sessions: this.registry.size, deadlineMs: cfg.drainDeadlineMs }, "draining");
    try {
      await this.publisher.append(
        gatewayEvent(cfg.id, `gw-${cfg.id}-${started}-draining`, {
          case: "gatewayDraining",
          value: { gatewayId: cfg.id, deadlineUnixMs: BigInt(deadline), openSessions: this.registry.size },
        }),
        { limitMs: Math.max(500, (streamsDeadline - Date.now()) / 3) },
      );
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, "gateway-draining event not appended");
    }
    const detail = `gateway ${cfg.id} is shutting down: ${reason}`;
    for (const s of this.registry.all()) s.reconnect(detail, cfg.reconnectAfterMs);
    await this.#waitForSessions(streamsDeadline);
    for (const s of this.#live) s.abort(`drain deadline passed: ${detail}`);
    await this.#waitForSessions(Math.min(deadline - 500, Date.now() + 1_000));
    await this.#teardown(reason, deadline);
  }

  async #waitForSessions(until: number): Promise<void> {
    while (this.#live.size > 0 && Date.now() < until) {
      await atMost(Promise.all([...this.#live].map((s) => s.finished)), Math.max(0, until - Date.now()));
    }
  }

  async #teardown(reason: string, deadline = Date.now() + 3_000): Promise<void> {
    this.#setState("stopped");
    clearInterval(this.#logWatch);
    this.#identity.stop();
    this.#engineLogs.stop();
    this.#shutdown.abort();
    await this.#server?.close(500);
    this.#stopFollowing.abort();
    await atMost(Promise.allSettled(this.#followers), 1_000);
    if (this.#lease) {
      try {
        await this.publisher.append(
          gatewayEvent(this.config.id, `gw-${this.config.id}-${Date.now()}-stopped`, {
            case: "gatewayStopped",
            value: { gatewayId: this.config.id, reason },
          }),
          { limitMs: Math.max(300, deadline - Date.now() - 700) },
        );
      } catch (err) {
        this.logger.warn({ err: (err as Error).message }, "gateway-stopped event not appended");
      }
      await this.#lease.release();
    }
    if (this.#metricsServer) {
      const srv = this.#metricsServer.server;
      await new Promise<void>((resolve) => srv.close(() => resolve()));
      srv.closeAllConnections();
    }
    await this.log.close();
    this.logger.info({ reason }, "gateway stopped");
  }
}

function unlimitedListeners(c: AbortController): AbortController {
  setMaxListeners(0, c.signal);
  return c;
}
