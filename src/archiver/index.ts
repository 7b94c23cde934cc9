// The archiver: seals the log into the archive and enforces the stream's retention.
export { Archiver, type ArchiverOptions, type ArchiverStatus } from "./archiver.js";
export {
  type BackupManifest,
  backupLog,
  MANIFEST,
  readManifest,
  restoreLog,
  targetHolds,
} from "./backup.js";
export { BundleFileReader, BundleFileWriter } from "./bundle-file.js";
export { type ArchiverMetrics, archiverMetrics } from "./metrics.js";
export {
  DEFAULT_SEGMENT_BYTES,
  parseRetentionAge,
  parseSize,
  purgeBound,
  type RetentionConfig,
  SEAL_FRACTION,
  sealAfterFor,
  sealDue,
} from "./retention.js";
