/**
 * How the list commands print: `-o table|wide|json|yaml`, once or, with
 * `--watch`, again whenever the answer changes. Watching follows the API's
 * server-sent position stream (GET /v1/stream: sent at once and whenever
 * the log moves, at most every 200 ms) and asks for the list again on each
 * move; a list whose printed form did not change is not printed again.
 */
import { stringify as stringifyYaml } from "yaml";
import type { ApiClient } from "../../operator/index.js";
import {
  type ApiFlags,
  call,
  clientFor,
  type OutputFormat,
  outputOf,
  printStructured,
} from "./operator-common.js";

export interface ListPrinter<T> {
  /** The table, with the wide columns when `wide`. */
  table(body: T, wide: boolean): string;
}

/** Prints one answer in `format`. */
export function printList<T>(format: OutputFormat, body: T, printer: ListPrinter<T>): void {
  if (printStructured(format, body)) return;
  process.stdout.write(`${printer.table(body, format === "wide")}\n`);
}

/** One answer as a watch prints it: one line of JSON, one YAML document, or the table after a blank line. */
function watchText<T>(format: OutputFormat, body: T, printer: ListPrinter<T>): string {
  switch (format) {
    case "json":
      return `${JSON.stringify(body)}\n`;
    case "yaml":
      return `---\n${stringifyYaml(body)}`;
    case "table":
    case "wide":
      return `${printer.table(body, format === "wide")}\n`;
    default: {
      const never: never = format;
      throw new Error(`unknown output format ${String(never)}`);
    }
  }
}

/**
 * Prints the list now and again after every change of the log that changes
 * it, until Ctrl-C (or `signal`). `seqOf` strips what changes with every
 * event (the answer's sequence) so only a changed list prints again.
 */
export async function watchList<T>(
  client: ApiClient,
  format: OutputFormat,
  fetchBody: () => Promise<T>,
  printer: ListPrinter<T>,
  opts: { signal?: AbortSignal; comparable?: (body: T) => unknown } = {},
): Promise<void> {
  const stop = new AbortController();
  const onSigint = () => stop.abort();
  process.once("SIGINT", onSigint);
  process.once("SIGTERM", onSigint);
  opts.signal?.addEventListener("abort", onSigint, { once: true });
  let shown: string | undefined;
  let printed = 0;
  try {
    await call(async () => {
      for await (const _ of client.followPosition(stop.signal)) {
        const body = await fetchBody();
        const key = JSON.stringify(opts.comparable ? opts.comparable(body) : body);
        if (key === shown) continue;
        shown = key;
        const text = watchText(format, body, printer);
        // Tables are set apart by a blank line; JSON lines and YAML documents separate themselves.
        process.stdout.write(printed > 0 && (format === "table" || format === "wide") ? `\n${text}` : text);
        printed++;
      }
    });
  } finally {
    process.off("SIGINT", onSigint);
    process.off("SIGTERM", onSigint);
  }
}

/**
 * What a list command does: asks the operator API (`ask`, a typed call) and prints the answer
 * in the `-o` format, once or, with `--watch`, again on every change
 * (`comparable`: what must change for it to print again).
 */
export async function showList<T>(
  flags: ApiFlags & { watch?: boolean },
  ask: (client: ApiClient) => Promise<{ body: T }>,
  printer: ListPrinter<T>,
  comparable?: (body: T) => unknown,
): Promise<void> {
  const client = clientFor(flags);
  const format = outputOf(flags);
  const fetchBody = async () => (await call(() => ask(client))).body;
  if (flags.watch) {
    await watchList(client, format, fetchBody, printer, comparable ? { comparable } : {});
    return;
  }
  printList(format, await fetchBody(), printer);
}
