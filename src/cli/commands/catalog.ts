/** `llmgw catalog apply -f FILE` and `llmgw catalog get`. */
import { readFileSync } from "node:fs";
import { extname } from "node:path";
import { type Command, Option } from "commander";
import { stringify } from "yaml";
import { ApiCallError } from "../../operator/index.js";
import { CliError, EXIT, intArg } from "../common.js";
import { type ApiFlags, call, clientFor, printJson, withApiOptions } from "./operator-common.js";

export function registerCatalog(program: Command): void {
  const catalog = program.command("catalog").description("apply or show the model catalog");

  withApiOptions(
    catalog
      .command("apply")
      .description("apply a catalog file (YAML or JSON); every invalid field is reported")
      .addOption(
        new Option(
          "-f, --file <path>",
          "catalog file (.yaml, .yml or .json; - reads stdin)",
        ).makeOptionMandatory(),
      )
      .option(
        "--if-match <seq>",
        "apply only if the catalog in force is still at this sequence",
        intArg("--if-match"),
      ),
  ).action(async (flags: ApiFlags & { file: string; ifMatch?: number }) => {
    let text: string;
    try {
      text = readFileSync(flags.file === "-" ? 0 : flags.file, "utf8");
    } catch (err) {
      throw new CliError(
        `cannot read ${flags.file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
    const json = extname(flags.file).toLowerCase() === ".json";
    const client = clientFor(flags);
    let res: { seq: number; models: Array<{ name: string; replicas: number }> };
    try {
      ({ body: res } = await client.request<typeof res>("PUT", "/v1/catalog", {
        body: text,
        contentType: json ? "application/json" : "application/yaml",
        headers: flags.ifMatch === undefined ? {} : { "if-match": `"${flags.ifMatch}"` },
      }));
    } catch (err) {
      if (err instanceof ApiCallError && err.issues.length > 0) {
        for (const i of err.issues) process.stderr.write(`  ${i.path || flags.file}: ${i.message}\n`);
        throw new CliError(`${flags.file}: ${err.message}; nothing was applied`, EXIT.usage);
      }
      return call(() => Promise.reject(err));
    }
    if (flags.json) return printJson(res);
    const summary = res.models.map((m) => `${m.name}×${m.replicas}`).join(", ");
    process.stdout.write(`catalog applied at log sequence ${res.seq}: ${summary || "no models"}\n`);
  });

  withApiOptions(
    catalog.command("get").description("print the catalog in force (YAML, or JSON with --json)"),
  ).action(async (flags: ApiFlags) => {
    const client = clientFor(flags);
    const { body } = await call(() =>
      client.get<{ seq: number; appliedBy: string; catalog: unknown }>("/v1/catalog"),
    );
    if (flags.json) return printJson(body);
    process.stdout.write(`# catalog at log sequence ${body.seq}, applied by ${body.appliedBy || "-"}\n`);
    process.stdout.write(stringify(body.catalog));
  });
}
