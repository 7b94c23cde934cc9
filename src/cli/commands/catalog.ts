/** `llmgw catalog apply -f FILE`, `llmgw catalog get|show [--at-seq N]` and `llmgw catalog history`. */
import { readFileSync } from "node:fs";
import { extname } from "node:path";
import { type Command, Option } from "commander";
import { stringify } from "yaml";
import { ApiCallError, type ApiSchemas } from "../../operator/index.js";
import { CliError, EXIT, intArg } from "../common.js";
import {
  type ApiFlags,
  call,
  clientFor,
  formatTable,
  outputOf,
  printJson,
  printStructured,
  withApiOptions,
  withOutputOption,
} from "./operator-common.js";

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
    let res: ApiSchemas["CatalogApplied"];
    try {
      ({ body: res } = await client.applyCatalogText(text, json ? "json" : "yaml", flags.ifMatch));
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
    catalog
      .command("get")
      .alias("show")
      .description(
        "print the catalog in force, or with --at-seq the one in force at that log sequence (YAML, or JSON with --json)",
      )
      .option("--at-seq <seq>", "the catalog in force at this log sequence", intArg("--at-seq")),
  ).action(async (flags: ApiFlags & { atSeq?: number }) => {
    const client = clientFor(flags);
    const query = flags.atSeq === undefined ? {} : { at: flags.atSeq };
    const { body } = await call(() => client.send((api) => api.GET("/v1/catalog", { params: { query } })));
    if (flags.json) return printJson(body);
    process.stdout.write(`# catalog at log sequence ${body.seq}, applied by ${body.appliedBy || "-"}\n`);
    process.stdout.write(stringify(body.catalog));
  });

  withOutputOption(
    withApiOptions(
      catalog
        .command("history")
        .description(
          "every catalog applied, oldest first: who applied it and each model's replicas and spec revision",
        ),
    ),
  ).action(async (flags: ApiFlags) => {
    const client = clientFor(flags);
    const { body } = await call(() => client.send((api) => api.GET("/v1/catalog/history")));
    if (printStructured(outputOf(flags), body)) return;
    const rows = body.history.map((v) => [
      String(v.seq),
      new Date(v.timeMs).toISOString(),
      v.appliedBy || "-",
      v.models.map((m) => `${m.name}×${m.replicas}@${m.revision}`).join(", ") || "no models",
    ]);
    process.stdout.write(
      `${formatTable(["SEQ", "TIME", "APPLIED BY", "MODELS (×replicas@revision)"], rows)}\n`,
    );
  });
}
