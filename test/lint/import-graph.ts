/**
 * The import graph of the source, checked two ways:
 *
 * - **No cycles** between files. Only imports that load code count: an
 *   `import type` / `export type` is erased before anything runs, so two
 *   files that name each other's types do not form a circle. An import with
 *   only inline `type` specifiers (`import { type A } from`) does count:
 *   under `verbatimModuleSyntax` it stays as `import {} from`, which loads
 *   the module.
 * - **Pure rooms stay pure by what they reach**, not only by their own
 *   imports: following every value import from a pure room's files, no file
 *   reached imports a NATS client (`@nats-io/*`), a `node:` module that does
 *   I/O or reads a clock, or calls a clock, a random source or a timer
 *   (`Date.now()`, `new Date()` without arguments, `performance.now()`,
 *   `Math.random()`, `crypto.*`, `setTimeout`, `setInterval`,
 *   `setImmediate`).
 *
 * - **The session core names nothing of its shell**, not even a type: its
 *   files import only each other, the generated code, the codec and the id
 *   rules (`onlyFrom`), so what the shell hands it is typed by the core.
 *
 * Files are parsed with the TypeScript compiler, so comments and strings
 * never count. Run it by itself to print what it finds:
 * `node --import tsx test/lint/import-graph.ts`.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { isBuiltin } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";

/** One import of a file: what it names and whether it loads code. */
export interface ImportEdge {
  /** A repository-relative path for a file of the tree, the specifier for a package. */
  target: string;
  /** A file of the tree (a relative specifier), not a package. */
  local: boolean;
  value: boolean;
}

/** A clock, a random source or a timer called in a file. */
export interface ClockUse {
  what: string;
  line: number;
}

export interface ParsedFile {
  imports: ImportEdge[];
  clocks: ClockUse[];
}

/** A pure room: files (or folders, every file below) whose closure must stay pure. */
export interface PureRoom {
  name: string;
  /** Repository-relative files or folders; a folder ending in `/*` means its own files only. */
  paths: string[];
  /**
   * Where else the room's own files may import from at all, type-only
   * imports included (folders of the tree, e.g. "src/gen/"): a room held to
   * this names nothing of a shell, not even a type, so a type it needs is
   * its own and a shell imports it from the room. Unset: any file, by value
   * only through pure ones.
   */
  onlyFrom?: string[];
  /**
   * Hold only the room's own files, not what they reach: a room that drives
   * impure code through ports it fills in (the simulation hands the agent
   * its clock and transport) names no clock, timer, randomness, NATS or
   * I/O module itself.
   */
  ownFilesOnly?: boolean;
}

/** Why a file reached from a pure room is not pure, and the chain of imports that reached it. */
export interface Impurity {
  room: string;
  /** What is forbidden: a package, or a clock call with its file and line. */
  what: string;
  /** From the file that does it back to the room's file that reaches it. */
  chain: string[];
}

export interface GraphReport {
  /** Each circle of value imports, as a path of files that ends where it starts. */
  cycles: string[][];
  impurities: Impurity[];
}

/** `node:` modules a pure file may load: they compute and do no I/O, read no clock and no randomness. */
const PURE_BUILTINS = new Set([
  "assert",
  "assert/strict",
  "buffer",
  "path",
  "path/posix",
  "string_decoder",
  "util",
]);

/** Whether a package may be loaded by a pure room's closure (and why not). */
function forbiddenPackage(spec: string): string | undefined {
  if (spec.startsWith("@nats-io/")) return `${spec} (a NATS client)`;
  if (isBuiltin(spec)) {
    const name = spec.replace(/^node:/, "");
    if (!PURE_BUILTINS.has(name)) return `${spec} (a node: module with I/O, a clock or randomness)`;
  }
  return undefined;
}

