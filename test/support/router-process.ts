// biome-ignore-all lint/suspicious/noExplicitAny: JSON bodies, checked by the callers' assertions
/**
 * `llmgw router` as tests run it: a child process on a port it picks, with
 * the helpers its tests need (its health, its metrics, an OpenAI request).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { LLMGW_BIN } from "./cli.js";

export interface RouterProc {
  url: string;
  proc: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
  healthz(): Promise<{ status: number; body: any }>;
  /** One sample of a metric (labels as written in the exposition, e.g. `model="chat"`), 0 when absent. */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  close(): Promise<void>;
}

export async function startRouter(args: string[], env: NodeJS.ProcessEnv = {}): Promise<RouterProc> {
  const proc = spawn(process.execPath, [LLMGW_BIN, "router", "--listen", "127.0.0.1:0", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let out = "";
  proc.stdout!.on("data", (b) => (out += b));
  proc.stderr!.on("data", (b) => (out += b));
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  const deadline = Date.now() + 20_000;
  let url: string | undefined;
  while (!url) {
    url = /"url":"(http:\/\/127\.0\.0\.1:\d+)"[^\n]*"router listening"/.exec(out)?.[1];
    if (url) break;
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`llmgw router did not start:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const base = url;
  return {
    url: base,
    proc,
    output: () => out,
    exited,
    async healthz() {
      const res = await fetch(`${base}/healthz`);
      return { status: res.status, body: await res.json() };
    },
    async metric(name, labels = {}) {
      const text = await (await fetch(`${base}/metrics`)).text();
      const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
      let sum = 0;
      for (const line of text.split("\n")) {
        if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
        if (want.every((w) => line.includes(w))) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
      }
      return sum;
    },
    async close() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill("SIGTERM");
        const t = setTimeout(() => proc.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(t);
      }
    },
  };
}

export interface Answer {
  status: number;
  replica: string;
  body: string;
  /** When the request was sent and when its answer ended (performance.now()). */
  startMs: number;
  endMs: number;
  error?: string;
}

/** One chat completion through the router; a network error is an answer with status 0. */
export async function chat(url: string, model: string, extra: Record<string, unknown> = {}): Promise<Answer> {
  const startMs = performance.now();
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, messages: [{ role: "user", content: "hello" }], ...extra }),
    });
    const body = await res.text();
    return {
      status: res.status,
      replica: res.headers.get("x-llmgw-replica") ?? "",
      body,
      startMs,
      endMs: performance.now(),
    };
  } catch (err) {
    return { status: 0, replica: "", body: "", startMs, endMs: performance.now(), error: String(err) };
  }
}
