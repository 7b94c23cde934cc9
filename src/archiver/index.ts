// The archiver: seals the log into the archive and enforces the stream's retention.
export { Archiver, type ArchiverOptions, type ArchiverStatus } from "./archiver.js";
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
