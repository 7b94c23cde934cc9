/**
 * A connection flood against one gateway process, with honest agents
 * beside it: idle connections of every kind (silent TCP, TLS with and
 * without a client certificate before the HTTP/2 preface, HTTP/2 sessions
 * with and without one after it), a rapid-reset client and slowloris
 * clients (a TLS record and the HTTP/2 preface, a byte at a time), from
 * attacker addresses, while honest agents from an address of their own keep
 * connecting and reporting. Returns what was measured; the caller decides
 * what to assert (tests: liveness only) or print (the benchmark).
 */

import { readFileSync } from "node:fs";
import * as http2 from "node:http2";
import * as net from "node:net";
import * as tls from "node:tls";
import { ShardStatus_State } from "../../src/gen/llmgw/v1/agent_pb.js";
import { TestAgent } from "./agent.js";
import type { TestCerts } from "./certs.js";
import { rapidResetConnection } from "./rapid-reset.js";
import { h100Registration } from "./sample-events.js";

export type IdleKind = "tcp" | "tls-no-cert" | "tls-cert" | "h2-no-cert" | "h2-cert";
export const IDLE_KINDS: IdleKind[] = ["tcp", "tls-no-cert", "tls-cert", "h2-no-cert", "h2-cert"];

export interface FloodOptions {
  /** host:port of the gateway's agent listener (TLS). */
  url: string;
  certs: TestCerts;
  /** Pid of the gateway process, for its RSS. */
  pid: number;
  /** Idle connections opened, spread over the kinds and the attacker addresses. */
  idle: number;
  attackerAddresses: string[];
  honestAddress: string;
  honestAgents: number;
  /** How long the attack (rapid reset, slowloris, honest reports) runs. */
  durationMs: number;
  /** Every connection still open this long after the attack is reported as not closed. */
  settleMs: number;
}

export interface FloodResult {
  idleOpened: number;
  /** Idle connections the gateway closed, and how long after it accepted them (ms), by kind. */
  idleClosedMs: Record<IdleKind, number[]>;
  /** Idle connections still open after the settle time. */
  idleStillOpen: number;
  /** Times the rapid-reset client's session was cut off, and streams it reset. */
  rapidResetCutOffs: number;
  rapidResetStreams: number;
  /** How long each slowloris connection was held (ms). */
  slowlorisHeldMs: number[];
  slowlorisStillOpen: number;
  honestRegistered: number;
  /** From a shard status sent to its ack (ms), every report of every honest agent. */
  honestAckMs: number[];
  honestFailures: string[];
  rssKbBefore: number;
  rssKbPeak: number;
  rssKbAfter: number;
}

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export function rssKb(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? 0);
}

