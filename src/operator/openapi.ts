/**
 * The OpenAPI 3.1 document of the operator API, built from the zod schemas
 * of its routes (api-routes.ts) and answers (api-schemas.ts) with zod's own
 * JSON Schema output (draft 2020-12, the dialect of OpenAPI 3.1). Pure: the
 * same code gives the same document.
 */
import { z } from "zod";
import { API_ROUTES, API_TAGS, type ApiRoute, type RouteAnswer } from "./api-routes.js";
import { apiSchemaRegistry } from "./api-schemas.js";
import { catalogFileSchema } from "./catalog/index.js";

type JsonSchema = Record<string, unknown>;

export interface OpenApiDocument {
  openapi: "3.1.0";
  info: { title: string; version: string; description: string };
  tags: Array<{ name: string; description: string }>;
  paths: Record<string, Record<string, unknown>>;
  components: { schemas: Record<string, JsonSchema>; securitySchemes: Record<string, unknown> };
  /** Applies to every operation that does not say `security: []`. */
  security: Array<Record<string, string[]>>;
}

const REF = (id: string) => `#/components/schemas/${id}`;

const STATUS_TEXT: Record<number, string> = {
  400: "invalid id, query or body (`issues` names each bad field)",
  401: "missing or wrong token",
  403: "the token's role is too low for this route (the message names the role needed)",
  404: "no such node, replica, model or endpoint",
  409: "nothing to undo: the log records no earlier spec of the model",
  412: "the catalog changed since the If-Match sequence (`seq` is the one in force)",
  410: "the node is gone: no longer in the fleet, or lost",
  413: "body over 4 MiB",
  415: "a catalog that is neither JSON nor YAML",
  500: "a bug",
  503: "NATS unreachable, the projection not caught up, or (logs) the node's agent or gateway not reachable",
  504: "appended, but the projection did not fold it in time",
};

/** A zod schema as a JSON Schema to embed: no `$schema`/`$id` of its own. */
function embed(schema: JsonSchema): JsonSchema {
  const { $schema: _s, $id: _i, ...rest } = schema;
  return rest;
}

/** What a request takes, as written (`io: "input"`): defaults not applied, transforms not run. */
function inputSchema(schema: z.ZodType): JsonSchema {
  return embed(z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as JsonSchema);
}

/** `/v1/nodes/:id` → `/v1/nodes/{id}` */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z_]+)/g, "{$1}");
}

function components(): Record<string, JsonSchema> {
  const { schemas } = z.toJSONSchema(apiSchemaRegistry, { uri: REF });
  const out: Record<string, JsonSchema> = {};
  for (const [id, s] of Object.entries(schemas)) out[id] = embed(s as JsonSchema);
  out["CatalogFile"] = {
    ...inputSchema(catalogFileSchema),
    description: "A catalog as operators write it (memory and durations as text); examples/catalog.yaml.",
  };
  out["CatalogResponse"] = {
    type: "object",
    properties: {
      seq: { type: "integer", minimum: 0 },
      appliedBy: { type: "string" },
      catalog: { $ref: REF("CatalogFile") },
    },
    required: ["seq", "appliedBy", "catalog"],
    additionalProperties: false,
  };
  return out;
}

function schemaId(schema: z.ZodType): string {
  const id = apiSchemaRegistry.get(schema)?.id;
  if (!id) throw new Error("an answer schema of api-routes.ts is not registered in api-schemas.ts");
  return id;
}

function answerContent(a: RouteAnswer): Record<string, unknown> {
  switch (a.kind) {
    case "json":
      return {
        "application/json": { schema: { $ref: REF(schemaId(a.schema)) } },
        ...(a.stream ? { "text/event-stream": { schema: { type: "string", description: a.stream } } } : {}),
      };
    case "catalog":
      return { "application/json": { schema: { $ref: REF("CatalogResponse") } } };
    case "text":
      return { [a.contentType]: { schema: { type: "string" } } };
    default: {
      const never: never = a;
      throw new Error(`unknown answer ${JSON.stringify(never)}`);
    }
  }
}

