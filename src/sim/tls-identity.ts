/** A simulated node's certificate files, as `llmgw certs` writes them. */
import { readFile } from "node:fs/promises";
import type { TlsIdentity } from "../agent/client/index.js";
import { certsLayout } from "./certs/layout.js";

/** Reads a node's certificate files as written by `llmgw certs`; names the missing file and how to make it. */
export async function loadTlsIdentity(certsDir: string, nodeId: string): Promise<TlsIdentity> {
  const files = certsLayout(certsDir);
  const paths = { ca: files.ca, cert: files.nodeCert(nodeId), key: files.nodeKey(nodeId) };
  const out: Partial<TlsIdentity> = {};
  for (const [k, path] of Object.entries(paths) as [keyof TlsIdentity, string][]) {
    try {
      out[k] = await readFile(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new Error(
        `cannot read ${path} (${code ?? String(err)}): create the fleet's certificates with ` +
          `\`llmgw certs --out ${certsDir} --node ${nodeId}\` (or --nodes N --node-prefix P), or use --insecure-dev`,
      );
    }
  }
  return out as TlsIdentity;
}
