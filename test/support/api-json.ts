// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the tests
/** One JSON request to an operator API in development mode (no token): the parsed body, or an error naming the status and body. */
export async function jsonCall(baseUrl: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    ...(body === undefined
      ? {}
      : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
  });
  const json = (await res.json()) as any;
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}
