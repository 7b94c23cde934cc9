/**
 * Real node agents for fan-in, split over child processes
 * (node-agents-child.ts): each child runs a SimFleet for its share of the
 * node ids, so the benchmark's process keeps only the measurement, and its
 * event loop times what the gateway does, not its own starvation.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Child, spawnScript, until } from "../../test/harness/proc.js";
import type { AgentsChildStart } from "./node-agents-child.js";

export interface NodeAgentChildrenOptions {
  url: string;
  nodeIds: string[];
  children: number;
  heartbeatMs: number;
  /** Agents connecting at once across all the children (the next as soon as one registered). */
  window: number;
  caFile: string;
  caKeyFile: string;
  onCommand: (commandId: string, atMs: number) => void;
  progress: (m: string) => void;
}

export interface NodeAgentChildren {
  /** The children's RSS, summed. */
  rssMb(): Promise<number>;
  stop(): Promise<void>;
}

type Outbound = { registered: number } | { commands: Array<[string, number]> } | { rssMb: number };

/** Starts the children and resolves once every agent registered (or throws, naming the children's last lines). */
export async function startNodeAgentChildren(o: NodeAgentChildrenOptions): Promise<NodeAgentChildren> {
  const k = Math.max(1, Math.min(o.children, o.nodeIds.length));
  const children: Child[] = [];
  const registered: number[] = Array(k).fill(0);
  const rssWaiters: Array<(mb: number) => void> = [];
  // The agents' state directories (engine records and logs), removed here: a child may not live to.
  const stateRoot = mkdtempSync(join(tmpdir(), "llmgw-bench-agents-"));
  const stop = async () => {
    for (const c of children) if (c.proc.connected) c.proc.send({ stop: true });
    await Promise.all(children.map((c) => c.stop("SIGTERM", 15_000)));
    rmSync(stateRoot, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < k; i++) {
      const share = o.nodeIds.filter((_, j) => j % k === i);
      const child = spawnScript(new URL("./node-agents-child.ts", import.meta.url).pathname, []);
      children.push(child);
      child.proc.on("message", (m: Outbound) => {
        if ("registered" in m) registered[i] = m.registered;
        else if ("commands" in m) for (const [id, at] of m.commands) o.onCommand(id, at);
        else if ("rssMb" in m) rssWaiters.shift()?.(m.rssMb);
      });
      const start: AgentsChildStart = {
        url: o.url,
        nodeIds: share,
        heartbeatMs: o.heartbeatMs,
        window: Math.max(1, Math.floor(o.window / k)),
        caFile: o.caFile,
        caKeyFile: o.caKeyFile,
        stateDir: join(stateRoot, `child-${i}`),
      };
      child.proc.send({ start });
    }
    const t0 = performance.now();
    const n = o.nodeIds.length;
    await until(
      () => {
        const dead = children.find((c) => c.proc.exitCode !== null);
        if (dead) throw new Error(`an agents' child exited ${dead.proc.exitCode}:\n${dead.output()}`);
        const sum = registered.reduce((a, b) => a + b, 0);
        o.progress(
          `${sum}/${n} registered in ${k} processes (${((performance.now() - t0) / 1000).toFixed(0)} s)`,
        );
        return sum >= n ? true : undefined;
      },
      // A connect of thousands of mTLS agents on a busy machine takes minutes.
      Math.max(120_000, n * 300),
      `${n} node agents registered`,
      1_000,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    async rssMb() {
      const each = children.map(
        (c) =>
          new Promise<number>((resolve) => {
            rssWaiters.push(resolve);
            c.proc.send({ rss: true });
          }),
      );
      return (await Promise.all(each)).reduce((a, b) => a + b, 0);
    },
    stop,
  };
}
