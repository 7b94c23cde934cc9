/**
 * The web UI: static files built by `scripts/build-ui` (Vite) into dist/ui,
 * served as they are. They hold no data (everything shown comes from the
 * authenticated API), so they are open like the health probes. Only files
 * that exist at start are served; any other path stays a JSON 404.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";
import { PACKAGE_ROOT } from "../../package-root.js";

export const DEFAULT_UI_DIR = join(PACKAGE_ROOT, "dist/ui/");

const NOT_BUILT = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>llmgw</title></head>
<body><h1>llmgw</h1><p>The web UI is not built. Run <code>scripts/build-ui</code> (or <code>npm run setup</code>)
and restart <code>llmgw api</code>. The API itself works: see <code>/v1/nodes</code>.</p></body></html>`;

/** True for paths the UI's static files use (open without a token). */
export function isUiPath(path: string): boolean {
  return path === "/" || path === "/index.html" || path === "/favicon.svg" || path.startsWith("/assets/");
}

export async function uiRoutes(app: FastifyInstance, dir: string): Promise<void> {
  if (!existsSync(`${dir}/index.html`)) {
    app.get("/", async (_req, reply) => reply.type("text/html; charset=utf-8").send(NOT_BUILT));
    return;
  }
  await app.register(fastifyStatic, {
    root: dir,
    prefix: "/",
    wildcard: false,
    index: ["index.html"],
    // The header is set here per file, not by the plugin for all.
    cacheControl: false,
    // Vite names every asset by its content, so they never change under one name.
    setHeaders(reply, path) {
      reply.header(
        "cache-control",
        path.includes("/assets/") ? "public, max-age=31536000, immutable" : "no-cache",
      );
    },
  });
}
