/**
 * A minimal but real agent for tests: one Connect stream over HTTP/2 (TLS
 * with a client certificate, or h2c), registration first, then heartbeats,
 * shard status and command results; it records everything the control plane
 * sends and can answer commands by itself.
 */
import assert from "node:assert/strict";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
  Http2SessionManager,
} from "@connectrpc/connect-node";
import { PushQueue } from "../../src/async/push-queue.js";
import {
  type AgentMessage,
  AgentMessageSchema,
  AgentService,
  type CommandResultSchema,
  type ControlMessage,
  type HeartbeatSchema,
  type RegisterSchema,
  ShardStatus_State,
  type ShardStatusSchema,
} from "../../src/gen/llmgw/v1/agent_pb.js";
import { AckTracker } from "../../src/sim/index.js";

export type Protocol = "connect" | "grpc" | "grpc-web";
export type RegisterInit = MessageInitShape<typeof RegisterSchema>;

/** A command as the agent receives it. */
export type ReceivedCommand = Extract<ControlMessage["msg"], { case: "start" | "stop" | "drain" }>;

export interface TestAgentOptions {
  /** The gateway's URL (https://… or http://… for insecure-dev). */
  baseUrl: string;
  protocol?: Protocol;
  /** The CA to trust, and the agent's certificate (leave cert/key out to present none). */
  tls?: { ca: string; cert?: string; key?: string };
  registration: RegisterInit;
  /**
   * Answer every start / stop / drain with a CommandResult: `true` answers
   * ok, a function decides per command.
   */
  autoAnswer?: boolean | ((cmd: ReceivedCommand) => { ok: boolean; error?: string });
  /**
   * For protocol tests: send this as the first message instead of the
   * registration, or nothing at all with `null`.
   */
  firstMessage?: MessageInitShape<typeof AgentMessageSchema> | null;
  /** Connect from this local address (e.g. 127.0.0.2, to be a source address of its own). */
  localAddress?: string;
}

export class TestAgent {
  /** Everything received, in order. */
  readonly received: ControlMessage[] = [];
  /** Resolves when the stream ends: undefined when it ended OK, else the error. */
  readonly ended: Promise<ConnectError | undefined>;
  /** Messages sent so far; the n-th message's per-session sequence is n. */
  sent = 0;
  readonly #out = new PushQueue<AgentMessage>();
  /** The kind of each message sent, by its per-session sequence. */
  readonly #sentKinds: Array<AgentMessage["msg"]["case"]> = [];
  readonly #abort = new AbortController();
  readonly #sessions: Http2SessionManager;
  readonly #waiters = new Set<() => void>();
  #end: ConnectError | undefined | null = null;
  #paused: Promise<void> | undefined;

