// The log: JetStream plumbing shared by every process. Everything public is named here.

export { type Appended, type AppendHandler, type AppendOptions, LogAppender } from "./append.js";
export {
  Archive,
  type ArchivedSegment,
  type ArchivedSnapshot,
  type ArchiveExtent,
  type ArchiveObject,
  type ArchiveStore,
  DirectoryArchiveStore,
  decodeSegment,
  defaultArchiveBucket,
  encodeSegment,
  NatsObjectArchiveStore,
  type RawRecord,
  readRawRange,
  type S3ArchiveConfig,
  S3ArchiveStore,
  segmentName,
  snapshotName,
} from "./archive/index.js";
export {
  BUCKET_MAX_CONSUMERS,
  type BucketOptions,
  bucketKeys,
  bucketStreamConfig,
  openBucket,
  weakerSettings,
} from "./buckets.js";
export { connectNats, DEFAULT_NATS_URL, redactUrl } from "./connect.js";
export { ConnectionState } from "./connection-state.js";
export { decodeEvent } from "./decode-event.js";
export { DIRECT_POLL_MS, type DirectReadOptions, readDirectBatches } from "./direct-read.js";
export { isLogError, LogError, type LogErrorCode, logErrorFrom } from "./errors.js";
export { type ArchiveLocation, Log, type OpenLogOptions, openLog } from "./log.js";
export { collectPasses, type PassRange, type RecordedPass, readPasses } from "./passes.js";
export { type LogRecord, type ReadOptions, readEventBatches, readEvents, streamTimeMs } from "./reader.js";
export { DEFAULT_STREAM_CONFIG, ensureStream, type LogStreamConfig } from "./stream.js";
export {
  familySubject,
  KIND_SUBJECTS,
  kindsOfFamily,
  type RefusedEvent,
  SUBJECT_WRITERS,
  type SubjectFamily,
  type SubjectRoute,
  subjectFor,
  subjectRefusal,
} from "./subject-kinds.js";
export {
  DEFAULT_PREFIX,
  DEFAULT_STREAM,
  Subjects,
} from "./subjects.js";
export { AppendWindow } from "./window.js";
