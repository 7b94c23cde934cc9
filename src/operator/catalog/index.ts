// The catalog file: schema, validation, conversion. Everything public is named here.
export { formatDuration, parseDuration } from "./duration.js";
export { formatMemory, parseMemory } from "./memory.js";
export { catalogFileFrom, toProtoCatalog } from "./proto.js";
export {
  type CatalogFile,
  type CatalogFileInput,
  type CatalogModel,
  type CatalogProfile,
  catalogFileSchema,
  ENGINE_NAME_PATTERN,
  NAME_PATTERN,
  replicaCount,
} from "./schema.js";
export {
  type CatalogFormat,
  type CatalogResult,
  type FieldIssue,
  formatPath,
  parseCatalogText,
  validateCatalog,
} from "./validate.js";
