/**
 * The archiver (`llmgw archiver`): copies sealed segments of the log, in
 * sequence order, into the archive, writes a fleet snapshot at each segment
 * boundary, and is the only one that removes anything from the stream: it
 * purges archived segments past the retention (the stream itself has no age
 * or size limit), so a slow or stopped archiver holds history back instead
 * of losing it.
 *
 * It keeps no state of its own: where it stands is the archive's last
 * sequence, and its fold restarts from the snapshot there. A segment is
 * stored whole or not at all and is named by its first sequence, so an
 * archiver killed mid-segment and restarted reads that segment's events
 * again from the stream and archives them once.
 */
import { DeliverPolicy, type JsMsg } from "@nats-io/jetstream";
import { type Logger, pino } from "pino";
import {
  type Archive,
  decodeEvent,
  type Log,
  LogError,
  logErrorFrom,
  type RawRecord,
  streamTimeMs,
} from "../log/index.js";
import { canonicalJson, type FleetState, fleetProjection } from "../projections/index.js";
import { ArchiveSnapshotStore, encodeArchiveSnapshot } from "../projections/runtime/index.js";
import type { ArchiverMetrics } from "./metrics.js";
import { purgeBound, type RetentionConfig, sealDue } from "./retention.js";

/** The longest wait between tries while the store or the stream keeps failing. */
const MAX_RETRY_WAIT_MS = 30_000;

export interface ArchiverOptions extends RetentionConfig {
  logger?: Logger;
  /** How often sealing by age and the retention are checked (default 1 s). */
  tickMs?: number;
  metrics?: ArchiverMetrics;
}

export interface ArchiverStatus {
  /** Last archived sequence (0: none). */
  archivedSeq: number;
  /** Events read but not yet in a sealed segment. */
  openEvents: number;
  segmentsWritten: number;
  /** The stream's first sequence after the last purge. */
  streamFirstSeq: number;
}

export class Archiver {
  readonly #log: Log;
  readonly #archive: Archive;
  readonly #cfg: ArchiverOptions;
  readonly #logger: Logger;
  #state: FleetState = fleetProjection.initialState();
  #foldedSeq = 0;
  #foldedTimeMs = 0;
  /** The next sequence to read from the stream. */
  #next = 1;
  #open: RawRecord[] = [];
  #openBytes = 0;
  #sealing: Promise<void> | undefined;
  /** Failed seals or purges in a row, and when the next may be tried (backing off). */
  #failedInARow = 0;
  #retryAt = 0;
  #failure: Error | undefined;
  readonly status: ArchiverStatus = { archivedSeq: 0, openEvents: 0, segmentsWritten: 0, streamFirstSeq: 0 };

  constructor(log: Log, archive: Archive, cfg: ArchiverOptions) {
    this.#log = log;
    this.#archive = archive;
    this.#cfg = cfg;
    this.#logger = cfg.logger ?? pino({ level: "silent" });
  }

