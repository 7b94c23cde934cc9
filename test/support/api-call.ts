// biome-ignore-all lint/suspicious/noExplicitAny: API bodies are loosely typed JSON, checked by the callers' assertions
/** A JSON call to a running operator API for integration tests: a non-2xx answer throws with its body. */
export function apiCaller(baseUrl: () => string) {
  return async (method: string, path: string, body?: unknown): Promise<any> => {
    const res = await fetch(`${baseUrl()}${path}`, {
      method,
      ...(body === undefined
        ? {}
        : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
    });
    const json = (await res.json()) as any;
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
}
