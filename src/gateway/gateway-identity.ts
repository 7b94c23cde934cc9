/**
 * Who may hold a session on this gateway, beyond the certificate check of
 * each handshake: the certificate files read again when they change, the
 * revocation bucket applied live, and a second agent presenting the
 * identity of a live session told to back off (docs/SECURITY.md, "Agent
 * certificates: rotation, revocation, duplicates").
 */
import { randomUUID } from "node:crypto";
import { Code } from "@connectrpc/connect";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { TlsFiles, type TlsMaterial } from "../tls/watched-files.js";
import type { GatewayConfig } from "./config.js";
import { DuplicateReports, type Holder, liveHolder } from "./duplicates.js";
import { gatewayEvent } from "./events.js";
import { peerSerial } from "./identity.js";
import type { GatewayMetrics } from "./metrics.js";
import type { Publisher } from "./publisher.js";
import { ReconnectLimiter } from "./reconnect-limiter.js";
import type { SessionRegistry } from "./registry.js";
import { REVOCATION_RETRY_MS, type RevocationHit, RevocationWatch } from "./revocations.js";
import type { AgentServerTls } from "./server.js";
import type { AgentSession } from "./session.js";
import type { Refusal } from "./session-host.js";
import type { SessionsWatch } from "./sessions-watch.js";

/** What this needs of its gateway. */
export interface IdentityHost {
  readonly config: GatewayConfig;
  readonly logger: Logger;
  readonly metrics: GatewayMetrics;
  readonly publisher: Publisher;
  readonly registry: SessionRegistry;
  readonly log: { readonly nc: NatsConnection };
}

const GATEWAY_TLS_FLAGS = { cert: "--tls-cert", key: "--tls-key", ca: "--client-ca" };

export class GatewayIdentity {
  #files: TlsFiles | undefined;
  #revocations: RevocationWatch | undefined;
  readonly #reports: DuplicateReports;
  readonly #reconnects: ReconnectLimiter;
  #tlsListener: (tls: AgentServerTls) => void = () => {};

