/**
 * A TCP proxy on a loopback port that a test can cut: `cut()` drops every
 * connection through it and refuses new ones until `restore()`. Put between
 * a process and NATS, it is a network partition of that one process.
 */
import { connect, type Server, type Socket } from "node:net";
import { listenOnLoopback } from "../harness/loopback-listen.js";

export class TcpProxy {
  readonly #sockets = new Set<Socket>();
  #cut = false;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    readonly targetPort: number,
  ) {}

  static async start(targetPort: number): Promise<TcpProxy> {
    let proxy: TcpProxy | undefined;
    const { server, port } = await listenOnLoopback((client) => proxy?.accept(client));
    proxy = new TcpProxy(server, port, targetPort);
    return proxy;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  get isCut(): boolean {
    return this.#cut;
  }

  private accept(client: Socket): void {
    if (this.#cut) {
      client.destroy();
      return;
    }
    const upstream = connect(this.targetPort, "127.0.0.1");
    for (const s of [client, upstream]) {
      this.#sockets.add(s);
      s.on("close", () => this.#sockets.delete(s));
      // A reset on one side ends both; nothing to report.
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Drops every open connection and refuses new ones. */
  cut(): void {
    this.#cut = true;
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
  }

  restore(): void {
    this.#cut = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
