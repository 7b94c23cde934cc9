/**
 * A small client of the operator API for the CLI and tools. It speaks only
 * HTTP and JSON; a failed call raises ApiCallError with the server's error
 * code, or code "unreachable" when there was no answer.
 */
import type { FieldIssue } from "./catalog/index.js";

export interface ApiClientOptions {
  /** Base URL, e.g. http://127.0.0.1:8080 */
  url: string;
  token?: string;
  /** Sent as X-Llmgw-Operator: who is acting. */
  operator?: string;
  timeoutMs?: number;
}

export class ApiCallError extends Error {
  override readonly name = "ApiCallError";
  constructor(
    /** HTTP status, 0 when the server did not answer. */
    readonly status: number,
    readonly code: string,
    message: string,
    readonly issues: FieldIssue[] = [],
  ) {
    super(message);
  }
}

export interface ApiResponse<T> {
  body: T;
  headers: Headers;
}

export class ApiClient {
  readonly #base: string;
  constructor(readonly opts: ApiClientOptions) {
    this.#base = opts.url.replace(/\/+$/, "");
  }

  async request<T>(
    method: string,
    path: string,
    opts: { body?: string; contentType?: string; headers?: Record<string, string> } = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { accept: "application/json", ...opts.headers };
    if (this.opts.token) headers["authorization"] = `Bearer ${this.opts.token}`;
    if (this.opts.operator) headers["x-llmgw-operator"] = this.opts.operator;
    if (opts.body !== undefined) headers["content-type"] = opts.contentType ?? "application/json";
    let res: Response;
    try {
      res = await fetch(`${this.#base}${path}`, {
        method,
        headers,
        ...(opts.body === undefined ? {} : { body: opts.body }),
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 30_000),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const why = cause?.code ?? cause?.message ?? (err as Error).message;
      throw new ApiCallError(
        0,
        "unreachable",
        `cannot reach the API at ${this.#base} (${why}); is \`llmgw api\` running? (--api or LLMGW_API_URL chooses another)`,
      );
    }
    const text = await res.text();
    let body: unknown;
    try {
      body = text === "" ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (!res.ok) {
      const e = (body as { error?: { code?: string; message?: string; issues?: FieldIssue[] } } | undefined)
        ?.error;
      throw new ApiCallError(
        res.status,
        e?.code ?? `http-${res.status}`,
        e?.message ?? `${method} ${path} answered ${res.status} ${res.statusText}`,
        e?.issues ?? [],
      );
    }
    return { body: body as T, headers: res.headers };
  }

  get<T>(path: string) {
    return this.request<T>("GET", path);
  }
}