const ID_PARAM = {
  node: {
    description: "A node id as typed: an RFC 1123 DNS name (docs/ARCHITECTURE.md, Node ids are DNS names).",
    schema: { type: "string", minLength: 1, maxLength: 253 },
  },
  model: {
    description: "A model name of the catalog.",
    schema: { type: "string", pattern: "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$" },
  },
  replica: {
    description: "A replica id.",
    schema: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,128}$" },
  },
  "replica-or-shard": {
    description: "A replica id (its first shard is read) or a shard id.",
    schema: { type: "string", pattern: "^[A-Za-z0-9._:-]{1,128}$" },
  },
} as const;

function parameters(r: ApiRoute): unknown[] {
  const out: unknown[] = [];
  if (r.id)
    out.push({ name: r.id === "model" ? "model" : "id", in: "path", required: true, ...ID_PARAM[r.id] });
  if (r.gpuIndex) {
    out.push({
      name: "index",
      in: "path",
      required: true,
      description: "A GPU index the node registered.",
      schema: { type: "integer", minimum: 0 },
    });
  }
  if (r.query) {
    const q = inputSchema(r.query) as { properties?: Record<string, JsonSchema>; required?: string[] };
    for (const [name, schema] of Object.entries(q.properties ?? {})) {
      out.push({ name, in: "query", required: q.required?.includes(name) ?? false, schema });
    }
  }
  if (r.ifMatch) {
    out.push({
      name: "If-Match",
      in: "header",
      required: false,
      description:
        'The catalog sequence the change is based on, as its ETag gave it ("12"); `*` or absent: any.',
      schema: { type: "string" },
    });
  }
  return out;
}

function operation(r: ApiRoute): Record<string, unknown> {
  const responses: Record<string, unknown> = {
    "200": { description: r.answer.description, content: answerContent(r.answer) },
  };
  const open = r.access === "open";
  // Every role may read; only routes that need more than viewer can answer 403.
  const auth = open ? [] : r.access === "viewer" ? [401] : [401, 403];
  const errors = [...r.errors, ...auth, 500].sort((a, b) => a - b);
  for (const status of errors) {
    responses[String(status)] = {
      description: STATUS_TEXT[status] ?? "error",
      content: { "application/json": { schema: { $ref: REF("Error") } } },
    };
  }
  const op: Record<string, unknown> = {
    operationId: r.operationId,
    tags: [r.tag],
    summary: r.summary,
    description: open
      ? "Open: no token needed."
      : `Needs a token with the ${r.access} role${r.access === "admin" ? "" : " or higher"} (viewer < operator < admin).`,
    "x-llmgw-role": r.access,
    parameters: parameters(r),
    responses,
  };
  if (open) op["security"] = [];
  if (r.body) {
    op["requestBody"] = { required: false, content: { "application/json": { schema: inputSchema(r.body) } } };
  }
  if (r.catalogBody) {
    const ref = { $ref: REF("CatalogFile") };
    op["requestBody"] = {
      required: true,
      content: { "application/json": { schema: ref }, "application/yaml": { schema: ref } },
    };
  }
  return op;
}

/** The document for the given routes (default: every route of the API). */
export function openApiDocument(routes: readonly ApiRoute[] = API_ROUTES): OpenApiDocument {
  const paths: OpenApiDocument["paths"] = {};
  for (const r of routes) {
    const path = openApiPath(r.url);
    paths[path] = { ...paths[path], [r.method.toLowerCase()]: operation(r) };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "llmgw operator API",
      version: "1",
      description:
        "The operator API of llmgw: nodes, replicas, the log, the catalog, what-if. Every request needs " +
        "`Authorization: Bearer <token>` except the probes, this document and the UI's files. Each token has a " +
        "role — viewer reads, operator also cordons, drains and clears, admin also applies the catalog — and each " +
        "operation names the role it needs (`x-llmgw-role`); a lower one gets 403 (docs/operator-api.md).",
    },
    tags: Object.entries(API_TAGS).map(([name, description]) => ({ name, description })),
    paths,
    components: {
      schemas: components(),
      securitySchemes: { token: { type: "http", scheme: "bearer" } },
    },
    security: [{ token: [] }],
  };
}
