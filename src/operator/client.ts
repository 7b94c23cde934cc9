/**
 * A small client of the operator API for the CLI and tools. It speaks only
 * HTTP and JSON; a failed call raises ApiCallError with the server's error
 * code, or code "unreachable" when there was no answer.
 */
import type { FieldIssue } from "./catalog/index.js";

export interface ApiClientOptions {
  /** Base URL, e.g. http://127.0.0.1:8080 */
  url: string;
  /** The bearer token; the API records its name as the operator of every write. */
  token?: string;
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

  /**
   * Follows a server-sent event stream: yields each event's name and parsed
   * data until the server ends it. No timeout: a follow lasts until the
   * caller stops reading or `signal` aborts.
   */
  async *follow<T>(path: string, signal?: AbortSignal): AsyncGenerator<{ event: string; data: T }> {
    const headers: Record<string, string> = { accept: "text/event-stream" };
    if (this.opts.token) headers["authorization"] = `Bearer ${this.opts.token}`;
    let res: Response;
    try {
      res = await fetch(`${this.#base}${path}`, { headers, ...(signal ? { signal } : {}) });
    } catch (err) {
      if (signal?.aborted) return;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new ApiCallError(
        0,
        "unreachable",
        `cannot reach the API at ${this.#base} (${cause?.code ?? cause?.message ?? (err as Error).message})`,
      );
    }
    if (!res.ok || !res.body) {
      const e = ((await res.json().catch(() => undefined)) as { error?: { code?: string; message?: string } })
        ?.error;
      throw new ApiCallError(
        res.status,
        e?.code ?? `http-${res.status}`,
        e?.message ?? `GET ${path} answered ${res.status} ${res.statusText}`,
      );
    }
    const decoder = new TextDecoder();
    let buf = "";
    try {
      for await (const chunk of res.body) {
        buf += decoder.decode(chunk as Uint8Array, { stream: true });
        for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let event = "message";
          const data: string[] = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) event = line.slice(7);
            else if (line.startsWith("data: ")) data.push(line.slice(6));
          }
          // Comment-only blocks (keepalives) carry no data.
          if (data.length > 0) yield { event, data: JSON.parse(data.join("\n")) as T };
        }
      }
    } catch (err) {
      if (!signal?.aborted) throw err;
    }
  }
}
