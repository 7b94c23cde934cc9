/**
 * A certificate, its key and a CA, read from files and read again when the
 * files change, so a rotated certificate is used from the next connection on
 * without a restart. The agent presents its own (the CA verifies the
 * gateway); the gateway serves its own (the CA verifies agents).
 */

import { X509Certificate } from "node:crypto";
import { type Stats, unwatchFile, watchFile } from "node:fs";
import { readFile } from "node:fs/promises";
import { createSecureContext } from "node:tls";

/** PEM contents of the three files. */
export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  ca: Buffer;
}

export interface TlsPaths {
  cert: string;
  key: string;
  ca: string;
}

/** The flag each file came from, named in errors. */
export type TlsFlagNames = Record<keyof TlsPaths, string>;

/** A reload: the new material is in use, or it is refused and the old one stays. */
export type TlsChange = { ok: true } | { ok: false; error: string };

export interface TlsFilesOptions {
  flags?: TlsFlagNames;
  onChange?: (e: TlsChange) => void;
  /** How often the files are looked at (a poll: it sees files replaced by rename, as rotations do). */
  pollMs?: number;
}

const AGENT_FLAGS: TlsFlagNames = { cert: "--tls-cert", key: "--tls-key", ca: "--ca" };

/** A certificate file set that cannot be used: which file and why. */
export class TlsFilesError extends Error {
  override readonly name = "TlsFilesError";
}

async function readMaterial(paths: TlsPaths, flags: TlsFlagNames): Promise<TlsMaterial> {
  const out: Partial<TlsMaterial> = {};
  for (const [k, path] of Object.entries(paths) as [keyof TlsPaths, string][]) {
    try {
      out[k] = await readFile(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? String(err);
      throw new TlsFilesError(`cannot read ${flags[k]} ${path} (${code})`, { cause: err });
    }
  }
  const m = out as TlsMaterial;
  try {
    // Refuses a key that does not match the certificate, or unparsable PEM.
    createSecureContext({ cert: m.cert, key: m.key, ca: m.ca });
  } catch (err) {
    throw new TlsFilesError(
      `the certificate ${paths.cert}, key ${paths.key} and CA ${paths.ca} cannot be used together: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  }
  return m;
}

/** The CN of a PEM certificate's subject; undefined when it has none. */
export function certificateCommonName(pem: Buffer | string): string | undefined {
  const subject = new X509Certificate(pem).subject;
  return /^CN=(.+)$/m.exec(subject)?.[1]?.trim();
}

export class TlsFiles {
  #material: TlsMaterial;
  #reloads = 0;
  #closed = false;
  readonly #watched = new Map<string, (cur: Stats, prev: Stats) => void>();

  private constructor(
    readonly paths: TlsPaths,
    material: TlsMaterial,
    private readonly flags: TlsFlagNames,
    private readonly onChange: (e: TlsChange) => void,
  ) {
    this.#material = material;
  }

  /** Reads the files (failing with a message naming the flag and file) and watches them for changes. */
  static async open(paths: TlsPaths, opts: TlsFilesOptions = {}): Promise<TlsFiles> {
    const flags = opts.flags ?? AGENT_FLAGS;
    const files = new TlsFiles(paths, await readMaterial(paths, flags), flags, opts.onChange ?? (() => {}));
    for (const p of new Set(Object.values(paths))) {
      const listener = (cur: Stats, prev: Stats) => {
        if (cur.mtimeMs !== prev.mtimeMs || cur.size !== prev.size || cur.ino !== prev.ino)
          void files.#reload();
      };
      files.#watched.set(p, listener);
      watchFile(p, { interval: opts.pollMs ?? 1000, persistent: false }, listener);
    }
    return files;
  }

  /** What the next connection uses. */
  get material(): TlsMaterial {
    return this.#material;
  }

  /** Successful reloads since start. */
  get reloads(): number {
    return this.#reloads;
  }

  get commonName(): string | undefined {
    return certificateCommonName(this.#material.cert);
  }

  close(): void {
    this.#closed = true;
    // Only this set's listeners: another set in the process may watch the same file.
    for (const [p, listener] of this.#watched) unwatchFile(p, listener);
    this.#watched.clear();
  }

  async #reload(): Promise<void> {
    if (this.#closed) return;
    try {
      // A rotation writes the files one after another: a pair caught half
      // written fails the check and the old material stays until the next change.
      this.#material = await readMaterial(this.paths, this.flags);
      this.#reloads++;
      this.onChange({ ok: true });
    } catch (err) {
      this.onChange({ ok: false, error: err instanceof Error ? err.message : String(err) });
    }
  }
}
