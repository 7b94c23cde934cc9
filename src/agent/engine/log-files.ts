/**
 * Engines' log files under `<stateDir>/logs`: `<shard>.log`, the engine's
 * stdout and stderr (opened by the engine in append mode, so it outlives
 * the agent), and `<shard>.log.1` … `.N`, older output, `.1` the newest.
 *
 * Rotation copies and truncates: the engine keeps its file descriptor
 * (it is not the agent's child after an agent restart, and cannot be told
 * to reopen), and its appends land at the start of the truncated file.
 * What it writes between the copy and the truncation is lost; a rotated
 * file keeps at most `maxFileBytes` (the newest), so a shard's files stay
 * within `(keepFiles + 1) × maxFileBytes` plus what the engine writes in
 * one check interval.
 */
import { createReadStream, createWriteStream } from "node:fs";
import { open, readdir, rename, rm, stat, truncate } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { EngineOutput, OutputRead } from "./engine-output.js";
import type { EngineLogsConfig } from "./log-config.js";
import { idProblem } from "./shard-id.js";

/** A shard's current log file; undefined when the id may not name a file. */
export function shardLogPath(logsDir: string, shardId: string): string | undefined {
  return idProblem("shard id", shardId) === undefined ? join(logsDir, `${shardId}.log`) : undefined;
}

/** `<shard>.log` or `<shard>.log.<n>`: the shard id, or undefined for any other name. */
export function shardOfLogFile(name: string): string | undefined {
  const m = /^(.+)\.log(?:\.\d{1,3})?$/.exec(name);
  if (!m || idProblem("shard id", m[1]!) !== undefined) return undefined;
  return m[1];
}

/**
 * Rotates `path` if it is larger than the cap: `.N-1` → `.N` … `.1` →
 * `.2`, the newest `maxFileBytes` of the file → `.1`, the file truncated.
 * True when it rotated.
 */
export async function rotateIfOver(path: string, cfg: EngineLogsConfig): Promise<boolean> {
  let size: number;
  try {
    size = (await stat(path)).size;
  } catch {
    return false;
  }
  if (size <= cfg.maxFileBytes) return false;
  if (cfg.keepFiles > 0) {
    await rm(`${path}.${cfg.keepFiles}`, { force: true });
    for (let n = cfg.keepFiles - 1; n >= 1; n--) {
      await rename(`${path}.${n}`, `${path}.${n + 1}`).catch(() => {});
    }
    const start = Math.max(0, size - cfg.maxFileBytes);
    await pipeline(
      createReadStream(path, { start, end: size - 1 }),
      createWriteStream(`${path}.1`, { mode: 0o600 }),
    );
  }
  await truncate(path, 0);
  return true;
}

/**
 * Deletes the log files of shards not in `live` whose last write is older
 * than `retainMs`. Returns the shards whose files went.
 */
export async function deleteRemovedLogs(
  logsDir: string,
  live: ReadonlySet<string>,
  retainMs: number,
  nowMs: number,
): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(logsDir);
  } catch {
    return [];
  }
  const removed = new Set<string>();
  for (const name of names) {
    const shard = shardOfLogFile(name);
    if (shard === undefined || live.has(shard)) continue;
    const path = join(logsDir, name);
    try {
      if (nowMs - (await stat(path)).mtimeMs < retainMs) continue;
      await rm(path, { force: true });
      removed.add(shard);
    } catch {
      // Gone meanwhile.
    }
  }
  return [...removed];
}

/** Bytes held by the files of `logsDir` (for tests and operators). */
export async function logsDirBytes(logsDir: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(logsDir)) {
    total += (await stat(join(logsDir, name)).catch(() => ({ size: 0 }))).size;
  }
  return total;
}

/** A shard's output as its log files hold it. */
export class FileEngineOutput implements EngineOutput {
  constructor(readonly path: string) {}

  /**
   * The last lines of the current file, and of the rotated ones before it
   * (`.1`, `.2` …) while the current one holds fewer than `lines` (just
   * after a rotation it holds almost nothing).
   */
  async tail(lines: number, maxBytes: number): Promise<OutputRead> {
    const size = (await stat(this.path)).size;
    if (lines === 0) return { data: new Uint8Array(0), position: size };
    const parts: Buffer[] = [];
    let want = lines;
    let room = maxBytes;
    for (let n = 0; want > 0 && room > 0 && n <= 100; n++) {
      const part = await tailOf(
        n === 0 ? this.path : `${this.path}.${n}`,
        want,
        room,
        n === 0 ? size : undefined,
      );
      if (part === undefined) break;
      // Older files give whole lines only: a line cut at the front of what fits is left out.
      if (n > 0 && part.partial) break;
      parts.unshift(part.data);
      want -= part.lines;
      room -= part.data.length;
    }
    return { data: Buffer.concat(parts), position: size };
  }

