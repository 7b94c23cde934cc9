// Module resolution hook: every import of src/reconciler/decide/decide.ts
// resolves to counting-decide.ts, except the one counting-decide.ts makes
// of the real module.
const REAL = "/src/reconciler/decide/decide.ts";
const PLANTED = new URL("./counting-decide.ts", import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  if (resolved.url.endsWith(REAL) && context.parentURL !== PLANTED) return { ...resolved, url: PLANTED };
  return resolved;
}
