/**
 * What a set of source files reaches by the imports that carry code, and
 * what in that closure a pure module may not use: the NATS client, Node's
 * built-in modules (I/O, crypto, timers), and a clock (`Date.now()`,
 * `new Date()` without an argument, `performance.now()`, `setTimeout`,
 * `setInterval`, `setImmediate`). Parsed with the TypeScript compiler, so
 * it reads what the compiler reads: comments and strings are not imports.
 *
 * Which imports carry code: `import type` and `export type` never do (the
 * compiler erases them). Inline `type` specifiers name no code either, but
 * with `verbatimModuleSyntax` an import whose specifiers are all inline
 * types is kept as `import {} from "…"` and still loads the module, so such
 * a statement is followed (write `import type` to leave it out). Packages
 * are not followed into node_modules: every package the closure reaches
 * must be on the caller's allow list.
 */
import { readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { dirname, join, normalize, relative } from "node:path";
import ts from "typescript";

/** One thing a pure module may not reach, and the chain of files that reaches it. */
export interface Finding {
  /** The module or clock use, e.g. `node:fs`, `@nats-io/jetstream`, `Date.now()`. */
  what: string;
  /** Files from the one that uses it back to a root, relative to `base`. */
  chain: string[];
}

export interface ClosureOptions {
  /** Packages (or package prefixes, `@bufbuild/protobuf` covers its subpaths) known to do no I/O. */
  allowedPackages: readonly string[];
  /** Chains are written relative to this directory. */
  base: string;
}

const BUILTINS = new Set(builtinModules);
const CLOCK_CALLS = new Set(["setTimeout", "setInterval", "setImmediate"]);

/** A module specifier a pure module may not reach, or why not; undefined when it may. */
function forbiddenModule(spec: string, allowed: readonly string[]): string | undefined {
  if (spec.startsWith("node:") || BUILTINS.has(spec)) return spec;
  if (spec.startsWith("@nats-io/")) return spec;
  if (allowed.some((p) => spec === p || spec.startsWith(`${p}/`))) return undefined;
  return `${spec} (a package not on the allow list)`;
}

interface Parsed {
  /** Specifiers of the imports and re-exports that load code. */
  imports: string[];
  /** Clock uses in the file itself. */
  clocks: string[];
}

function parse(file: string): Parsed {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const imports: string[] = [];
  const clocks: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      if (!node.importClause?.isTypeOnly) imports.push(node.moduleSpecifier.text);
    } else if (
      ts.isExportDeclaration(node) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      if (!node.isTypeOnly) imports.push(node.moduleSpecifier.text);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      imports.push(node.arguments[0].text);
    } else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      if (ts.isIdentifier(callee) && CLOCK_CALLS.has(callee.text)) clocks.push(`${callee.text}()`);
      if (ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression)) {
        const name = `${callee.expression.text}.${callee.name.text}`;
        if (name === "Date.now" || name === "performance.now") clocks.push(`${name}()`);
      }
    } else if (
      ts.isNewExpression(node) &&
      ts.isIdentifier(node.expression) &&
      node.expression.text === "Date" &&
      (node.arguments?.length ?? 0) === 0
    ) {
      clocks.push("new Date()");
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { imports, clocks };
}

/** A relative specifier as the source file it names (the `.js` of ESM imports is the `.ts` here). */
function resolve(from: string, spec: string): string {
  return normalize(join(dirname(from), spec.replace(/\.js$/, ".ts")));
}

/** Everything `roots` reach by imports that carry code, and what of it a pure module may not use. */
export function checkClosure(roots: readonly string[], options: ClosureOptions): Finding[] {
  const via = new Map<string, string | undefined>(roots.map((r) => [r, undefined]));
  const queue = [...roots];
  const findings: Finding[] = [];
  const chainFrom = (file: string): string[] => {
    const chain: string[] = [];
    for (let f: string | undefined = file; f !== undefined; f = via.get(f))
      chain.push(relative(options.base, f));
    return chain;
  };
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    const { imports, clocks } = parse(file);
    for (const clock of clocks) findings.push({ what: clock, chain: chainFrom(file) });
    for (const spec of imports) {
      if (!spec.startsWith(".")) {
        const bad = forbiddenModule(spec, options.allowedPackages);
        if (bad) findings.push({ what: bad, chain: chainFrom(file) });
        continue;
      }
      const target = resolve(file, spec);
      if (via.has(target)) continue;
      via.set(target, file);
      queue.push(target);
    }
  }
  return findings;
}

/** A finding as one line: what, then the files that reach it. */
export function describeFinding(f: Finding): string {
  return `${f.what} <- ${f.chain.join(" <- ")}`;
}
