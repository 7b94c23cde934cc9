// biome-ignore-all lint/suspicious/noExplicitAny: response bodies are loosely typed JSON, checked by the assertions
/**
 * The web UI end to end, as an operator uses it, against a running fleet with
 * every real part: nats-server, a gateway, a `llmgw reconciler` process, the
 * operator API (serving the built UI) and a simulated fleet over Connect;
 * Debian's Chromium driven by playwright-core. One browser for every step; a
 * screenshot of each step goes to test-artifacts/ui/.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import type { SimFleet } from "../../src/sim/index.js";
import { type NatsServer, startServer, tempDir } from "../harness/nats.js";
import { EventFactory, h100Node } from "../support/fleet-events.js";
import { startApiFixture, TOKEN } from "../support/operator-api.js";
import { h100Profile, type Stack, stackFleet, startStack } from "../support/stack.js";

const ARTIFACTS = new URL("../../test-artifacts/ui/", import.meta.url).pathname;

// Two models that fit, and one that no node can hold (16 GPUs in one shard on 8-GPU nodes).
const CATALOG = {
  models: [
    { name: "llama-3.1-8b", replicas: 3, profiles: [h100Profile("tp1", 1)] },
    { name: "llama-3.3-70b", replicas: 2, profiles: [h100Profile("tp4", 4)] },
    { name: "giant-1t", replicas: 1, profiles: [h100Profile("tp16", 16)] },
  ],
};
const RUNNING_GPUS = 3 * 1 + 2 * 4;

function chromiumPath(): string {
  const candidates = [process.env["LLMGW_CHROMIUM"], "/usr/bin/chromium", "/usr/bin/chromium-browser"];
  const found = candidates.find((c): c is string => !!c && existsSync(c));
  if (!found) throw new Error("no Chromium found: run scripts/ensure-chromium (or set LLMGW_CHROMIUM)");
  return found;
}

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

describe("web UI in Chromium against a running fleet", () => {
  let server: NatsServer & { close(): Promise<void> };
  let stack: Stack | undefined;
  let fleet: SimFleet | undefined;
  let context: BrowserContext | undefined;
  let page: Page;
  let url: string;
  const api = async (path: string, init?: RequestInit): Promise<any> => {
    const res = await fetch(`${url}${path}`, init);
    const body = (await res.json()) as any;
    if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
    return body;
  };
  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
  const runningCells = () => page.locator('.gpu[data-state="running"]').count();
  const shownSeq = async () => Number(await page.locator(".app").getAttribute("data-seq"));
  /**
   * Each test starts from the live fleet page with every running shard shown,
   * whatever the test before it left on screen (the fleet behind it is shared).
   */
  async function openLiveFleet(): Promise<void> {
    await page.goto(url);
    await page.locator("[data-node]").first().waitFor();
    await until("every running shard's GPUs on the map", async () =>
      (await runningCells()) === RUNNING_GPUS ? true : undefined,
    );
  }

  async function startFleet(): Promise<void> {
    server = await startServer();
    stack = await startStack(server.url, {
      name: "ui",
      reconciler: { policy: "binpack", commandTimeoutMs: 5000, suspectAfterMs: 10_000, lostAfterMs: 20_000 },
    });
    url = stack.api.url;
    fleet = stackFleet(stack.gw.url, { nodes: 4, gpusPerNode: 8, seed: 5 });
    await fleet.start();
    await until("four connected nodes", async () =>
      (await api("/v1/nodes")).nodes.filter((n: any) => n.liveness === "connected").length === 4
        ? true
        : undefined,
    );
    await api("/v1/catalog", {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(CATALOG),
    });
  }

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const [, ctx] = await Promise.all([
      startFleet(),
      chromium.launchPersistentContext(tempDir("chromium"), {
        executablePath: chromiumPath(),
        headless: true,
        viewport: { width: 1500, height: 820 },
        args: [
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
        ],
      }),
    ]);
    context = ctx;
    page = context.pages()[0] ?? (await context.newPage());
    await until(
      "5 replicas running and the giant one pending",
      async () => {
        const r = await api("/v1/replicas");
        const phases = r.replicas.map((x: any) => x.phase).sort();
        return JSON.stringify(phases) === JSON.stringify(["pending", ...Array(5).fill("running")])
          ? r
          : undefined;
      },
      60_000,
    );
  });

  after(async () => {
    await context?.close().catch(() => {});
    await fleet?.stop().catch(() => {});
    await stack?.close();
    await server?.close();
  });

  it("shows the nodes and the running replicas on the map", async () => {
    await openLiveFleet();
    assert.equal(await page.locator("[data-node]").count(), 4);
    // The fabric header rows: the simulated fleet's InfiniBand pods.
    assert.ok((await page.locator(".fabric-row").count()) >= 1);
    assert.match((await page.locator("[data-testid=summary]").textContent()) ?? "", /5 running .* 1 pending/);
    await shot("01-fleet-map");
  });

  it("dragging the slider to an earlier sequence shows the fleet as it was: fewer replicas running", async () => {
    await openLiveFleet();
    const slider = page.locator("#slider");
    const box = await slider.boundingBox();
    assert.ok(box);
    const liveSeq = await shownSeq();
    const y = box.y + box.height / 2;
    await page.mouse.move(box.x + box.width - 4, y);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.5, y, { steps: 8 });
    await page.mouse.move(box.x + box.width * 0.25, y, { steps: 8 });
    await page.mouse.up();
    const seq = await until("the map to show an earlier sequence", async () => {
      const s = await shownSeq();
      return s < liveSeq * 0.5 ? s : undefined;
    });
    const thenRunning = (await api(`/v1/fleet?at=${seq}`)).replicas.filter((r: any) => r.phase === "running");
    assert.ok(thenRunning.length < 5, `${thenRunning.length} replicas running at #${seq}`);
    await until("the map to match the fleet at that sequence", async () =>
      (await runningCells()) < RUNNING_GPUS ? true : undefined,
    );
    assert.equal(await page.locator(".app").getAttribute("data-live"), "false");
    await shot("02-slider-earlier");
    // The same position by time: the last event stored at or before it.
    const [ev] = (await api(`/v1/events?from=${seq}&to=${seq}`)).events;
    const when = new Date(ev.timeMs).toISOString();
    const atTime = (await api(`/v1/fleet?time=${when}`)).seq;
    await page.locator("[data-testid=live]").click();
    await page.locator("[data-testid=go-to-time]").fill(when);
    await page.locator("[data-testid=go-to-time]").press("Enter");
    await until(`the map at ${when} (#${atTime})`, async () =>
      (await shownSeq()) === atTime ? true : undefined,
    );
    await page.locator("[data-testid=live]").click();
    await until("live again", async () => ((await runningCells()) === RUNNING_GPUS ? true : undefined));
  });

  it("clicking the pending replica shows the reasons nodes were ruled out", async () => {
    await openLiveFleet();
    await page.locator('[data-replica-id][data-phase="pending"]').first().click();
    const reasons = page.locator("[data-testid=pending-reasons]");
    await reasons.waitFor();
    const text = (await reasons.textContent()) ?? "";
    assert.match(text, /0\/4 nodes fit/);
    assert.match(text, /4\s*too few/i);
    await shot("03-pending-reasons");
  });

  it("clicking a running replica's GPU shows the decision that placed it, with the runners-up and their scores", async () => {
    await openLiveFleet();
    await page.locator('.gpu[data-state="running"][data-replica*="70b"]').first().click();
    const placement = page.locator("[data-testid=placement]");
    await placement.waitFor();
    const text = (await placement.textContent()) ?? "";
    assert.match(text, /policy binpack/);
    assert.match(text, /chosen\s*node-\d/);
    assert.ok(
      (await placement.locator("tbody tr").count()) >= 2,
      "the chosen nodes and at least one runner-up",
    );
    await page.locator("[data-testid=replica-history] li").nth(2).waitFor();
    await shot("04-placement");
  });

  it("a drain started from the UI, once confirmed, ends with the node's replicas moved", async () => {
    await openLiveFleet();
    const nodes = (await api("/v1/nodes")).nodes as any[];
    const target = nodes.find((n) => n.replicaIds.length > 0);
    assert.ok(target, "a node with replicas");
    const moved = target.replicaIds as string[];
    try {
      await page.locator(`[data-node="${target.nodeId}"] .node-name`).click();
      await page.locator('[data-testid=node-panel] [data-action="drain"]').click();
      const dialog = page.locator("[data-testid=confirm-dialog]");
      await dialog.waitFor();
      await dialog.locator("input").fill("e2e test");
      await shot("05-drain-confirm");
      await dialog.locator("[data-testid=confirm]").click();
      await until(
        `${target.nodeId} drained and its replicas replaced and running elsewhere`,
        async () => {
          const [n, r] = await Promise.all([api(`/v1/nodes/${target.nodeId}`), api("/v1/replicas")]);
          const running = r.replicas.filter((x: any) => x.phase === "running");
          const ok =
            n.node.draining &&
            n.node.gpusUsed === 0 &&
            running.length === 5 &&
            running.every((x: any) => !x.nodeIds.includes(target.nodeId)) &&
            moved.every((id) => !r.replicas.some((x: any) => x.replicaId === id));
          return ok ? true : undefined;
        },
        60_000,
      );
      const row = page.locator(`[data-node="${target.nodeId}"]`);
      await until("the map to show the drained node empty", async () =>
        (await row.locator('.gpu[data-state="free"]').count()) === 8 ? true : undefined,
      );
      assert.equal(await row.locator('[data-badge="draining"]').count(), 1);
      await until("every replica running again on the map", async () =>
        (await runningCells()) === RUNNING_GPUS ? true : undefined,
      );
      // The node panel says what the drain waits on; once done, that nothing is left.
      const drainState = page.locator("[data-testid=node-panel] [data-testid=drain-state]");
      await until("the node panel to show the drain done", async () =>
        /draining: nothing left on the node/.test((await drainState.textContent()) ?? "") ? true : undefined,
      );
      await shot("06-drained");
    } finally {
      // The tests after this one get the node back: uncordoned, it is placeable again.
      await api(`/v1/nodes/${target.nodeId}/uncordon`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ reason: "the drain test is over" }),
      });
      await until(`${target.nodeId} neither draining nor cordoned again`, async () => {
        const { node } = await api(`/v1/nodes/${target.nodeId}`);
        return !node.draining && !node.cordoned ? true : undefined;
      });
    }
  });

  it("what-if with another policy lists the decisions that would differ and marks their nodes", async () => {
    await openLiveFleet();
    await page.locator('[data-tab="what-if"]').click();
    await page.locator('select[name="policy"]').selectOption("spread");
    await page.locator("[data-testid=run-what-if]").click();
    const result = page.locator("[data-testid=what-if-result]");
    await result.waitFor({ timeout: 30_000 });
    await until("a differing decision", async () =>
      (await result.locator(".difference").count()) > 0 ? true : undefined,
    );
    assert.ok(
      (await page.locator(".node-row.whatif").count()) > 0,
      "nodes of differing decisions are marked",
    );
    await shot("07-what-if");
  });

  it("asks for the token of an API that needs one, and stays usable with 1,000 nodes (only the rows in view are in the page)", async () => {
    // A second API on its own stream, with a token, and 1,000 nodes in 25 InfiniBand pods.
    const fx = await startApiFixture(server.url);
    try {
      const f = new EventFactory("big");
      const events = [f.gatewayStarted("gw-1")];
      for (let i = 0; i < 1000; i++) {
        const id = `node-${String(i).padStart(4, "0")}`;
        events.push(
          f.sessionOpened(id, `s-${i}`, "gw-1", h100Node(id, { pod: `ib-pod-${Math.floor(i / 40)}` })),
        );
      }
      // Pipelined appends: the log orders them; the last ack covers every one.
      const acks = await Promise.all(events.map((e) => fx.log.append(e)));
      await fx.api.runtime.waitFor(Math.max(...acks.map((a) => a.seq)));
      await page.goto(fx.api.url);
      const field = page.locator('.token input[name="token"]');
      await page.locator(".token input.need").waitFor();
      assert.equal(await page.locator("[data-node]").count(), 0);
      await field.fill(TOKEN);
      await field.press("Enter");
      await page.locator('[data-node="node-0000"]').waitFor();
      assert.match(
        (await page.locator("[data-testid=summary]").textContent()) ?? "",
        /1000 nodes · 0\/8000 GPUs/,
      );
      const rendered = await page.locator("[data-node]").count();
      assert.ok(rendered < 60, `${rendered} node rows in the page`);
      await page.locator("[data-testid=fleet-map]").evaluate((el) => {
        el.scrollTop = el.scrollHeight;
      });
      await page.locator('[data-node="node-0999"]').waitFor();
      assert.ok((await page.locator("[data-node]").count()) < 60);
      await shot("08-thousand-nodes");
    } finally {
      await fx.close();
    }
  });
});