  async readFrom(position: number, maxBytes: number): Promise<OutputRead> {
    const f = await open(this.path, "r");
    try {
      const { size } = await f.stat();
      // Smaller than where we were: rotated (truncated) meanwhile; go on from its start.
      const from = size < position ? 0 : position;
      const length = Math.min(size - from, maxBytes);
      if (length <= 0) return { data: new Uint8Array(0), position: from };
      const buf = Buffer.alloc(length);
      const { bytesRead } = await f.read(buf, 0, length, from);
      return { data: buf.subarray(0, bytesRead), position: from + bytesRead };
    } finally {
      await f.close();
    }
  }
}

/**
 * Keeps a logs directory in bounds: rotates the live shards' logs every
 * check interval and deletes removed shards' logs after their retention
 * (checked every minute at most).
 */
export class EngineLogKeeper {
  #timer: NodeJS.Timeout | undefined;
  #busy = false;
  #lastSweepMs = 0;

  constructor(
    private readonly o: {
      dir: string;
      config: EngineLogsConfig;
      /** The shards whose logs are live (running or stopping). */
      live: () => ReadonlySet<string>;
      onRotated?: (shardId: string) => void;
      onDeleted?: (shardIds: string[]) => void;
      onError?: (err: unknown) => void;
    },
  ) {}

  start(): void {
    this.#timer ??= setInterval(() => void this.check(), this.o.config.checkIntervalMs);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One round: rotations, and the retention sweep when a minute (or the retention) has passed. */
  async check(nowMs = Date.now()): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      const live = this.o.live();
      for (const shardId of live) {
        const path = shardLogPath(this.o.dir, shardId);
        if (path && (await rotateIfOver(path, this.o.config))) this.o.onRotated?.(shardId);
      }
      const sweepEvery = Math.min(60_000, Math.max(this.o.config.removedRetentionMs, 1000));
      if (nowMs - this.#lastSweepMs >= sweepEvery) {
        this.#lastSweepMs = nowMs;
        const gone = await deleteRemovedLogs(this.o.dir, live, this.o.config.removedRetentionMs, nowMs);
        if (gone.length > 0) this.o.onDeleted?.(gone);
      }
    } catch (err) {
      this.o.onError?.(err);
    } finally {
      this.#busy = false;
    }
  }
}

/**
 * The last `lines` lines of one file (at most `maxBytes`, from a line's
 * start where they fit), read up to `size` (default: its size now); with
 * how many lines that is. Undefined when there is no such file.
 */
async function tailOf(
  path: string,
  lines: number,
  maxBytes: number,
  size?: number,
): Promise<{ data: Buffer; lines: number; partial: boolean } | undefined> {
  let f: Awaited<ReturnType<typeof open>>;
  try {
    f = await open(path, "r");
  } catch {
    return undefined;
  }
  try {
    const end = size ?? (await f.stat()).size;
    const length = Math.min(end, maxBytes + 1);
    const buf = Buffer.alloc(length);
    const { bytesRead } = await f.read(buf, 0, length, end - length);
    const got = buf.subarray(0, bytesRead);
    // Back from the end: `lines` line breaks (a final one ends the last line, it starts none).
    let at = got.length;
    if (at > 0 && got[at - 1] === 0x0a) at--;
    let found = 0;
    let from = 0;
    for (let i = at - 1; i >= 0; i--) {
      if (got[i] === 0x0a && ++found === lines) {
        from = i + 1;
        break;
      }
    }
    // Fewer breaks than lines: the whole (read) file, its first line included.
    const counted = found === lines ? lines : found + (at > 0 ? 1 : 0);
    // More than maxBytes of it: the newest maxBytes (from the next whole line, if any).
    let partial = false;
    if (got.length - from > maxBytes) {
      from = got.length - maxBytes;
      const nl = got.indexOf(0x0a, from - 1);
      if (nl >= 0 && nl < got.length - 1) from = nl + 1;
      else partial = nl !== from - 1;
    }
    return { data: got.subarray(from), lines: counted, partial };
  } finally {
    await f.close();
  }
}
