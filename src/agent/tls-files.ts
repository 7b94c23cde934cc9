/**
 * The agent's certificate, key and CA, read from files and read again when
 * the files change, so a rotated certificate is used from the next
 * connection on without restarting the agent (and without touching the
 * engines or the stream that is up).
 */

import { X509Certificate } from "node:crypto";
import { unwatchFile, watchFile } from "node:fs";
import { readFile } from "node:fs/promises";
import { createSecureContext } from "node:tls";
import type { TlsIdentity } from "./client/index.js";

export interface TlsPaths {
  cert: string;
  key: string;
  ca: string;
}

/** A certificate file set that cannot be used: which file and why. */
export class TlsFilesError extends Error {
  override readonly name = "TlsFilesError";
}

async function readIdentity(paths: TlsPaths): Promise<TlsIdentity> {
  const out: Partial<TlsIdentity> = {};
  for (const [k, path] of Object.entries(paths) as [keyof TlsPaths, string][]) {
    try {
      out[k] = await readFile(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? String(err);
      throw new TlsFilesError(`cannot read --${k === "ca" ? "ca" : `tls-${k}`} ${path} (${code})`, {
        cause: err,
      });
    }
  }
  const id = out as TlsIdentity;
  try {
    // Refuses a key that does not match the certificate, or unparsable PEM.
    createSecureContext({ cert: id.cert, key: id.key, ca: id.ca });
  } catch (err) {
    throw new TlsFilesError(
      `the certificate ${paths.cert}, key ${paths.key} and CA ${paths.ca} cannot be used together: ${err instanceof Error ? err.message : String(err)}`,
      { cause: err },
    );
  }
  return id;
}

/** The CN of a PEM certificate's subject; undefined when it has none. */
export function certificateCommonName(pem: Buffer | string): string | undefined {
  const subject = new X509Certificate(pem).subject;
  return /^CN=(.+)$/m.exec(subject)?.[1]?.trim();
}

export class TlsFiles {
  #identity: TlsIdentity;
  #reloads = 0;
  #closed = false;

  private constructor(
    readonly paths: TlsPaths,
    identity: TlsIdentity,
    private readonly onChange: (e: { ok: true } | { ok: false; error: string }) => void,
  ) {
    this.#identity = identity;
  }

  /** Reads the files (failing with a message naming the file) and watches them for changes. */
  static async open(
    paths: TlsPaths,
    onChange: (e: { ok: true } | { ok: false; error: string }) => void = () => {},
    pollMs = 1000,
  ): Promise<TlsFiles> {
    const files = new TlsFiles(paths, await readIdentity(paths), onChange);
    for (const p of new Set(Object.values(paths))) {
      watchFile(p, { interval: pollMs, persistent: false }, (cur, prev) => {
        if (cur.mtimeMs !== prev.mtimeMs || cur.size !== prev.size || cur.ino !== prev.ino)
          void files.#reload();
      });
    }
    return files;
  }

  /** What the next connection presents. */
  get identity(): TlsIdentity {
    return this.#identity;
  }

  /** Successful reloads since start. */
  get reloads(): number {
    return this.#reloads;
  }

  get commonName(): string | undefined {
    return certificateCommonName(this.#identity.cert);
  }

  close(): void {
    this.#closed = true;
    for (const p of new Set(Object.values(this.paths))) unwatchFile(p);
  }

  async #reload(): Promise<void> {
    if (this.#closed) return;
    try {
      // A rotation writes the files one after another: a pair caught half
      // written fails the check and the old identity stays until the next change.
      this.#identity = await readIdentity(this.paths);
      this.#reloads++;
      this.onChange({ ok: true });
    } catch (err) {
      this.onChange({ ok: false, error: err instanceof Error ? err.message : String(err) });
    }
  }
}
