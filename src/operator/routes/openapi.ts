/**
 * GET /openapi.json (the OpenAPI 3.1 document) and GET /docs (a reference
 * page built from it on the server: no script, no assets from elsewhere, so
 * it works offline). Both are open like the probes: they describe the API
 * and hold no data.
 */
import type { FastifyInstance } from "fastify";
import { type OpenApiDocument, openApiDocument } from "../openapi.js";

export function openApiRoutes(app: FastifyInstance): void {
  const doc = openApiDocument();
  const json = JSON.stringify(doc);
  const page = referencePage(doc);
  app.get("/openapi.json", async (_req, reply) => reply.type("application/json; charset=utf-8").send(json));
  app.get("/docs", async (_req, reply) => reply.type("text/html; charset=utf-8").send(page));
}

const esc = (s: string) =>
  s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] ?? c);

interface Operation {
  summary?: string;
  parameters?: Array<{
    name: string;
    in: string;
    required?: boolean;
    description?: string;
    schema?: unknown;
  }>;
  requestBody?: { content: Record<string, { schema: unknown }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: unknown }> }>;
}

function schemaText(schema: unknown): string {
  const ref = (schema as { $ref?: string }).$ref;
  return ref ? `<a href="#${esc(ref.split("/").pop() ?? "")}">${esc(ref.split("/").pop() ?? "")}</a>` : "";
}

function operationHtml(method: string, path: string, op: Operation): string {
  const params = (op.parameters ?? [])
    .map(
      (p) =>
        `<li><code>${esc(p.name)}</code> (${esc(p.in)}${p.required ? ", required" : ""}) <code>${esc(JSON.stringify(p.schema))}</code>${p.description ? ` — ${esc(p.description)}` : ""}</li>`,
    )
    .join("");
  const body = op.requestBody
    ? `<p>Body: ${Object.entries(op.requestBody.content)
        .map(
          ([type, c]) =>
            `<code>${esc(type)}</code> ${schemaText(c.schema) || `<code>${esc(JSON.stringify(c.schema))}</code>`}`,
        )
        .join(", ")}</p>`
    : "";
  const responses = Object.entries(op.responses)
    .map(([status, r]) => {
      const content = Object.entries(r.content ?? {})
        .map(([type, c]) => `<code>${esc(type)}</code> ${schemaText(c.schema)}`)
        .join(", ");
      return `<li><b>${esc(status)}</b> ${esc(r.description)} ${content}</li>`;
    })
    .join("");
  return `<section><h3><code>${esc(method.toUpperCase())} ${esc(path)}</code></h3><p>${esc(op.summary ?? "")}</p>${params ? `<ul>${params}</ul>` : ""}${body}<ul>${responses}</ul></section>`;
}

/** The whole document as one page: operations, then every schema in full. */
export function referencePage(doc: OpenApiDocument): string {
  const ops = Object.entries(doc.paths)
    .flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => operationHtml(method, path, op as Operation)),
    )
    .join("\n");
  const schemas = Object.entries(doc.components.schemas)
    .map(
      ([id, s]) =>
        `<section id="${esc(id)}"><h3>${esc(id)}</h3><pre>${esc(JSON.stringify(s, null, 2))}</pre></section>`,
    )
    .join("\n");
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(doc.info.title)}</title>
<style>body{font:15px system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}pre{background:#f4f4f4;padding:.5rem;overflow:auto}section{border-top:1px solid #ddd}</style>
</head><body><h1>${esc(doc.info.title)}</h1><p>${esc(doc.info.description)}</p>
<p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI ${esc(doc.openapi)}).</p>
<h2>Operations</h2>
${ops}
<h2>Schemas</h2>
${schemas}
</body></html>`;
}
