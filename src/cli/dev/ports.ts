import { createServer } from "node:net";

/** Whether `port` can be bound on 127.0.0.1 now. */
function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

/** A free loopback port chosen by the kernel. */
function anyPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const a = srv.address();
      const port = typeof a === "object" && a ? a.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * The preferred port when it is free (so addresses stay the same from run to
 * run), otherwise any free one. 0 means "any".
 */
export async function pickPort(preferred: number): Promise<number> {
  if (preferred > 0 && (await canBind(preferred))) return preferred;
  return anyPort();
}
