/**
 * How much engine configuration a catalog profile may carry. The catalog is
 * one log event (at most the server's 1 MiB message) holding up to 1,000
 * models of 32 profiles; real engine command lines are a few dozen
 * arguments, so these bounds only stop a catalog that is a payload.
 */
export const ENGINE_LIMITS = {
  /** Arguments appended to the engine's command. */
  maxArgs: 128,
  /** Characters of one argument. */
  maxArgChars: 1024,
  /** Environment variables. */
  maxEnv: 64,
  /** Characters of one variable's value. */
  maxEnvValueChars: 4096,
  /** Characters of a variable's name. */
  maxEnvNameChars: 128,
  /** Characters of all arguments and of all names and values together. */
  maxTotalChars: 32_768,
} as const;

/** What a shell and `execve` accept as a variable name (no `=`, no NUL, not starting with a digit). */
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
