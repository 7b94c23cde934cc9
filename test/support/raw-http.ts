// biome-ignore-all lint/suspicious/noExplicitAny: response bodies are loosely typed JSON, checked by the callers' assertions
/**
 * One HTTP or HTTPS request with exactly the headers a test gives (fetch
 * will not set Host, nor trust a test CA), and the URL an `llmgw api`
 * child says it listens on.
 */
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Child } from "../harness/proc.js";

export interface RawRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** For https: the CA to trust (PEM). */
  ca?: string;
}

/** The answer's status and body, parsed when it is JSON, else its text. */
export function rawRequest(
  url: string,
  path: string,
  o: RawRequest = {},
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const options = { method: o.method ?? "GET", headers: o.headers ?? {}, ...(o.ca ? { ca: o.ca } : {}) };
    const target = `${url}${path}`;
    const req = (target.startsWith("https:") ? httpsRequest : httpRequest)(target, options, (res) => {
      let text = "";
      res.on("data", (b) => (text += b));
      res.on("end", () => {
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // not JSON: the text
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on("error", reject);
    req.end(o.body);
  });
}

/** The URL an `llmgw api` child says it listens on (its JSON log line). */
export async function listeningUrl(child: Child): Promise<string> {
  const line = await child.waitForLine(/"url":"https?:\/\//, 60_000);
  return (JSON.parse(line.slice(line.indexOf("{"))) as { url: string }).url;
}
