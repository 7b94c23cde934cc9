// The log's archive: sealed segments of the stream and snapshots at their boundaries.
export {
  Archive,
  type ArchivedSegment,
  type ArchivedSnapshot,
  type ArchiveExtent,
  type ArchiveReadOptions,
} from "./archive.js";
export { DirectoryArchiveStore } from "./directory-store.js";
export {
  parseSegmentName,
  parseSnapshotName,
  type SegmentName,
  type SnapshotName,
  segmentName,
  snapshotName,
} from "./names.js";
export { defaultArchiveBucket, NatsObjectArchiveStore } from "./object-store.js";
export { readRawRange } from "./raw-read.js";
export { readAcrossArchive, type StreamSide } from "./read-across.js";
export { type S3ArchiveConfig, S3ArchiveStore } from "./s3-store.js";
export { decodeSegment, encodeSegment, type RawRecord } from "./segment.js";
export type { ArchiveObject, ArchiveStore } from "./store.js";
export { subjectMatches } from "./subject-match.js";
