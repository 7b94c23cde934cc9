/**
 * Environment variable names a catalog may never give an engine: each one
 * makes a program (the engine, its interpreter, the dynamic linker, a shell
 * or a library) load or run code, or trust what it should not, so whoever
 * writes the catalog would run code on every GPU node. The catalog schema
 * refuses them at apply, and every agent refuses them again at start (a
 * catalog forged into the log must not pass either). Pure: no I/O.
 *
 * Names are compared case-insensitively (no spelling escapes the list);
 * `*` in a pattern stands for any run of characters.
 */

export interface DeniedEnv {
  /** The pattern that matched, e.g. `LD_*`. */
  pattern: string;
  /** Why the name is denied, said in the refusal. */
  why: string;
}

const DENIED: ReadonlyArray<readonly [pattern: string, why: string]> = [
  [
    "LD_*",
    "the dynamic linker loads libraries and auditors it names (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT)",
  ],
  ["DYLD_*", "the macOS dynamic linker loads libraries it names"],
  [
    "*PATH",
    "a search path decides which programs, libraries and modules are loaded (PATH, PYTHONPATH, CLASSPATH, GCONV_PATH…)",
  ],
  [
    "*_OPTIONS",
    "runtimes read extra command-line options from it (NODE_OPTIONS, JAVA_TOOL_OPTIONS, RES_OPTIONS)",
  ],
  ["*_OPTS", "launch scripts pass it to their runtime as options (JAVA_OPTS)"],
  ["*_COMMAND", "programs run it as a command (PROMPT_COMMAND, GIT_SSH_COMMAND)"],
  ["*_PRELOAD", "a library or module named here is loaded first"],
  ["PYTHON*", "the Python interpreter runs or imports what it names (PYTHONSTARTUP, PYTHONHOME, PYTHONPATH)"],
  ["NODE_*", "Node.js loads modules, options and CAs from it"],
  ["PERL*", "Perl loads modules and options from it (PERL5OPT, PERL5LIB)"],
  ["RUBY*", "Ruby loads modules and options from it (RUBYOPT, RUBYLIB)"],
  ["GEM_*", "Ruby loads gems from where it points"],
  ["LUA_*", "Lua runs LUA_INIT at start"],
  ["JAVA_*", "the JVM reads options and agents from it"],
  ["_JAVA_*", "the JVM reads options and agents from it"],
  ["JDK_*", "the JVM reads options and agents from it"],
  ["BASH_ENV", "bash runs the file it names before a script"],
  ["BASH_FUNC_*", "bash imports functions from it"],
  ["ENV", "sh runs the file it names"],
  ["SHELLOPTS", "bash takes shell options (xtrace with PS4 runs code) from it"],
  ["BASHOPTS", "bash takes shell options from it"],
  ["PS4", "bash expands it, running command substitutions, under xtrace"],
  ["IFS", "shell scripts split words with it"],
  ["CDPATH", "shell scripts resolve directories with it"],
  ["SHELL", "programs start it as the user's shell"],
  ["EDITOR", "programs run it as a command"],
  ["VISUAL", "programs run it as a command"],
  ["PAGER", "programs run it as a command"],
  ["BROWSER", "programs run it as a command"],
  ["CC", "compilers started at run time (Triton, torch extensions) are the program it names"],
  ["CXX", "compilers started at run time are the program it names"],
  ["HOME", "programs read their configuration and user site packages from under it"],
  ["XDG_*", "programs read their configuration from where it points"],
  ["GLIBC_TUNABLES", "glibc's tunables (the variables glibc ignores for setuid programs)"],
  ["GCONV_*", "glibc loads character conversion modules from it"],
  ["GETCONF_DIR", "glibc runs programs from it (one of the variables glibc ignores for setuid programs)"],
  ["HOSTALIASES", "glibc resolves host names through the file it names"],
  ["LOCALDOMAIN", "glibc's resolver takes its search domains from it"],
  ["LOCPATH", "glibc loads locale data from it"],
  ["MALLOC_*", "glibc's allocator writes traces to the file it names and takes tunables from it"],
  ["NIS_PATH", "glibc's name service reads it"],
  ["NLSPATH", "glibc loads message catalogs from it"],
  ["RESOLV_*", "glibc's resolver reads its configuration from it"],
  ["OPENSSL_*", "OpenSSL loads its configuration and engines (shared libraries) from it"],
  ["SSL_CERT_*", "TLS trusts the certificates it names, so model downloads can be served by anyone"],
  ["REQUESTS_CA_BUNDLE", "Python's requests trusts the certificates it names"],
  ["CURL_CA_BUNDLE", "curl and Python libraries trust the certificates it names"],
  ["CUDA_VISIBLE_DEVICES", "the agent sets it to the shard's GPUs"],
];

const COMPILED = DENIED.map(([pattern, why]) => ({ pattern, why, re: globToRegExp(pattern) }));

/** The deny list as written, for docs and --help. */
export const DENIED_ENV_PATTERNS: readonly string[] = DENIED.map(([p]) => p);

/** Why `name` may not be set in an engine's environment by the catalog, or undefined when it may. */
export function deniedEnv(name: string): DeniedEnv | undefined {
  const hit = COMPILED.find((d) => d.re.test(name));
  return hit && { pattern: hit.pattern, why: hit.why };
}

/** Whether `name` matches one of `patterns` (`*` for any run of characters; case-insensitive). */
export function matchesEnvPattern(name: string, patterns: readonly string[]): boolean {
  return patterns.some((p) => globToRegExp(p).test(name));
}

function globToRegExp(pattern: string): RegExp {
  const body = pattern
    .split("*")
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${body}$`, "i");
}