  constructor(
    private readonly host: IdentityHost,
    private readonly sessions: SessionsWatch,
  ) {
    this.#reports = new DuplicateReports(host.config.duplicateRetryAfterMs);
    this.#reconnects = new ReconnectLimiter({
      perMinute: host.config.reconnectsPerMinute,
      burst: host.config.reconnectBurst,
    });
  }

  /**
   * Reads the TLS files (when the configuration names files) and the
   * revocation bucket; resolves with the TLS material to serve with.
   */
  async start(): Promise<AgentServerTls | undefined> {
    const { config, logger, metrics } = this.host;
    this.#revocations = new RevocationWatch(
      this.host.log.nc,
      { bucket: config.revokedBucket, replicas: config.streamReplicas },
      logger,
      (hit) => this.#revoked(hit),
      {
        onSize: (n) => metrics.revokedIdentities.set(n),
        onKnown: (known) => metrics.revocationStateKnown.set(known ? 1 : 0),
        onIgnored: () => metrics.revocationEntriesIgnored.inc(),
      },
    );
    metrics.revocationStateKnown.set(0);
    await this.#revocations.start();
    if (!config.tlsFiles) return config.tls;
    const paths = { cert: config.tlsFiles.cert, key: config.tlsFiles.key, ca: config.tlsFiles.clientCa };
    this.#files = await TlsFiles.open(paths, {
      flags: GATEWAY_TLS_FLAGS,
      pollMs: config.tlsPollMs,
      onChange: (e) => {
        metrics.tlsReloads.inc({ outcome: e.ok ? "ok" : "error" });
        if (!e.ok) {
          logger.error(
            { error: e.error },
            "certificate files changed but cannot be used; keeping the old ones",
          );
          return;
        }
        const material = this.#files?.material;
        if (!material) return;
        try {
          this.#tlsListener(serverTls(material));
        } catch (err) {
          // Checked as a set by TlsFiles; a context the server still refuses keeps the old one.
          metrics.tlsReloads.inc({ outcome: "error" });
          logger.error({ error: String(err) }, "the server refused the new certificate; keeping the old one");
          return;
        }
        logger.info(
          { files: paths },
          "certificate files changed: new handshakes use them, open streams keep theirs",
        );
      },
    });
    return serverTls(this.#files.material);
  }

  /** Called with the new material whenever the files change and can be used. */
  onTlsChange(fn: (tls: AgentServerTls) => void): void {
    this.#tlsListener = fn;
  }

  stop(): void {
    this.#files?.close();
    this.#revocations?.stop();
  }

  /** Whether `s`, whose Register was just read, may open its session. */
  admit(s: AgentSession): Refusal | undefined {
    if (this.#revocations && !this.#revocations.known) {
      // Fail closed: a session admitted now could be one a revocation we cannot read keeps out.
      this.host.metrics.revocationUnknownRefusals.inc();
      return {
        code: Code.Unavailable,
        detail: `gateway ${this.host.config.id} cannot read its revocation bucket ${this.host.config.revokedBucket} yet, so it admits no new session; reconnect after ${REVOCATION_RETRY_MS} ms`,
        retryAfterMs: REVOCATION_RETRY_MS,
      };
    }
    const hit = this.#revocations?.find(s.nodeId, peerSerial(s.peer));
    if (hit) {
      this.host.metrics.revocationsApplied.inc({ action: "refused" });
      return { code: Code.PermissionDenied, detail: revokedDetail(hit) };
    }
    const tooOften = this.#reconnects.admit(s.nodeId, performance.now());
    if (tooOften) {
      this.host.metrics.reconnectsRefused.inc();
      this.host.logger.warn(
        { node: s.nodeId, remote: s.remoteAddress, retryAfterMs: tooOften.retryAfterMs },
        "node reconnects faster than the reconnect limit; told to come back later",
      );
      return { code: Code.ResourceExhausted, detail: tooOften.detail, retryAfterMs: tooOften.retryAfterMs };
    }
    const cfg = this.host.config;
    const holder = liveHolder(
      s.instanceId,
      this.host.registry.forNode(s.nodeId),
      this.sessions.newest(s.nodeId),
      cfg.id,
      cfg.heartbeatTimeoutMs,
    );
    if (!holder) return undefined;
    this.#duplicate(s, holder);
    const retryAfterMs = cfg.duplicateRetryAfterMs;
    return {
      code: Code.AlreadyExists,
      detail: `node ${s.nodeId} has a live session (${holder.sessionId} on gateway ${holder.gatewayId}) held by another agent process presenting the same identity; reconnect after ${retryAfterMs} ms`,
      retryAfterMs,
    };
  }

  /** Closes `s` if a revocation names it. */
  checkRevoked(s: AgentSession): void {
    const hit = this.#revocations?.find(s.nodeId, peerSerial(s.peer));
    if (!hit || s.closing) return;
    this.host.metrics.revocationsApplied.inc({ action: "closed" });
    this.host.logger.warn(
      { node: s.nodeId, session: s.sessionId, remote: s.remoteAddress, key: hit.key },
      "closing the session of a revoked identity",
    );
    s.revoke(revokedDetail(hit));
  }

  #revoked(_hit: RevocationHit): void {
    for (const s of this.host.registry.all()) this.checkRevoked(s);
  }

  #duplicate(s: AgentSession, holder: Holder): void {
    const { metrics, logger, config, publisher } = this.host;
    metrics.duplicateIdentity.inc({ holder: holder.where });
    const attempts = this.#reports.refused(s.nodeId, Date.now());
    if (attempts === undefined) return;
    logger.warn(
      {
        node: s.nodeId,
        newcomer: s.remoteAddress,
        newcomerInstance: s.instanceId,
        holder: holder.remoteAddress,
        holderInstance: holder.instanceId,
        holderSession: holder.sessionId,
        holderGateway: holder.gatewayId,
        attempts,
      },
      `two agents present the identity of ${s.nodeId}: ${s.remoteAddress || "?"} backed off, ${holder.remoteAddress || "?"} keeps its session`,
    );
    const event = gatewayEvent(config.id, `gw-${config.id}-dup-${randomUUID()}`, {
      case: "duplicateIdentity",
      value: {
        nodeId: s.nodeId,
        gatewayId: config.id,
        heldSessionId: holder.sessionId,
        heldGatewayId: holder.gatewayId,
        heldRemoteAddress: holder.remoteAddress,
        newcomerRemoteAddress: s.remoteAddress,
        heldInstanceId: holder.instanceId,
        newcomerInstanceId: s.instanceId,
        retryAfterMs: config.duplicateRetryAfterMs,
        attempts,
        detail: `node ${s.nodeId}: a second agent process presented the identity of a live session`,
      },
    });
    publisher.append(event).catch((err: unknown) => {
      logger.warn({ err: (err as Error).message }, "duplicate-identity event not appended");
    });
  }
}

function serverTls(m: TlsMaterial): AgentServerTls {
  return { cert: m.cert, key: m.key, clientCa: m.ca };
}

function revokedDetail(hit: RevocationHit): string {
  const e = hit.entry;
  const what = hit.key.startsWith("serial-")
    ? `certificate serial ${hit.key.slice("serial-".length)}${e.cn ? ` (CN ${JSON.stringify(e.cn)})` : ""}`
    : `certificate CN ${JSON.stringify(e.cn)}`;
  return `${what} is revoked${e.reason ? `: ${e.reason}` : ""}; issue the agent a new certificate, or lift the revocation (llmgw unrevoke)`;
}
