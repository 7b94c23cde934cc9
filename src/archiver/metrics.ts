/**
 * Prometheus metrics of the archiver: where the archive ends, where the
 * stream starts, what is still open, and what it wrote and purged. An
 * archive end that stops moving while the stream's last sequence moves is
 * the alert: the stream then grows past its retention.
 */
import { Counter, Gauge, type Registry } from "prom-client";
import type { ArchiverStatus } from "./archiver.js";

export interface ArchiverMetrics {
  segments: Counter<"result">;
  archivedBytes: Counter;
  purges: Counter;
  failures: Counter;
}

/** `status` is read at each scrape. */
export function archiverMetrics(
  registry: Registry,
  status: () => ArchiverStatus | undefined,
): ArchiverMetrics {
  const registers = [registry];
  new Gauge({
    name: "llmgw_archive_last_seq",
    help: "Last log sequence in the archive",
    registers,
    collect() {
      this.set(status()?.archivedSeq ?? 0);
    },
  });
  new Gauge({
    name: "llmgw_archive_stream_first_seq",
    help: "First sequence the log stream holds after the archiver's last purge",
    registers,
    collect() {
      this.set(status()?.streamFirstSeq ?? 0);
    },
  });
  new Gauge({
    name: "llmgw_archive_open_events",
    help: "Events read from the stream and not yet in a sealed segment",
    registers,
    collect() {
      this.set(status()?.openEvents ?? 0);
    },
  });
  return {
    segments: new Counter({
      name: "llmgw_archive_segments_total",
      help: "Segments sealed: written, or found already archived (after a restart)",
      labelNames: ["result"],
      registers,
    }),
    archivedBytes: new Counter({
      name: "llmgw_archive_bytes_total",
      help: "Bytes of messages archived",
      registers,
    }),
    purges: new Counter({ name: "llmgw_archive_purges_total", help: "Purges of the log stream", registers }),
    failures: new Counter({
      name: "llmgw_archive_failures_total",
      help: "Seals or purges that failed (retried on the next tick)",
      registers,
    }),
  };
}
