/**
 * Errors of the projection runtime. Callers branch on `code`, never on the
 * message.
 */
export type ProjectionErrorCode =
  /** `waitFor` did not see the sequence in time. */
  | "timeout"
  /** The caller's signal aborted the wait. */
  | "aborted"
  /** The runtime was stopped before the wait was satisfied. */
  | "stopped"
  /** The runtime stopped following the log (a malformed message in "stop" mode, a fold error). */
  | "failed"
  /** The runtime was used the wrong way (started twice, read before start). */
  | "invalid-state";

export class ProjectionError extends Error {
  override readonly name = "ProjectionError";
  constructor(
    readonly code: ProjectionErrorCode,
    message: string,
    opts?: { cause?: unknown },
  ) {
    super(message, opts?.cause === undefined ? undefined : { cause: opts.cause });
  }
}

export function isProjectionError(err: unknown, ...codes: ProjectionErrorCode[]): err is ProjectionError {
  return err instanceof ProjectionError && (codes.length === 0 || codes.includes(err.code));
}
