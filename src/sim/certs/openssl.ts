/** Runs the `openssl` command line; certificates are made with it rather than hand-rolled crypto. */
import { execFile } from "node:child_process";

export class OpensslError extends Error {
  override readonly name = "OpensslError";
}

export const OPENSSL_INSTALL_HINT =
  "openssl was not found on PATH: install it (Debian/Ubuntu: `sudo apt-get install openssl`; " +
  "Fedora/RHEL: `sudo dnf install openssl`; macOS: `brew install openssl`) or set LLMGW_OPENSSL to its path";

export function opensslBinary(): string {
  return process.env["LLMGW_OPENSSL"] || "openssl";
}

export function openssl(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(opensslBinary(), args, { encoding: "utf8" }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      if ((err as NodeJS.ErrnoException).code === "ENOENT")
        return reject(new OpensslError(OPENSSL_INSTALL_HINT));
      reject(new OpensslError(`openssl ${args[0]} failed: ${stderr.trim() || err.message}`));
    });
  });
}
