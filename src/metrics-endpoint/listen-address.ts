/** host:port, with IPv6 hosts in brackets ("[::1]:7443"). */
export interface ListenAddress {
  host: string;
  port: number;
}

export function parseListen(value: string): ListenAddress {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(value.trim());
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535) {
    throw new RangeError(
      `listen address must be host:port (e.g. 0.0.0.0:7443 or [::1]:7443), got ${JSON.stringify(value)}`,
    );
  }
  const host = m[1] ?? m[2] ?? "";
  return { host: host === "" ? "0.0.0.0" : host, port };
}

/** True for addresses only this machine can reach. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