  /** Archives until `signal` aborts; rejects when history could not be kept (a gap in the stream). */
  async run(signal: AbortSignal): Promise<void> {
    await this.#resume();
    const timer = setInterval(() => void this.#tick(), this.#cfg.tickMs ?? 1_000);
    try {
      while (!signal.aborted && !this.#failure) {
        try {
          await this.#follow(signal);
        } catch (err) {
          if (signal.aborted || this.#failure) break;
          this.#logger.warn(
            { err: String(err), next: this.#next },
            `reading the stream failed; reading again from ${this.#next}`,
          );
          await new Promise((r) => setTimeout(r, 1_000));
        }
      }
    } finally {
      clearInterval(timer);
      await this.#sealing;
    }
    if (this.#failure) throw this.#failure;
  }

  /** Seals and archives what is open now, whatever its age (for a clean stop and for backups). */
  async flush(): Promise<void> {
    await this.#sealing;
    await this.#seal(true);
  }

  /** Where the archive ends, and the fold up to there, from the archive alone. */
  async #resume(): Promise<void> {
    const extent = await this.#archive.extent({ fresh: true });
    const end = extent?.lastSeq ?? 0;
    const snap = extent
      ? await new ArchiveSnapshotStore<FleetState>(this.#archive).loadNewest(fleetProjection, { maxSeq: end })
      : undefined;
    if (snap) {
      this.#state = fleetProjection.revive(snap.state);
      this.#foldedSeq = snap.meta.seq;
      this.#foldedTimeMs = snap.meta.timeMs;
    }
    if (extent && this.#foldedSeq < end) {
      // Killed after a segment was stored and before its snapshot was: fold it again from the archive.
      for await (const batch of this.#archive.read({ fromSeq: this.#foldedSeq + 1, untilSeq: end }))
        this.#fold(batch);
      await this.#writeSnapshot();
    }
    const bounds = await this.#log.bounds();
    this.#next = extent ? end + 1 : Math.max(1, bounds.firstSeq);
    if (!extent && bounds.firstSeq > 1) {
      this.#logger.warn(
        { firstSeq: bounds.firstSeq },
        `the stream starts at ${bounds.firstSeq}: what came before was removed before it was archived; archiving from there`,
      );
    }
    this.status.archivedSeq = end;
    this.status.streamFirstSeq = bounds.firstSeq;
    this.#logger.info(
      { archivedSeq: end, next: this.#next, where: this.#archive.where },
      `archiving from sequence ${this.#next}`,
    );
  }

  /**
   * Reads the stream a batch at a time, asking for the next batch only
   * while less than two segments are open: a backlog larger than memory
   * (an archiver started late, or a slow store) waits in the stream.
   */
  async #follow(signal: AbortSignal): Promise<void> {
    const consumer = await this.#log.js.consumers.get(this.#log.stream, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: this.#next,
    });
    while (!signal.aborted && !this.#failure) {
      if (this.#openBytes >= 2 * this.#cfg.segmentBytes) {
        await (this.#sealing ?? this.#tick());
        // The store refused the seal: wait before trying again rather than spin.
        if (this.#openBytes >= 2 * this.#cfg.segmentBytes) await new Promise((r) => setTimeout(r, 1_000));
        continue;
      }
      const batch = await consumer.fetch({ max_messages: 10_000, expires: 2_000 });
      for await (const m of batch) {
        this.#take(m);
        if (this.#failure) return;
      }
      if (this.#openBytes >= this.#cfg.segmentBytes && !this.#sealing) void this.#tick();
    }
  }

  #take(m: JsMsg): void {
    if (m.seq < this.#next) return;
    if (m.seq > this.#next) {
      this.#failure = new LogError(
        "internal",
        `the stream lost sequences ${this.#next}…${m.seq - 1} before they were archived (something other than the archiver removes messages: a max_age or max_bytes on stream ${this.#log.stream}?); the archive must stay one run, so the archiver stops`,
      );
      return;
    }
    this.#open.push({ seq: m.seq, timeMs: streamTimeMs(m), subject: m.subject, data: m.data });
    this.#openBytes += m.data.length + m.subject.length;
    this.#next = m.seq + 1;
    this.status.openEvents = this.#open.length;
  }

  async #tick(): Promise<void> {
    if (this.#sealing || Date.now() < this.#retryAt) return;
    this.#sealing = (async () => {
      try {
        await this.#seal(false);
        await this.#purge();
        this.#failedInARow = 0;
        this.#retryAt = 0;
      } catch (err) {
        // The store or the stream refused: back off (1 s, 2 s, 4 s… up to 30 s). The stream keeps
        // holding everything not archived, so waiting loses nothing.
        this.#failedInARow++;
        const waitMs = Math.min(MAX_RETRY_WAIT_MS, 1_000 * 2 ** (this.#failedInARow - 1));
        this.#retryAt = Date.now() + waitMs;
        this.#cfg.metrics?.failures.inc();
        this.#logger.warn(
          { err: String(err), failedInARow: this.#failedInARow, retryInMs: waitMs },
          `archiving failed, trying again in ${waitMs / 1000} s: ${String(err)}`,
        );
      }
    })();
    try {
      await this.#sealing;
    } finally {
      this.#sealing = undefined;
    }
  }

  /** Seals segments while one is due (or, with `all`, whatever is open). */
  async #seal(all: boolean): Promise<void> {
    for (;;) {
      const oldest = this.#open[0];
      if (!oldest) return;
      if (!all && !sealDue({ bytes: this.#openBytes, oldestTimeMs: oldest.timeMs }, this.#cfg, Date.now()))
        return;
      let bytes = 0;
      let count = 0;
      while (count < this.#open.length && (count === 0 || bytes < this.#cfg.segmentBytes)) {
        const r = this.#open[count] as RawRecord;
        bytes += r.data.length + r.subject.length;
        count++;
      }
      const records = this.#open.slice(0, count);
      const { segment, written } = await this.#archive.writeSegment(records);
      this.#fold(records);
      await this.#writeSnapshot();
      this.#open.splice(0, count);
      this.#openBytes -= bytes;
      this.status.openEvents = this.#open.length;
      this.status.archivedSeq = segment.lastSeq;
      if (written) this.status.segmentsWritten++;
      this.#cfg.metrics?.segments.inc({ result: written ? "written" : "existing" });
      if (written) this.#cfg.metrics?.archivedBytes.inc(bytes);
      this.#logger.info(
        { firstSeq: segment.firstSeq, lastSeq: segment.lastSeq, bytes, written },
        written
          ? `archived sequences ${segment.firstSeq}…${segment.lastSeq}`
          : `sequences ${segment.firstSeq}…${segment.lastSeq} were archived already`,
      );
    }
  }

  #fold(records: readonly RawRecord[]): void {
    for (const r of records) {
      if (r.seq <= this.#foldedSeq) continue;
      try {
        const event = decodeEvent(r.data, r.seq);
        this.#state = fleetProjection.evolve(this.#state, event, { seq: r.seq, timeMs: r.timeMs });
      } catch (err) {
        // A malformed message is archived as it is; the fold passes over it like the runtime does.
        this.#logger.warn(
          { seq: r.seq, err: String(err) },
          `passing over sequence ${r.seq} in the snapshot fold`,
        );
      }
      this.#foldedSeq = r.seq;
      this.#foldedTimeMs = r.timeMs;
    }
  }

  async #writeSnapshot(): Promise<void> {
    if (this.#foldedSeq === 0) return;
    const at = { seq: this.#foldedSeq, timeMs: this.#foldedTimeMs };
    const bytes = await encodeArchiveSnapshot(fleetProjection, at, canonicalJson(this.#state), Date.now());
    await this.#archive.writeSnapshot(at, bytes);
  }

  /** Purges archived segments past the retention from the stream. */
  async #purge(): Promise<void> {
    if (this.#cfg.maxAgeMs <= 0 && this.#cfg.maxBytes <= 0) return;
    const stream = await this.#log.bounds();
    const segments = await this.#archive.segments();
    const keepFrom = purgeBound(segments, stream, this.#cfg, Date.now());
    if (keepFrom <= stream.firstSeq) return;
    try {
      await this.#log.jsm.streams.purge(this.#log.stream, { seq: keepFrom });
    } catch (err) {
      throw logErrorFrom(err, `purging stream ${this.#log.stream} below ${keepFrom}`);
    }
    this.status.streamFirstSeq = keepFrom;
    this.#cfg.metrics?.purges.inc();
    this.#logger.info(
      { keepFrom },
      `the stream now starts at ${keepFrom}; what came before is in the archive`,
    );
  }
}