  private constructor(readonly opts: TestAgentOptions) {
    const nodeOptions = {
      ...(opts.tls ? { ca: opts.tls.ca, cert: opts.tls.cert, key: opts.tls.key } : {}),
      ...(opts.localAddress ? { localAddress: opts.localAddress } : {}),
    };
    this.#sessions = new Http2SessionManager(opts.baseUrl, {}, nodeOptions);
    const client = createClient(
      AgentService,
      transportFor(opts.protocol ?? "connect", opts.baseUrl, this.#sessions),
    );
    this.ended = (async () => {
      try {
        for await (const m of client.connect(this.#out, { signal: this.#abort.signal })) {
          this.received.push(m);
          this.#answer(m);
          this.#notify();
          if (this.#paused) await Promise.race([this.#paused, aborted(this.#abort.signal)]);
        }
        this.#end = undefined;
      } catch (err) {
        this.#end = ConnectError.from(err);
      } finally {
        this.#notify();
      }
      return this.#end ?? undefined;
    })();
  }

  /** Opens the stream and sends the registration without waiting for anything. */
  static open(opts: TestAgentOptions): TestAgent {
    const a = new TestAgent(opts);
    if (opts.firstMessage === undefined) a.send({ msg: { case: "register", value: opts.registration } });
    else if (opts.firstMessage !== null) a.send(opts.firstMessage);
    return a;
  }

  /** Opens the stream, registers, and resolves once the registration is acked (rejects with the stream's error). */
  static async connect(opts: TestAgentOptions, timeoutMs = 20_000): Promise<TestAgent> {
    const a = TestAgent.open(opts);
    try {
      await a.waitFor((m) => m.msg.case === "ack" && m.msg.value.messageId === "register", {
        timeoutMs,
        what: "the registration ack",
      });
    } catch (err) {
      a.abort();
      throw err;
    }
    return a;
  }

  get nodeId(): string {
    return this.opts.registration.nodeId ?? "";
  }

  /** The session the gateway named in the registration's ack ("" before it). */
  get sessionId(): string {
    for (const m of this.received)
      if (m.msg.case === "ack" && m.msg.value.messageId === "register") return m.msg.value.sessionId;
    return "";
  }

  /** The agent registered with cumulative_acks: an ack of message n stands for every earlier one too. */
  get cumulativeAcks(): boolean {
    return this.opts.registration.cumulativeAcks === true;
  }

  /**
   * What this agent saw acknowledged, as the invariant checker takes it (the
   * registration is message 1). A cumulative ack is expanded into the
   * messages it stands for that the gateway acknowledges (not heartbeats).
   */
  acked(): Array<{ nodeId: string; sessionId: string; messageId: string }> {
    const sessionId = this.sessionId;
    if (!sessionId) return [];
    // Replayed from the record: every ack covers only messages sent before it.
    const tracker = new AckTracker(this.cumulativeAcks);
    for (let n = 1; n <= this.sent; n++) tracker.record(this.#sentKinds[n]);
    return this.received.flatMap((m) =>
      m.msg.case === "ack" && m.msg.value.ok
        ? tracker
            .acked(m.msg.value.messageId)
            .map((n) => ({ nodeId: this.nodeId, sessionId, messageId: String(n) }))
        : [],
    );
  }

  /** Whether the stream has ended. */
  get done(): boolean {
    return this.#end !== null;
  }

  /** Sends one message; returns its per-session sequence. */
  send(init: MessageInitShape<typeof AgentMessageSchema>): number {
    this.#out.push(create(AgentMessageSchema, init));
    this.#sentKinds[++this.sent] = init.msg?.case;
    return this.sent;
  }

  heartbeat(init: MessageInitShape<typeof HeartbeatSchema> = {}): number {
    return this.send({ msg: { case: "heartbeat", value: init } });
  }

  shardStatus(init: MessageInitShape<typeof ShardStatusSchema>): number {
    return this.send({ msg: { case: "shard", value: init } });
  }

  commandResult(init: MessageInitShape<typeof CommandResultSchema>): number {
    return this.send({ msg: { case: "result", value: init } });
  }

  register(init: RegisterInit): number {
    return this.send({ msg: { case: "register", value: init } });
  }

  /** Commands received so far. */
  commands(): ReceivedCommand[] {
    return this.received.map((m) => m.msg).filter((m): m is ReceivedCommand => isCommand(m));
  }

  /**
   * Resolves with the first received message matching `pred` (already
   * received or to come). Rejects with the stream's error if it ends first,
   * or after `timeoutMs`.
   */
  async waitFor(
    pred: (m: ControlMessage) => boolean,
    opts: { timeoutMs?: number; what?: string } = {},
  ): Promise<ControlMessage> {
    const timeoutMs = opts.timeoutMs ?? 20_000;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.received.find(pred);
      if (hit) return hit;
      if (this.#end !== null) {
        throw (
          this.#end ?? new Error(`${this.nodeId}: the stream ended OK before ${opts.what ?? "the message"}`)
        );
      }
      if (Date.now() >= deadline) {
        throw new Error(`${this.nodeId}: no ${opts.what ?? "matching message"} within ${timeoutMs} ms`);
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.max(0, deadline - Date.now()));
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.#waiters.add(done);
      });
    }
  }

  /**
   * Waits for the ack of the message with sequence `seq` (it is durably in
   * the log then): its own, or with cumulative acks one of a later message.
   */
  waitForAck(seq: number, timeoutMs?: number): Promise<ControlMessage> {
    const covers = (id: string) =>
      id === String(seq) || (this.cumulativeAcks && id !== "register" && Number(id) >= seq);
    return this.waitFor((m) => m.msg.case === "ack" && covers(m.msg.value.messageId), {
      timeoutMs,
      what: `the ack of message ${seq}`,
    });
  }

  /** Ends the stream from this side (half-close) and waits for the gateway to end it. */
  async close(): Promise<ConnectError | undefined> {
    this.#out.end();
    const r = await this.ended;
    this.#sessions.abort();
    return r;
  }

  /**
   * Stops taking messages off the stream (an agent stuck elsewhere): HTTP/2
   * flow control then pushes back on the gateway.
   */
  pauseReading(): void {
    this.#paused = new Promise<void>(() => {});
  }

  /** Drops the stream and the connection at once. */
  abort(): void {
    this.#abort.abort();
    this.#out.end();
    this.#sessions.abort();
  }

  #answer(m: ControlMessage): void {
    const a = this.opts.autoAnswer;
    if (!a || !isCommand(m.msg)) return;
    const r = a === true ? { ok: true } : a(m.msg);
    this.commandResult({ commandId: m.msg.value.commandId, ok: r.ok, error: r.error ?? "" });
  }

  #notify(): void {
    const w = [...this.#waiters];
    this.#waiters.clear();
    for (const f of w) f();
  }
}

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

function isCommand(m: ControlMessage["msg"]): m is ReceivedCommand {
  return m.case === "start" || m.case === "stop" || m.case === "drain";
}

function transportFor(protocol: Protocol, baseUrl: string, sessionManager: Http2SessionManager): Transport {
  switch (protocol) {
    case "connect":
      return createConnectTransport({ baseUrl, httpVersion: "2", sessionManager });
    case "grpc":
      return createGrpcTransport({ baseUrl, sessionManager });
    case "grpc-web":
      return createGrpcWebTransport({ baseUrl, httpVersion: "2", sessionManager });
  }
}

/** Asserts-friendly: the Connect code name of an error (or "OK"). */
export function codeOf(err: unknown): string {
  if (err === undefined) return "OK";
  return Code[ConnectError.from(err).code] ?? "unknown";
}

/**
 * A well-behaved agent registers with `registration`, reports a running
 * shard, gets its ack and closes with OK: the gateway still serves others.
 */
export async function assertServed(
  opts: Pick<TestAgentOptions, "baseUrl" | "tls" | "registration">,
): Promise<void> {
  const a = await TestAgent.connect(opts);
  try {
    await a.waitForAck(a.shardStatus({ shardId: "s", state: ShardStatus_State.RUNNING }));
    assert.equal(codeOf(await a.close()), "OK");
  } finally {
    a.abort();
  }
}
