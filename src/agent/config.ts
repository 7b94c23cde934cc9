/** The node agent's config file (`llmgw agent --config FILE`, YAML or JSON): zod-checked, errors name the field. */
import { readFile } from "node:fs/promises";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { engineLogsSchema, enginesSchema } from "./engine/index.js";
import { hardwareConfigSchema } from "./gpus/index.js";

export const agentConfigSchema = z.strictObject({
  /** The node id; default: the client certificate's CN (required with --insecure-dev). */
  nodeId: z.string().optional(),
  /** Where other nodes and the data plane reach this node; default: the node id. */
  advertiseAddress: z.string().max(253).optional(),
  gateways: z.array(z.url({ protocol: /^https?$/ })).optional(),
  labels: z
    .record(
      z
        .string()
        .regex(/^[A-Za-z0-9._/-]{1,128}$/, "label keys are 1 to 128 of letters, digits, '.', '_', '/', '-'"),
      z.string().max(256),
    )
    .default({}),
  /** Engine records and logs; engines are adopted from here after an agent restart. */
  stateDir: z.string().min(1).default("/var/lib/llmgw-agent"),
  heartbeatMs: z.number().int().min(100).max(60_000).default(3000),
  hardware: hardwareConfigSchema.prefault({}),
  /** Rotation of the engines' logs and how long a removed shard's are kept (docs/agent.md, "Engine logs"). */
  engineLogs: engineLogsSchema,
  engines: enginesSchema.refine(
    (e) => Object.keys(e).length > 0,
    'configure at least one engine (the profiles\' default is "default")',
  ),
});

export type AgentConfig = z.output<typeof agentConfigSchema>;

/** The config file could not be used: the file, the field and why. */
export class AgentConfigError extends Error {
  override readonly name = "AgentConfigError";
}

/** Marks the values of the config skeleton (`llmgw agent install`) the operator must fill in. */
export const CONFIG_PLACEHOLDER = "CHANGE-ME";

/** The fields (dotted paths) whose string values still hold the placeholder. */
function placeholderFields(data: unknown, path: string[] = []): string[] {
  if (typeof data === "string") return data.includes(CONFIG_PLACEHOLDER) ? [path.join(".") || "(top)"] : [];
  if (Array.isArray(data)) return data.flatMap((v, i) => placeholderFields(v, [...path, String(i)]));
  if (data !== null && typeof data === "object")
    return Object.entries(data).flatMap(([k, v]) => placeholderFields(v, [...path, k]));
  return [];
}

export function parseAgentConfig(data: unknown, source: string): AgentConfig {
  const unfilled = placeholderFields(data);
  if (unfilled.length > 0)
    throw new AgentConfigError(
      `${source} still holds ${CONFIG_PLACEHOLDER} (the skeleton of \`llmgw agent install\`): fill in ${unfilled.join(", ")}`,
    );
  const r = agentConfigSchema.safeParse(data);
  if (r.success) return r.data;
  const lines = r.error.issues.map((i) => `  ${i.path.length ? i.path.join(".") : "(top)"}: ${i.message}`);
  throw new AgentConfigError(`${source} is not a valid agent config:\n${lines.join("\n")}`);
}

export async function loadAgentConfig(path: string): Promise<AgentConfig> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new AgentConfigError(`--config ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (err) {
    throw new AgentConfigError(`--config ${path} is not YAML or JSON: ${(err as Error).message}`);
  }
  return parseAgentConfig(data, `--config ${path}`);
}