export async function runConnectionFlood(o: FloodOptions): Promise<FloodResult> {
  const { hostname, port: portText } = new URL(o.url);
  const port = Number(portText);
  const evil = o.certs.client("gpu-flood-evil");
  const r: FloodResult = {
    idleOpened: 0,
    idleClosedMs: { tcp: [], "tls-no-cert": [], "tls-cert": [], "h2-no-cert": [], "h2-cert": [] },
    idleStillOpen: 0,
    rapidResetCutOffs: 0,
    rapidResetStreams: 0,
    slowlorisHeldMs: [],
    slowlorisStillOpen: 0,
    honestRegistered: 0,
    honestAckMs: [],
    honestFailures: [],
    rssKbBefore: rssKb(o.pid),
    rssKbPeak: 0,
    rssKbAfter: 0,
  };
  const closers: Array<() => void> = [];
  const pending = new Set<Promise<void>>();
  const track = (p: Promise<void>) => {
    pending.add(p);
    void p.finally(() => pending.delete(p));
  };
  let stop = false;
  const rssTimer = setInterval(() => {
    r.rssKbPeak = Math.max(r.rssKbPeak, rssKb(o.pid));
  }, 100);

  /** Opens one idle connection; resolves once the gateway closed it (recording how long it held). */
  function idle(kind: IdleKind, localAddress: string): void {
    const started = performance.now();
    const tlsOpts = {
      host: hostname,
      port,
      localAddress,
      servername: "localhost",
      ALPNProtocols: ["h2"],
      ca: o.certs.ca,
      ...(kind.endsWith("-cert") && !kind.endsWith("no-cert") ? evil : {}),
    };
    let closeIt: () => void;
    const closed = new Promise<void>((resolve) => {
      const done = () => {
        r.idleClosedMs[kind].push(performance.now() - started);
        resolve();
      };
      if (kind === "tcp") {
        const s = net.connect({ host: hostname, port, localAddress });
        s.on("error", () => {});
        s.resume();
        s.once("close", done);
        closeIt = () => s.destroy();
      } else if (kind.startsWith("tls")) {
        const s = tls.connect(tlsOpts);
        s.on("error", () => {});
        s.resume();
        s.once("close", done);
        closeIt = () => s.destroy();
      } else {
        const s = http2.connect(o.url, { ...tlsOpts, createConnection: () => tls.connect(tlsOpts) });
        s.on("error", () => {});
        s.once("close", done);
        closeIt = () => s.destroy();
      }
    });
    closers.push(() => closeIt());
    r.idleOpened++;
    track(closed);
  }

  /** Opens and resets streams as fast as it can; reconnects each time the gateway cuts it off. */
  async function rapidReset(localAddress: string): Promise<void> {
    const opts = { host: hostname, port, servername: "localhost", ca: o.certs.ca, ...evil };
    while (!stop) {
      r.rapidResetStreams += await rapidResetConnection(
        { ...opts, localAddress } as tls.ConnectionOptions,
        () => stop,
      );
      if (!stop) r.rapidResetCutOffs++;
    }
  }

  /** Sends `bytes` one at a time, every `everyMs` once `ready` fired, until the gateway closes the connection. */
  function slowloris(socket: net.Socket, ready: "connect" | "secureConnect", bytes: Buffer): void {
    const started = performance.now();
    socket.on("error", () => {});
    socket.resume();
    closers.push(() => socket.destroy());
    let timer: NodeJS.Timeout | undefined;
    socket.once(ready, () => {
      let i = 0;
      timer = setInterval(() => {
        if (socket.destroyed || stop) return;
        socket.write(bytes.subarray(i % bytes.length, (i % bytes.length) + 1));
        i++;
      }, 300);
    });
    track(
      new Promise<void>((resolve) =>
        socket.once("close", () => {
          clearInterval(timer);
          r.slowlorisHeldMs.push(performance.now() - started);
          resolve();
        }),
      ),
    );
  }

  function slowlorisClients(localAddress: string): void {
    // A TLS handshake record announced at 16 KiB, then a byte at a time.
    const record = Buffer.concat([Buffer.from([0x16, 0x03, 0x01, 0x40, 0x00]), Buffer.alloc(64, 1)]);
    slowloris(net.connect({ host: hostname, port, localAddress }), "connect", record);
    // TLS done, then the HTTP/2 preface a byte at a time.
    const opts: tls.ConnectionOptions = {
      host: hostname,
      port,
      servername: "localhost",
      ALPNProtocols: ["h2"],
      ca: o.certs.ca,
      ...evil,
    };
    slowloris(tls.connect({ ...opts, localAddress } as tls.ConnectionOptions), "secureConnect", PREFACE);
  }

  /** One honest agent: connects (retrying while refused), then reports until the attack ends. */
  async function honest(i: number): Promise<void> {
    const node = `gpu-flood-ok-${i}`;
    let agent: TestAgent | undefined;
    for (let attempt = 0; !agent && !stop; attempt++) {
      try {
        agent = await TestAgent.connect(
          {
            baseUrl: o.url,
            tls: { ca: o.certs.ca, ...o.certs.client(node) },
            registration: h100Registration(node),
            localAddress: o.honestAddress,
          },
          10_000,
        );
      } catch (err) {
        if (attempt >= 5) {
          r.honestFailures.push(`${node} could not register: ${String(err)}`);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
    if (!agent) return;
    r.honestRegistered++;
    closers.push(() => agent.abort());
    try {
      for (let n = 0; !stop; n++) {
        agent.heartbeat();
        const t = performance.now();
        const seq = agent.shardStatus({
          replicaId: "r-1",
          shardId: `sh-${n}`,
          state: ShardStatus_State.RUNNING,
        });
        await agent.waitForAck(seq, 10_000);
        r.honestAckMs.push(performance.now() - t);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    } catch (err) {
      r.honestFailures.push(`${node}: ${String(err)}`);
    }
  }

  try {
    const attacks: Promise<void>[] = [];
    for (const a of o.attackerAddresses) {
      attacks.push(rapidReset(a));
      slowlorisClients(a);
    }
    // Honest agents join one after another, the first before the idle flood.
    const honestRuns: Promise<void>[] = [];
    const joinEvery = Math.max(100, Math.floor(o.durationMs / (o.honestAgents + 1)));
    const joining = (async () => {
      for (let i = 0; i < o.honestAgents && !stop; i++) {
        honestRuns.push(honest(i));
        await new Promise((resolve) => setTimeout(resolve, joinEvery));
      }
    })();
    for (let i = 0; i < o.idle; i++) {
      const kind = IDLE_KINDS[i % IDLE_KINDS.length] ?? "tcp";
      idle(kind, o.attackerAddresses[i % o.attackerAddresses.length] ?? "127.0.0.1");
      if (i % 50 === 49) await new Promise((resolve) => setImmediate(resolve));
    }
    await new Promise((resolve) => setTimeout(resolve, o.durationMs));
    stop = true;
    await joining;
    await Promise.all([...honestRuns, ...attacks]);
    // What is left open is what the gateway did not close.
    const settled = Promise.all([...pending]);
    await Promise.race([settled, new Promise((resolve) => setTimeout(resolve, o.settleMs))]);
    const closedIdle = IDLE_KINDS.reduce((n, k) => n + r.idleClosedMs[k].length, 0);
    r.idleStillOpen = r.idleOpened - closedIdle;
    r.slowlorisStillOpen = 2 * o.attackerAddresses.length - r.slowlorisHeldMs.length;
    r.rssKbAfter = rssKb(o.pid);
    return r;
  } finally {
    stop = true;
    clearInterval(rssTimer);
    for (const c of closers) c();
  }
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}
