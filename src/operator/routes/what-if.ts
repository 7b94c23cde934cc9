/**
 * POST /v1/what-if: re-runs placement over a range of the recorded history
 * with another reconciler config (policy, limits) and answers the passes
 * whose decisions would differ. Nothing is written to the log.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { reconcilerConfigSchema, runWhatIf } from "../../reconciler/index.js";
import type { ApiContext } from "../context.js";
import { ApiError, invalid } from "../errors.js";
import { logWhatIfReader } from "../what-if.js";
import { parseWith } from "./params.js";

const seq = z
  .number({ error: "must be a number" })
  .int("must be a whole number")
  .min(0, "must not be negative");

export const whatIfBody = z.strictObject({
  /** The alternative config; missing fields take the defaults (as `llmgw what-if --config`). */
  config: z.record(z.string(), z.unknown()).default({}),
  fromSeq: seq.optional(),
  toSeq: seq.optional(),
});

export function whatIfRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.post("/v1/what-if", async (req) => {
    const body = parseWith(whatIfBody, req.body, "what-if request");
    const parsed = reconcilerConfigSchema.safeParse(body.config);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => ({
        path: ["config", ...i.path].join("."),
        message: i.code === "unrecognized_keys" ? `unknown field ${i.keys.join(", ")}` : i.message,
      }));
      const summary = issues.map((i) => `${i.path}: ${i.message}`).join("; ");
      throw new ApiError(400, "invalid-argument", `invalid what-if request: ${summary}`, { issues });
    }
    if (body.fromSeq !== undefined && body.toSeq !== undefined && body.fromSeq > body.toSeq) {
      throw invalid(`fromSeq (${body.fromSeq}) must not be after toSeq (${body.toSeq})`);
    }
    const range = {
      ...(body.fromSeq !== undefined ? { fromSeq: body.fromSeq } : {}),
      ...(body.toSeq !== undefined ? { toSeq: body.toSeq } : {}),
    };
    const result = await runWhatIf(logWhatIfReader(ctx.log), parsed.data, range);
    const differing = result.passes.filter((p) => p.differences.length > 0);
    return {
      config: result.config,
      compared: result.compared,
      differing: differing.length,
      passes: differing,
    };
  });
}