/** Calls `obj.prop(...)` that read a clock or a random source. */
const CLOCK_MEMBERS: Record<string, ReadonlySet<string>> = {
  Date: new Set(["now"]),
  performance: new Set(["now", "timeOrigin"]),
  Math: new Set(["random"]),
  crypto: new Set(["randomUUID", "getRandomValues", "randomBytes", "randomInt"]),
  process: new Set(["hrtime", "uptime"]),
};
/** Timers: a pure function is handed the time, it does not wait for it. */
const TIMERS = new Set(["setTimeout", "setInterval", "setImmediate"]);

/** The imports and clock uses of one file's source. */
export function parseSource(fileName: string, text: string): ParsedFile {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const imports: Array<{ spec: string; value: boolean }> = [];
  const clocks: ClockUse[] = [];
  const lineOf = (n: ts.Node) => sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1;
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      imports.push({ spec: node.moduleSpecifier.text, value: !node.importClause?.isTypeOnly });
    } else if (
      ts.isExportDeclaration(node) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      imports.push({ spec: node.moduleSpecifier.text, value: !node.isTypeOnly });
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const e = node.moduleReference.expression;
      if (ts.isStringLiteral(e)) imports.push({ spec: e.text, value: !node.isTypeOnly });
    } else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      if (callee.kind === ts.SyntaxKind.ImportKeyword) {
        const arg = node.arguments[0];
        if (arg && ts.isStringLiteralLike(arg)) imports.push({ spec: arg.text, value: true });
      } else if (ts.isIdentifier(callee) && TIMERS.has(callee.text)) {
        clocks.push({ what: `${callee.text}()`, line: lineOf(node) });
      }
    } else if (ts.isNewExpression(node)) {
      if (ts.isIdentifier(node.expression) && node.expression.text === "Date" && !node.arguments?.length) {
        clocks.push({ what: "new Date()", line: lineOf(node) });
      }
    } else if (ts.isPropertyAccessExpression(node)) {
      const obj = node.expression;
      const owner = ts.isIdentifier(obj)
        ? obj.text
        : ts.isPropertyAccessExpression(obj) &&
            ts.isIdentifier(obj.expression) &&
            obj.expression.text === "globalThis"
          ? obj.name.text
          : undefined;
      if (owner !== undefined && CLOCK_MEMBERS[owner]?.has(node.name.text)) {
        clocks.push({ what: `${owner}.${node.name.text}`, line: lineOf(node) });
      }
      if (ts.isIdentifier(obj) && obj.text === "globalThis" && TIMERS.has(node.name.text)) {
        clocks.push({ what: `globalThis.${node.name.text}`, line: lineOf(node) });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  const dir = dirname(fileName);
  return {
    imports: imports.map(({ spec, value }) => ({
      target: spec.startsWith(".")
        ? join(
            dir,
            spec.replace(/\.(js|jsx|mjs)$/, (ext) => tsExtension(ext)),
          )
        : spec,
      local: spec.startsWith("."),
      value,
    })),
    clocks,
  };
}

function tsExtension(ext: string): string {
  return ext === ".jsx" ? ".tsx" : ext === ".mjs" ? ".mts" : ".ts";
}

/** Every .ts/.tsx file below `dir` (repository-relative), generated declaration files aside. */
export function sourceFiles(root: string, dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const name of readdirSync(join(root, rel))) {
      const child = join(rel, name);
      if (name === "node_modules") continue;
      if (statSync(join(root, child)).isDirectory()) walk(child);
      else if (/\.(ts|tsx|mts)$/.test(name) && !name.endsWith(".d.ts")) out.push(child);
    }
  };
  walk(dir);
  return out.sort();
}

/** The graph of `files` (repository-relative), each parsed once. */
export function buildGraph(root: string, files: string[]): Map<string, ParsedFile> {
  const graph = new Map<string, ParsedFile>();
  for (const f of files) graph.set(f, parseSource(f, readFileSync(join(root, f), "utf8")));
  return graph;
}

