import type { Server } from "node:http";
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import { ConnectionMetrics } from "../connection-guard/index.js";
import { type ReadinessCheck, serveRegistry, TallyHistogram } from "../metrics-endpoint/index.js";

/** The gateway's Prometheus metrics, on a registry of its own (several gateways can share a process). */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly openStreams = new Gauge({
    name: "llmgw_gateway_open_streams",
    help: "Agent streams with an open session on this gateway",
    registers: [this.registry],
  });
  // Agent identity: certificate reloads, revocations, duplicates.
  readonly tlsReloads = new Counter({
    name: "llmgw_gateway_tls_reloads_total",
    help: "Certificate, key and client CA files read again after they changed: in use (ok), or refused and the old ones kept (error)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  // `llmgw logs`: engine output relayed from agents to the API (never into the log).
  readonly engineLogRequests = new Counter({
    name: "llmgw_gateway_engine_log_requests_total",
    help: "Engine-log requests by how they ended: done, not-found, limit, cancelled, failed, busy, not-connected, disconnected, expired",
    labelNames: ["end"] as const,
    registers: [this.registry],
  });
  readonly engineLogBytes = new Counter({
    name: "llmgw_gateway_engine_log_bytes_total",
    help: "Bytes of engine output relayed from agents to the API",
    registers: [this.registry],
  });
  readonly engineLogDropped = new Counter({
    name: "llmgw_gateway_engine_log_dropped_total",
    help: "Engine-log messages dropped: an agent's chunk for no request of its session (stray), an API message that does not parse (invalid)",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly revokedIdentities = new Gauge({
    name: "llmgw_gateway_revoked_identities",
    help: "Entries of the revocation bucket this gateway applies (CNs and certificate serials)",
    registers: [this.registry],
  });
  readonly revocationsApplied = new Counter({
    name: "llmgw_gateway_revocations_applied_total",
    help: "Agents kept out by a revocation: an open stream closed (closed) or a stream refused at registration (refused)",
    labelNames: ["action"] as const,
    registers: [this.registry],
  });
  readonly revocationStateKnown = new Gauge({
    name: "llmgw_gateway_revocation_state_known",
    help: "1 while this gateway knows the revocations in force (the bucket was read and is watched); 0 while it does not, and refuses new sessions",
    registers: [this.registry],
  });
  readonly revocationUnknownRefusals = new Counter({
    name: "llmgw_gateway_revocation_unknown_refusals_total",
    help: "Registrations refused (Unavailable) because the revocation state was not known",
    registers: [this.registry],
  });
  readonly revocationEntriesIgnored = new Counter({
    name: "llmgw_gateway_revocation_entries_ignored_total",
    help: "Revocation bucket entries not applied: a key or value that does not parse, or a value that does not name its key's CN or serial",
    registers: [this.registry],
  });
  readonly duplicateIdentity = new Counter({
    name: "llmgw_gateway_duplicate_identity_total",
    help: "Streams told to back off because another agent process holds a live session of their node, by where that session is (local: this gateway, remote: another)",
    labelNames: ["holder"] as const,
    registers: [this.registry],
  });
  /**
   * Events published since the last collection, by kind: a number added to
   * per event, handed to the counter when it is collected. A prom-client
   * child hashes and checks its labels on every `inc`, and this one is
   * counted for every agent message.
   */
  readonly #published = new Map<string, { n: number }>();
  readonly eventsPublished = new Counter({
    name: "llmgw_gateway_events_published_total",
    help: "Events acknowledged by JetStream, by kind",
    labelNames: ["kind"] as const,
    registers: [this.registry],
    collect: () => {
      for (const [kind, tally] of this.#published) {
        if (tally.n === 0) continue;
        this.eventsPublished.labels(kind).inc(tally.n);
        tally.n = 0;
      }
    },
  });

  /** One more event of `kind` acknowledged by JetStream (`eventsPublished`). */
  published(kind: string): void {
    let tally = this.#published.get(kind);
    if (tally === undefined) {
      tally = { n: 0 };
      this.#published.set(kind, tally);
    }
    tally.n++;
  }
  readonly publishRetries = new Counter({
    name: "llmgw_gateway_publish_retries_total",
    help: "Publishes retried with the same message id after the log did not answer",
    registers: [this.registry],
  });
  /** Observed for every event stored: a tally (prom-client's `observe` cost a few percent per event). */
  readonly publishLatency = new TallyHistogram(
    "llmgw_gateway_publish_latency_seconds",
    "Time from publish to JetStream ack, retries included",
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    this.registry,
  );
  /** Acks since the last collection, counted per stored message (tallied as `#published` is). */
  readonly #acks = { queued: 0, coalesced: 0 };
  readonly acks = new Counter({
    name: "llmgw_gateway_acks_total",
    help: "Acks of stored agent messages: queued for the agent (queued), or folded into a later cumulative ack not yet written (coalesced)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
    collect: () => {
      const tally = this.#acks;
      // Both children exist from the start: a scrape shows 0, not nothing.
      this.acks.labels("queued").inc(tally.queued);
      this.acks.labels("coalesced").inc(tally.coalesced);
      tally.queued = 0;
      tally.coalesced = 0;
    },
  });

  /** An ack queued for the agent (`acks{outcome="queued"}`). */
  ackQueued(): void {
    this.#acks.queued++;
  }

  /** An ack folded into a later cumulative one (`acks{outcome="coalesced"}`). */
  ackCoalesced(): void {
    this.#acks.coalesced++;
  }
  readonly commandsRelayed = new Counter({
    name: "llmgw_gateway_commands_relayed_total",
    help: "Commands from reconciler passes queued to the agent session they address",
    registers: [this.registry],
  });
  readonly commandsDropped = new Counter({
    name: "llmgw_gateway_commands_dropped_total",
    help: "Commands not relayed, by reason (not_held: another gateway holds the session; session_closed, session_closing, queue_full: a session this gateway held, reported in the log as undeliverable)",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly disconnects = new Counter({
    name: "llmgw_gateway_disconnects_total",
    help: "Agent streams ended, by reason",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly eventBudget = new Gauge({
    name: "llmgw_gateway_event_budget",
    help: "The per-session event budget: events a minute (limit=per_minute) and the burst (limit=burst)",
    labelNames: ["limit"] as const,
    registers: [this.registry],
  });
  readonly eventsCoalesced = new Counter({
    name: "llmgw_gateway_events_coalesced_total",
    help: "What a session's heartbeats said that was not written as an event of its own, by kind (usage: merged into the usage event at the end of the usage interval; problem: a new problem past the bound of one interval's event, not recorded)",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  /** Bound once: these are counted per heartbeat. */
  readonly usageCoalesced = this.eventsCoalesced.labels("usage");
  readonly problemsCoalesced = this.eventsCoalesced.labels("problem");
  readonly overBudget = new Counter({
    name: "llmgw_gateway_sessions_over_budget_total",
    help: "Sessions closed because they wrote events faster than the event budget (EVENT_BUDGET)",
    registers: [this.registry],
  });
  readonly byteBudget = new Gauge({
    name: "llmgw_gateway_byte_budget",
    help: "The per-session byte budget: bytes a minute (limit=per_minute) and the burst (limit=burst)",
    labelNames: ["limit"] as const,
    registers: [this.registry],
  });
  readonly overByteBudget = new Counter({
    name: "llmgw_gateway_sessions_over_byte_budget_total",
    help: "Sessions closed because they wrote more bytes than the byte budget (EVENT_BUDGET)",
    registers: [this.registry],
  });
  readonly textTruncated = new Counter({
    name: "llmgw_gateway_text_truncated_total",
    help: "Free-text fields of agent messages cut to their cap with a marker, by field (last_output, error, labels, gpu, fabric, problem, agent_version, running_shard)",
    labelNames: ["field"] as const,
    registers: [this.registry],
  });
  readonly textCap = new Gauge({
    name: "llmgw_gateway_text_cap_chars",
    help: "Characters a free-text field may hold before it is cut: a shard's last output (field=last_output) and every other (field=text)",
    labelNames: ["field"] as const,
    registers: [this.registry],
  });
  readonly reconnectLimit = new Gauge({
    name: "llmgw_gateway_reconnect_limit",
    help: "Registrations one node may make on this gateway: a minute (limit=per_minute) and at once (limit=burst)",
    labelNames: ["limit"] as const,
    registers: [this.registry],
  });
  readonly reconnectsRefused = new Counter({
    name: "llmgw_gateway_reconnects_refused_total",
    help: "Registrations refused because their node registered more often than the reconnect limit (ResourceExhausted, with a Reconnect saying when to retry)",
    registers: [this.registry],
  });
  readonly rejected = new Counter({
    name: "llmgw_gateway_streams_rejected_total",
    help: "Streams refused before a session opened, by Connect code",
    labelNames: ["code"] as const,
    registers: [this.registry],
  });
  readonly streamsServed = new Counter({
    name: "llmgw_gateway_agent_streams_total",
    help: "Agent streams (AgentService.Connect calls) started, by who framed them: direct (binary gRPC or Connect, src/gateway/agent-call) or connect (Connect's handler: gRPC-Web, JSON, compression, a deadline)",
    labelNames: ["path", "protocol"] as const,
    registers: [this.registry],
  });
  /** The agent listener's connection caps, counts and closes (llmgw_gateway_connections_*). */
  readonly connections = new ConnectionMetrics(this.registry, "llmgw_gateway");

  /** Adds the process metrics (CPU, memory, event loop); for a gateway that owns its process. */
  withProcessMetrics(): this {
    collectDefaultMetrics({ register: this.registry });
    return this;
  }
}

/** Serves `GET /metrics`, `/livez` and `/readyz` on a plain HTTP listener. */
export function serveMetrics(
  metrics: GatewayMetrics,
  listen: string,
  ready?: ReadinessCheck,
): Promise<{ url: string; server: Server }> {
  return serveRegistry(metrics.registry, listen, ready);
}
