/**
 * What the S3 client's failures mean for the archive, in the log layer's
 * codes (errors.ts) and in words that say what to check: the bucket, the
 * credentials, the endpoint. Branches on the client's exported exception
 * classes, the HTTP status it reports and Node's socket error codes, never
 * on message text.
 */
import { LogError } from "../errors.js";

/** The S3 client's module, loaded when an S3 archive is first used (s3-store.ts). */
export type S3Sdk = typeof import("@aws-sdk/client-s3");

/** Where the store is and how it is reached, for the messages. */
export interface S3Place {
  /** "s3://bucket/prefix". */
  url: string;
  bucket: string;
  endpoint: string | undefined;
}

/** Socket and resolver error codes of an endpoint that cannot be reached (for now, or at all). */
const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
  "ECONNABORTED",
  "UND_ERR_SOCKET",
]);
/** How far down a chain of causes to look. */
const CAUSE_DEPTH = 4;

function socketCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < CAUSE_DEPTH && e instanceof Error; depth++, e = e.cause) {
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === "string" && UNREACHABLE.has(code)) return code;
    // The client's own timeouts (its request handler's connection and socket timeouts).
    if (e.name === "TimeoutError") return "timeout";
  }
  return undefined;
}

/** The LogError of a failed S3 call made `doing` something with the store at `place`. */
export function s3Error(sdk: S3Sdk, err: unknown, place: S3Place, doing: string): LogError {
  if (err instanceof LogError) return err;
  const { NoSuchBucket, NotFound, S3ServiceException } = sdk;
  const prefix = `${doing} in ${place.url}: `;
  if (err instanceof NoSuchBucket || err instanceof NotFound) {
    return new LogError(
      "not-found",
      `${prefix}the bucket "${place.bucket}" does not exist${place.endpoint ? ` at ${place.endpoint}` : ""}: create it (llmgw never creates buckets), or name another in --archive s3://BUCKET/PREFIX`,
      { cause: err },
    );
  }
  if (err instanceof S3ServiceException) {
    const status = err.$metadata.httpStatusCode ?? 0;
    if (status === 401 || status === 403) {
      return new LogError(
        "permission-denied",
        `${prefix}S3 refused the credentials (${err.name}, HTTP ${status}): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or the role), and that they may list, get and put objects under that prefix`,
        { cause: err },
      );
    }
    if (status === 429 || status >= 500 || err.$retryable) {
      return new LogError(
        "unavailable",
        `${prefix}S3 is unavailable (${err.name}, HTTP ${status}); retry later`,
        {
          cause: err,
        },
      );
    }
    return new LogError("internal", `${prefix}S3 answered ${err.name} (HTTP ${status}): ${err.message}`, {
      cause: err,
    });
  }
  const unreachable = socketCode(err);
  if (unreachable) {
    const endpoint = place.endpoint ?? "of the region";
    return new LogError(
      "unavailable",
      `${prefix}the S3 endpoint ${endpoint} cannot be reached (${unreachable}): check --archive-s3-endpoint${place.endpoint ? " (a self-hosted store such as MinIO or Ceph usually also needs --archive-s3-path-style)" : " and --archive-s3-region"}`,
      { cause: err },
    );
  }
  return new LogError("internal", `${prefix}${err instanceof Error ? err.message : String(err)}`, {
    cause: err,
  });
}
