/** host:port, with IPv6 hosts in brackets ("[::1]:7443"). */
export interface ListenAddress {
  host: string;
  port: number;
}

/** Where a listener without a host listens: this machine only. Every address takes an explicit 0.0.0.0 (or [::]). */
export const DEFAULT_LISTEN_HOST = "127.0.0.1";

/** `host:port`, `[v6]:port`, or a port alone (`:9090`, `9090`) meaning loopback. */
export function parseListen(value: string): ListenAddress {
  const m = /^(?:(?:\[([^\]]+)\]|([^:[\]]*)):)?(\d{1,5})$/.exec(value.trim());
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535) {
    throw new RangeError(
      `listen address must be host:port (e.g. 127.0.0.1:9090, 0.0.0.0:9090 for every address, or [::1]:9090; a port alone listens on loopback), got ${JSON.stringify(value)}`,
    );
  }
  const host = m[1] ?? m[2] ?? "";
  return { host: host === "" ? DEFAULT_LISTEN_HOST : host, port };
}

/** True for addresses only this machine can reach. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
