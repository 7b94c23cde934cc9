/**
 * The agent's engine log files, on a real directory: rotation by size with
 * kept files, the newest bytes kept in each; the tail across a rotation;
 * reading on after a rotation truncated the file; the removed shards' logs
 * deleted after their retention, the live ones and other files never; and
 * the agent's log requests bounded in chunk size and total.
 */
import assert from "node:assert/strict";
import {
  appendFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import {
  deleteRemovedLogs,
  EngineSupervisor,
  engineLogsSchema,
  enginesSchema,
  FileEngineOutput,
  rotateIfOver,
  shardLogPath,
} from "../../src/agent/engine/index.js";
import { type EngineLogChunkInit, EngineLogRequests } from "../../src/agent/engine-log-requests.js";
import { printable } from "../../src/engine-logs/index.js";
import { EngineLogChunk_End } from "../../src/gen/llmgw/v1/agent_pb.js";

const lines = (from: number, to: number) => {
  let s = "";
  for (let i = from; i <= to; i++) s += `line ${i}\n`;
  return s;
};

describe("engine log files", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "llmgw-engine-logs-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("rotates past the cap: the newest bytes to .1, older ones shifted, at most keepFiles kept", async () => {
    const cfg = engineLogsSchema.parse({ maxFileBytes: 4096, keepFiles: 2 });
    const path = join(dir, "s-1.log");
    writeFileSync(path, "x".repeat(4096));
    assert.equal(await rotateIfOver(path, cfg), false, "at the cap: not over it");
    for (const round of [1, 2, 3]) {
      writeFileSync(path, `${String(round).repeat(5000)}`);
      assert.equal(await rotateIfOver(path, cfg), true);
      assert.equal(readFileSync(path, "utf8"), "", "the current file truncated");
    }
    assert.deepEqual(readdirSync(dir).sort(), ["s-1.log", "s-1.log.1", "s-1.log.2"]);
    assert.equal(readFileSync(`${path}.1`, "utf8"), "3".repeat(4096), "the newest 4096 bytes of round 3");
    assert.equal(readFileSync(`${path}.2`, "utf8"), "2".repeat(4096));
    const none = engineLogsSchema.parse({ maxFileBytes: 4096, keepFiles: 0 });
    writeFileSync(path, "y".repeat(5000));
    assert.equal(await rotateIfOver(path, none), true);
    assert.equal(readFileSync(path, "utf8"), "");
  });

  it("tails the last lines, across the rotated file when the current one holds fewer, within maxBytes", async () => {
    const path = join(dir, "s-1.log");
    writeFileSync(`${path}.1`, lines(1, 100));
    writeFileSync(path, lines(101, 102));
    const out = new FileEngineOutput(path);
    const t = await out.tail(5, 1 << 20);
    assert.equal(Buffer.from(t.data).toString(), lines(98, 102));
    assert.equal(t.position, Buffer.byteLength(lines(101, 102)));
    const small = await out.tail(100, 20);
    assert.equal(Buffer.from(small.data).toString(), "line 101\nline 102\n", "whole lines within 20 bytes");
    assert.equal((await out.tail(0, 1000)).data.length, 0);
  });

  it("reads on from a position, and from the start after a rotation truncated the file", async () => {
    const path = join(dir, "s-1.log");
    writeFileSync(path, lines(1, 3));
    const out = new FileEngineOutput(path);
    const t = await out.tail(1, 1000);
    appendFileSync(path, lines(4, 5));
    const next = await out.readFrom(t.position, 1000);
    assert.equal(Buffer.from(next.data).toString(), lines(4, 5));
    const capped = await out.readFrom(t.position, 4);
    assert.equal(capped.data.length, 4, "at most maxBytes");
    writeFileSync(path, lines(6, 6));
    const after = await out.readFrom(next.position, 1000);
    assert.equal(Buffer.from(after.data).toString(), lines(6, 6));
  });

  it("deletes a removed shard's logs after the retention, never a live shard's or a file that is no log", async () => {
    for (const f of ["old.log", "old.log.1", "live.log", "recent.log", "notes.txt"])
      writeFileSync(join(dir, f), "x");
    const hourAgo = new Date(Date.now() - 3_600_000);
    for (const f of ["old.log", "old.log.1", "live.log", "notes.txt"])
      utimesSync(join(dir, f), hourAgo, hourAgo);
    const gone = await deleteRemovedLogs(dir, new Set(["live"]), 60_000, Date.now());
    assert.deepEqual(gone, ["old"]);
    assert.deepEqual(readdirSync(dir).sort(), ["live.log", "notes.txt", "recent.log"]);
  });

  it("puts no shard id that breaks the id rule into a path", () => {
    assert.equal(shardLogPath(dir, "../etc"), undefined);
    assert.equal(shardLogPath(dir, ".hidden"), undefined);
    assert.equal(shardLogPath(dir, "a/b"), undefined);
    assert.equal(shardLogPath(dir, "qwen-1-s0"), join(dir, "qwen-1-s0.log"));
  });
});