/** Circles of value imports between the graph's files (Tarjan's strongly connected components). */
export function findCycles(graph: Map<string, ParsedFile>): string[][] {
  const next = (f: string) =>
    (graph.get(f)?.imports ?? []).filter((i) => i.value && graph.has(i.target)).map((i) => i.target);
  let index = 0;
  const indexOf = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  // Iterative, so a long chain of imports cannot overflow the stack.
  for (const start of graph.keys()) {
    if (indexOf.has(start)) continue;
    const work: Array<{ file: string; edges: string[]; at: number }> = [];
    const enter = (file: string) => {
      indexOf.set(file, index);
      low.set(file, index);
      index++;
      stack.push(file);
      onStack.add(file);
      work.push({ file, edges: next(file), at: 0 });
    };
    enter(start);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      if (top.at < top.edges.length) {
        const to = top.edges[top.at++]!;
        if (!indexOf.has(to)) enter(to);
        else if (onStack.has(to)) low.set(top.file, Math.min(low.get(top.file)!, indexOf.get(to)!));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.file, Math.min(low.get(parent.file)!, low.get(top.file)!));
      if (low.get(top.file) === indexOf.get(top.file)) {
        const component: string[] = [];
        let f: string;
        do {
          f = stack.pop()!;
          onStack.delete(f);
          component.push(f);
        } while (f !== top.file);
        const selfLoop = component.length === 1 && next(top.file).includes(top.file);
        if (component.length > 1 || selfLoop) components.push(component);
      }
    }
  }
  // Each component shown as one circle through it, from its first file in sort order.
  return components.map((c) => circleThrough(new Set(c), [...c].sort()[0]!, next)).sort();
}

/** A shortest path of value imports from `start` back to itself inside `members`. */
function circleThrough(members: Set<string>, start: string, next: (f: string) => string[]): string[] {
  const via = new Map<string, string>();
  const queue = [start];
  for (let f = queue.shift(); f !== undefined; f = queue.shift()) {
    for (const to of next(f)) {
      if (!members.has(to)) continue;
      if (to === start) {
        const path = [start];
        for (let p: string | undefined = f; p !== undefined && p !== start; p = via.get(p))
          path.splice(1, 0, p);
        return [...path, start];
      }
      if (!via.has(to)) {
        via.set(to, f);
        queue.push(to);
      }
    }
  }
  return [start];
}

/** The files a room's paths name, among the graph's. */
function roomFiles(graph: Map<string, ParsedFile>, room: PureRoom): string[] {
  const files = [...graph.keys()];
  return room.paths.flatMap((p) => {
    if (p.endsWith("/*")) {
      const dir = p.slice(0, -2);
      return files.filter((f) => dirname(f) === dir);
    }
    if (graph.has(p)) return [p];
    return files.filter((f) => f.startsWith(p.endsWith("/") ? p : `${p}/`));
  });
}

/** What each pure room reaches through value imports that is not pure, with the chain that reaches it. */
export function findImpurities(graph: Map<string, ParsedFile>, rooms: PureRoom[]): Impurity[] {
  const out: Impurity[] = [];
  for (const room of rooms) {
    const roots = roomFiles(graph, room);
    if (roots.length === 0) throw new Error(`pure room ${room.name} names no file: ${room.paths.join(", ")}`);
    const via = new Map<string, string | undefined>(roots.map((r) => [r, undefined]));
    const chain = (from: string) => {
      const c = [from];
      for (let f = via.get(from); f !== undefined; f = via.get(f)) c.push(f);
      return c;
    };
    if (room.onlyFrom) {
      const own = new Set(roots);
      const allowed = room.onlyFrom;
      for (const f of roots)
        for (const i of graph.get(f)?.imports ?? []) {
          if (!i.local || own.has(i.target) || allowed.some((a) => i.target.startsWith(a))) continue;
          out.push({ room: room.name, what: `${i.target} (outside ${allowed.join(", ")})`, chain: [f] });
        }
    }
    const queue = [...roots];
    for (let f = queue.shift(); f !== undefined; f = queue.shift()) {
      const parsed = graph.get(f);
      if (!parsed) continue;
      for (const c of parsed.clocks)
        out.push({ room: room.name, what: `${c.what} at ${f}:${c.line}`, chain: chain(f) });
      for (const i of parsed.imports) {
        if (!i.value) continue;
        if (graph.has(i.target)) {
          if (room.ownFilesOnly) continue;
          if (via.has(i.target)) continue;
          via.set(i.target, f);
          queue.push(i.target);
          continue;
        }
        const bad = i.local ? undefined : forbiddenPackage(i.target);
        if (bad !== undefined) out.push({ room: room.name, what: bad, chain: chain(f) });
      }
    }
  }
  return out;
}

