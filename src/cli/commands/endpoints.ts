/** `llmgw endpoints`: the routing table, where each model's ready replicas serve. */
import type { Command } from "commander";
import { stringify as stringifyYaml } from "yaml";
import type { ApiSchemas } from "../../operator/index.js";
import type { EndpointEntry } from "../../projections/index.js";
import { printList } from "./list-output.js";
import {
  type ApiFlags,
  call,
  clientFor,
  formatTable,
  outputOf,
  withApiOptions,
  withOutputOption,
} from "./operator-common.js";

type Answer = ApiSchemas["Endpoints"];

export function registerEndpoints(program: Command): void {
  withOutputOption(
    withApiOptions(
      program
        .command("endpoints")
        .description("list where each model's ready replicas serve (the routing table)")
        .option("--model <name>", "only this model")
        .option("--follow", "print the table again whenever it changes, until Ctrl-C"),
    ),
  ).action(async (flags: ApiFlags & { model?: string; follow?: boolean }) => {
    const format = outputOf(flags);
    const client = clientFor(flags);
    const query = flags.model ? { model: flags.model } : {};
    if (!flags.follow) {
      const { body } = await call(() =>
        client.send((api) => api.GET("/v1/endpoints", { params: { query } })),
      );
      printList(format, body, { table: (b) => endpointsTable(rows(b)) });
      return;
    }
    const stop = new AbortController();
    process.once("SIGINT", () => stop.abort());
    await call(async () => {
      for await (const table of client.followEndpoints(query, stop.signal)) {
        // One JSON object per line while following, so tools can read it line by line.
        if (format === "json") process.stdout.write(`${JSON.stringify(table)}\n`);
        else if (format === "yaml") process.stdout.write(`---\n${stringifyYaml(table)}`);
        else process.stdout.write(`seq ${table.seq}\n${endpointsTable(rows(table))}\n\n`);
      }
    });
  });
}

function rows(a: Answer): Array<{ model: string } & EndpointEntry> {
  if ("model" in a) return a.endpoints.map((e) => ({ model: a.model, ...e }));
  return Object.entries(a.endpoints).flatMap(([model, list]) => list.map((e) => ({ model, ...e })));
}

/** The routing table; an entry has no more than these columns, so -o wide prints the same. */
export function endpointsTable(list: Array<{ model: string } & EndpointEntry>): string {
  return formatTable(
    ["MODEL", "REPLICA", "URL", "NODE"],
    list.map((e) => [e.model, e.replicaId, e.url, e.nodeId]),
  );
}