describe("the supervisor's logs", () => {
  it("deletes a removed shard's logs past their retention once it runs, and reads a kept one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-engine-logs-"));
    const logs = join(dir, "logs");
    const s = new EngineSupervisor({
      engines: enginesSchema.parse({
        default: { command: ["true"], ready: { http: "http://127.0.0.1:{port}/health" } },
      }),
      stateDir: dir,
      advertiseHost: "127.0.0.1",
      onEvent: () => {},
      logs: engineLogsSchema.parse({ checkIntervalMs: 50, removedRetentionMs: 60_000 }),
    });
    try {
      await s.adopt();
      writeFileSync(join(logs, "gone-1.log"), "old output\n");
      writeFileSync(join(logs, "gone-1.log.1"), "older output\n");
      writeFileSync(join(logs, "kept-1.log"), "recent output\n");
      const hourAgo = new Date(Date.now() - 3_600_000);
      for (const f of ["gone-1.log", "gone-1.log.1"]) utimesSync(join(logs, f), hourAgo, hourAgo);
      // The first sweep runs at the first check after the start.
      const deadline = Date.now() + 5000;
      // A sweep deletes a shard's files one after the other: wait for all of them.
      while (readdirSync(logs).some((f) => f.startsWith("gone-1.")) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(readdirSync(logs).sort(), ["kept-1.log"]);
      assert.equal(s.output("gone-1"), undefined, "nothing to read once deleted");
      const kept = await s.output("kept-1")?.tail(10, 1000);
      assert.equal(
        Buffer.from(kept?.data ?? []).toString(),
        "recent output\n",
        "a removed shard's log is read within its retention",
      );
      assert.equal(s.output("../etc/passwd"), undefined);
    } finally {
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the agent's log requests", () => {
  it("sends a tail in bounded chunks, ends a follow at its total, and says NOT_FOUND and BUSY", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-engine-logs-"));
    try {
      const path = join(dir, "s-1.log");
      writeFileSync(path, "a".repeat(9_999) + "\n");
      const sent: EngineLogChunkInit[] = [];
      const reqs = new EngineLogRequests({
        source: { output: (id) => (id === "s-1" ? new FileEngineOutput(path) : undefined) },
        send: (c) => {
          sent.push(c);
          return true;
        },
        queued: () => 0,
        limits: { chunkBytes: 1000, totalBytes: 15_000, pollMs: 20, maxRequests: 1 },
      });
      reqs.handle({ requestId: "r1", shardId: "s-1", tailLines: 10, follow: true, cancel: false } as never);
      reqs.handle({ requestId: "r2", shardId: "s-1", tailLines: 1, follow: false, cancel: false } as never);
      reqs.handle({ requestId: "r3", shardId: "nope", tailLines: 1, follow: false, cancel: false } as never);
      await new Promise((r) => setTimeout(r, 50));
      appendFileSync(path, "b".repeat(20_000));
      const deadline = Date.now() + 5000;
      while (!sent.some((c) => c.requestId === "r1" && c.end) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      const r1 = sent.filter((c) => c.requestId === "r1");
      assert.ok(
        r1.every((c) => (c.data?.length ?? 0) <= 1000),
        "chunks of at most chunkBytes",
      );
      const total = r1.reduce((n, c) => n + (c.data?.length ?? 0), 0);
      assert.equal(total, 15_000, "exactly the total, then the end");
      assert.equal(r1.at(-1)?.end, EngineLogChunk_End.LIMIT);
      assert.equal(sent.find((c) => c.requestId === "r2")?.end, EngineLogChunk_End.BUSY);
      assert.equal(sent.find((c) => c.requestId === "r3")?.end, EngineLogChunk_End.NOT_FOUND);
      assert.equal(reqs.size, 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("printable", () => {
  it("removes terminal escapes and replaces other control characters, keeping text, tabs and newlines", () => {
    assert.equal(printable("\x1b[31mred\x1b[0m\tok\r\n"), "red\tok\n");
    assert.equal(printable("title\x1b]0;pwned\x07 bell\x07 nul\x00"), "title bell\uFFFD nul\uFFFD");
  });
});