/**
 * The pure rooms of this repository: projections (the folds, not their
 * runtime), decide, placement and explain, the invariants, the gateway's
 * session core and the rules of its own the simulation runs (newest session
 * wins, the duplicate-identity check), what a rollout undo applies, the
 * engine policy, the codec, the id rules, and the log's
 * pure files (the reader's end decisions and admission, subjects and their
 * kinds, the log's error type). Kept in step with the purity linter's list
 * in biome.json, which checks each file's own imports.
 */
export const PURE_ROOMS: PureRoom[] = [
  { name: "projections", paths: ["src/projections/*"] },
  { name: "reconciler/decide", paths: ["src/reconciler/decide"] },
  { name: "reconciler/placement", paths: ["src/reconciler/placement"] },
  { name: "reconciler/explain", paths: ["src/reconciler/explain"] },
  { name: "invariants", paths: ["src/invariants"] },
  {
    name: "gateway/session-core",
    paths: ["src/gateway/session-core"],
    onlyFrom: ["src/gen/", "src/codec/", "src/ids/"],
  },
  { name: "engine-policy", paths: ["src/engine-policy"] },
  { name: "codec", paths: ["src/codec"] },
  { name: "ids", paths: ["src/ids"] },
  {
    // One seeded loop on simulated time: its own files read no clock, draw no
    // randomness and start no timer. The agent and the log's append path it
    // drives get the simulation's clock, ids and transport through their
    // ports (AgentClock, connect, the publisher), so their defaults are not
    // held here. The end of a turn (turn.ts) lets promise jobs finish
    // through the microtask and tick queues, and starts no timer.
    name: "simulation",
    paths: ["src/simulation"],
    ownFilesOnly: true,
  },
  {
    // The gateway's rules the simulation runs as they are: newest session
    // wins (SessionsWatch) and the duplicate-identity check (liveHolder).
    name: "gateway (pure files)",
    paths: ["src/gateway/sessions-watch.ts", "src/gateway/duplicates.ts"],
  },
  {
    // What `llmgw rollout undo` applies, which the simulation's operator runs as it is.
    name: "operator (pure files)",
    paths: ["src/operator/catalog/undo.ts"],
  },
  {
    name: "log (pure files)",
    paths: [
      "src/log/admit.ts",
      "src/log/decode-event.ts",
      "src/log/log-error.ts",
      "src/log/read-end.ts",
      "src/log/subject-kinds.ts",
      "src/log/subjects.ts",
    ],
  },
];

/** The whole check over `root`'s `src`. */
export function checkImportGraph(root: string, rooms: PureRoom[] = PURE_ROOMS): GraphReport {
  const graph = buildGraph(root, sourceFiles(root, "src"));
  return { cycles: findCycles(graph), impurities: findImpurities(graph, rooms) };
}

/** One line per finding, for a failure message or the command line. */
export function describeReport(report: GraphReport): string[] {
  return [
    ...report.cycles.map((c) => `import cycle: ${c.join(" -> ")}`),
    ...report.impurities.map((i) => `pure room ${i.room} reaches ${i.what}: ${i.chain.join(" <- ")}`),
  ];
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const root = resolve(import.meta.dirname, "../..");
  if (!existsSync(join(root, "src"))) throw new Error(`no src folder under ${relative(process.cwd(), root)}`);
  const lines = describeReport(checkImportGraph(root));
  for (const l of lines) console.log(l);
  console.log(lines.length === 0 ? "import graph: no cycles, pure rooms pure" : `${lines.length} finding(s)`);
  process.exitCode = lines.length === 0 ? 0 : 1;
}
