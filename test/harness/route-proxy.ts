/**
 * A TCP proxy in front of one cluster member's route port that reads the
 * route protocol as it forwards it, so that a test can hold back one raft
 * group's traffic between one member and the rest: the member stays in the
 * cluster (its routes, the meta group, its clients and the consumers placed
 * on it all work) while its copy of one stream falls behind, as a replica
 * cut off from its stream's leader does.
 *
 * Route traffic is text lines (INFO, CONNECT, PING, RS+ …) and messages
 * (`RMSG`/`HMSG … <size>` followed by that many bytes); route compression
 * must be off (the harness sets it so for proxied routes). A message whose
 * subject names a held raft group, to or from the held member, is dropped
 * whole; everything else is forwarded unchanged. Raft traffic travels on the
 * route pinned to the system account, where nats-server 2.15 leaves the
 * account out of the message line (`RMSG <subject> <reply> <size>`); every
 * token of the line is looked at, so either form is read.
 */
import { connect, type Server, type Socket } from "node:net";
import { listenOnLoopback } from "./loopback-listen.js";

/** What is held: traffic of one raft group (`$NRG.*.<group>`) to and from one member. */
export interface Hold {
  member: string;
  group: string;
}

export class RouteProxy {
  readonly #sockets = new Set<Socket>();
  /** Messages dropped under a hold, for a test to check the hold bit. */
  dropped = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    /** The member behind this proxy. */
    readonly member: string,
    private readonly targetPort: Promise<number>,
    private readonly holds: () => readonly Hold[],
  ) {}

  /**
   * Listens on a port of its own choosing (`port`). `targetPort` is the
   * member's route port, which the member chooses when it starts: a route
   * opened to the proxy before then waits for it.
   */
  static async start(
    member: string,
    targetPort: Promise<number>,
    holds: () => readonly Hold[],
  ): Promise<RouteProxy> {
    let proxy: RouteProxy | undefined;
    const { server, port } = await listenOnLoopback((client) => proxy?.accept(client));
    proxy = new RouteProxy(server, port, member, targetPort, holds);
    return proxy;
  }

  private accept(client: Socket): void {
    // Until the member's route port is known, what the client sends stays
    // buffered in its socket (no reader yet).
    this.#sockets.add(client);
    client.once("close", () => this.#sockets.delete(client));
    client.on("error", () => client.destroy());
    void this.targetPort.then((port) => {
      if (!client.destroyed) this.pipe(client, port);
    });
  }

  private pipe(client: Socket, targetPort: number): void {
    const upstream = connect(targetPort, "127.0.0.1");
    // The member that opened the route says its name in its first INFO
    // line. Later INFO lines on the route may speak of other members: from
    // nats-server 2.11 on a member gossips what it knows of the cluster's
    // other members over its routes ("gossip_mode"), so they never rename
    // the link (2.10 sent only its own).
    const link = { peer: "" };
    for (const s of [client, upstream]) {
      this.#sockets.add(s);
      // Either side closing or failing ends both (a member closing a
      // duplicate route must be seen as closed by the other member).
      s.on("close", () => {
        this.#sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    const dropsBetween = (subjectTokens: readonly string[]) =>
      this.holds().some(
        (h) =>
          (h.member === this.member || h.member === link.peer) &&
          subjectTokens.some((t) => t.startsWith("$NRG.") && t.endsWith(`.${h.group}`)),
      );
    forward(
      client,
      upstream,
      dropsBetween,
      (info) => {
        if (link.peer === "" && typeof info["server_name"] === "string") link.peer = info["server_name"];
      },
      () => this.dropped++,
    );
    forward(
      upstream,
      client,
      dropsBetween,
      () => {},
      () => this.dropped++,
    );
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const CRLF = Buffer.from("\r\n");

/** Forwards route protocol from `from` to `to`, dropping the messages `drop` names. */
function forward(
  from: Socket,
  to: Socket,
  drop: (tokens: readonly string[]) => boolean,
  onInfo: (info: Record<string, unknown>) => void,
  onDrop: () => void,
): void {
  let buf: Buffer = Buffer.alloc(0);
  // Bytes of a message body (with its CRLF) still to pass or drop.
  let body = 0;
  let dropping = false;
  from.on("data", (chunk: Buffer) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    const out: Buffer[] = [];
    let at = 0;
    for (;;) {
      if (body > 0) {
        const n = Math.min(body, buf.length - at);
        if (!dropping) out.push(buf.subarray(at, at + n));
        at += n;
        body -= n;
        if (body > 0) break;
        continue;
      }
      const eol = buf.indexOf(CRLF, at);
      if (eol < 0) break;
      const line = buf.subarray(at, eol + 2);
      at = eol + 2;
      const text = line.subarray(0, line.length - 2).toString("latin1");
      const op = text.slice(0, 4).toUpperCase();
      if (op === "RMSG" || op === "HMSG" || op === "LMSG") {
        const tokens = text.split(" ");
        // The last token is the body's size (headers included, for HMSG).
        body = Number(tokens[tokens.length - 1]) + 2;
        dropping = drop(tokens.slice(1, -1));
        if (dropping) onDrop();
        else out.push(line);
        continue;
      }
      if (op === "INFO") {
        try {
          onInfo(JSON.parse(text.slice(5)) as Record<string, unknown>);
        } catch {
          // Not ours to judge: forwarded as it came.
        }
      }
      out.push(line);
    }
    buf = buf.subarray(at);
    if (out.length > 0) to.write(out.length === 1 ? out[0]! : Buffer.concat(out));
  });
}
