/**
 * A share of fan-in's real node agents in a process of its own: a SimFleet
 * (`NodeAgent` on simulated GPUs and engines) for the node ids it is given,
 * over mTLS with certificates it issues itself from the CA files named. Run
 * by node-agents.ts with an IPC channel; fan-in's agents are split over
 * several of these so the benchmark's process holds only the gateway side's
 * measurement and its event loop is not starved by thousands of agents.
 *
 * IPC in: one `AgentsChildStart`, later `{ stop: true }`.
 * IPC out: `{ registered }` (its agents registered so far) every second and
 * when they all are, `{ commands: [[commandId, atMs], ...] }` as commands
 * are answered (atMs: wall-clock milliseconds, performance.timeOrigin +
 * performance.now(), comparable across processes of one machine), and
 * `{ rssMb }` when asked with `{ rss: true }`.
 */
import { readFileSync } from "node:fs";
import { SimFleet } from "../../src/sim/index.js";
import { issueNodeCerts } from "./node-certs.js";

export interface AgentsChildStart {
  url: string;
  nodeIds: string[];
  heartbeatMs: number;
  /** Agents this child has connecting at once: the next starts as soon as one registered. */
  window: number;
  caFile: string;
  caKeyFile: string;
  /** The agents' state directories go under this one (the parent removes it: a child may be killed). */
  stateDir: string;
}

type Inbound = { start: AgentsChildStart } | { stop: true } | { rss: true };

let fleet: SimFleet | undefined;
/** Answered commands not yet sent, flushed on the next tick (a burst is a few messages, not thousands). */
let pending: Array<[string, number]> = [];
let flushQueued = false;

function send(m: unknown): void {
  if (process.connected) process.send?.(m);
}

async function start(s: AgentsChildStart): Promise<void> {
  const certs = issueNodeCerts(readFileSync(s.caFile), readFileSync(s.caKeyFile), s.nodeIds);
  const ca = readFileSync(s.caFile);
  fleet = new SimFleet(
    {
      gateways: [s.url],
      nodes: 0,
      nodeIds: s.nodeIds,
      heartbeatMs: s.heartbeatMs,
      nodesPerFabric: 0,
      // A connect of thousands of mTLS streams on a busy machine: an agent that timed out tries again, not at once.
      ackTimeoutMs: 60_000,
      reconnectMinMs: 1_000,
      reconnectMaxMs: 30_000,
      seed: 1,
    },
    {
      identities: (id) => {
        const c = certs.get(id);
        return c && { ca, cert: c.cert, key: c.key };
      },
      stateDir: s.stateDir,
    },
  );
  const registered = new Set<string>();
  fleet.on((e) => {
    if (e.type === "command") {
      pending.push([e.commandId, performance.timeOrigin + performance.now()]);
      if (!flushQueued) {
        flushQueued = true;
        setImmediate(() => {
          flushQueued = false;
          send({ commands: pending });
          pending = [];
        });
      }
    } else if (e.type === "registered") registered.add(e.nodeId);
  });
  const ticker = setInterval(() => send({ registered: registered.size }), 1_000);
  await fleet.start({ window: s.window });
  await new Promise<void>((resolve) => {
    const check = setInterval(() => {
      if (registered.size < s.nodeIds.length) return;
      clearInterval(check);
      resolve();
    }, 250);
  });
  clearInterval(ticker);
  send({ registered: registered.size });
}

process.on("message", (m: Inbound) => {
  if ("start" in m)
    start(m.start).catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
  else if ("rss" in m) send({ rssMb: process.memoryUsage().rss / 2 ** 20 });
  else if ("stop" in m)
    void (fleet?.stop() ?? Promise.resolve()).finally(() => {
      process.exit(0);
    });
});
// The parent gone: nothing left to measure.
process.on("disconnect", () => process.exit(0));
