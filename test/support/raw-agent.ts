/**
 * Bytes straight onto an agent stream, below the Connect client: for fuzzing
 * and for messages a well-behaved client cannot build (undecodable frames,
 * unknown fields, lengths that lie). One HTTP/2 connection with a client
 * certificate; each call is one stream in one of the three protocols the
 * gateway serves, and resolves with the Connect code it ended with and the
 * messages it carried.
 */
import * as http2 from "node:http2";
import { create, fromBinary, fromJsonString, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import {
  AgentMessageSchema,
  type ControlMessage,
  ControlMessageSchema,
} from "../../src/gen/llmgw/v1/agent_pb.js";
import type { Protocol } from "./agent.js";

export interface RawResult {
  /** Connect code name ("OK", "InvalidArgument", …). */
  code: string;
  message: string;
  /** Messages the gateway sent before the end, decoded. */
  messages: ControlMessage[];
}

const PATH = "/llmgw.v1.AgentService/Connect";

/** Messages in binary protobuf or in protobuf JSON (all three protocols carry either). */
export type Codec = "proto" | "json";

const CONTENT_TYPE: Record<Protocol, string> = {
  grpc: "application/grpc",
  "grpc-web": "application/grpc-web",
  connect: "application/connect",
};

/** A length-prefixed message frame (the same envelope in all three protocols). */
export function frame(payload: Uint8Array, opts: { flags?: number; length?: number } = {}): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(opts.flags ?? 0, 0);
  head.writeUInt32BE(opts.length ?? payload.length, 1);
  return Buffer.concat([head, payload]);
}

/** The wire bytes of one agent message. */
export function encode(init: MessageInitShape<typeof AgentMessageSchema>): Uint8Array {
  return toBinary(AgentMessageSchema, create(AgentMessageSchema, init));
}

export class RawAgent {
  #session: http2.ClientHttp2Session | undefined;

  constructor(
    readonly baseUrl: string,
    readonly tls: { ca: string; cert?: string; key?: string } | undefined,
  ) {}

  #connect(): http2.ClientHttp2Session {
    if (this.#session && !this.#session.closed && !this.#session.destroyed) return this.#session;
    const s = http2.connect(this.baseUrl, this.tls ?? {});
    s.on("error", () => {});
    this.#session = s;
    return s;
  }

  /** Sends `body` on a new stream, half-closes it, and reads the answer to its end. */
  call(protocol: Protocol, body: Buffer, timeoutMs = 10_000, codec: Codec = "proto"): Promise<RawResult> {
    const session = this.#connect();
    const headers: http2.OutgoingHttpHeaders = {
      ":method": "POST",
      ":path": PATH,
      "content-type": `${CONTENT_TYPE[protocol]}+${codec}`,
    };
    if (protocol === "grpc") headers["te"] = "trailers";
    if (protocol === "connect") headers["connect-protocol-version"] = "1";
    return new Promise<RawResult>((resolve, reject) => {
      const req = session.request(headers);
      const timer = setTimeout(() => {
        req.close(http2.constants.NGHTTP2_CANCEL);
        reject(new Error(`no answer within ${timeoutMs} ms (${protocol}, ${body.length} bytes)`));
      }, timeoutMs);
      let head: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      req.on("response", (h) => {
        head = h;
      });
      req.on("trailers", (t) => {
        trailers = t;
      });
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("error", (err) => {
        clearTimeout(timer);
        reject(err);
      });
      req.on("close", () => {
        clearTimeout(timer);
        try {
          resolve(interpret(protocol, codec, head, trailers, Buffer.concat(chunks), req.rstCode));
        } catch (err) {
          reject(err);
        }
      });
      req.end(body);
    });
  }

  close(): void {
    this.#session?.destroy();
  }
}

function interpret(
  protocol: Protocol,
  codec: Codec,
  head: http2.IncomingHttpHeaders,
  trailers: http2.IncomingHttpHeaders,
  body: Buffer,
  rstCode: number,
): RawResult {
  const messages: ControlMessage[] = [];
  let end: { code: string; message: string } | undefined;
  const status = Number(head[":status"] ?? 0);
  for (let off = 0; off + 5 <= body.length; ) {
    const flags = body.readUInt8(off);
    const len = body.readUInt32BE(off + 1);
    const payload = body.subarray(off + 5, off + 5 + len);
    off += 5 + len;
    if (protocol === "connect" && flags & 0x02) {
      const j = JSON.parse(payload.toString("utf8")) as { error?: { code?: string; message?: string } };
      end = j.error
        ? { code: connectCodeName(j.error.code ?? "unknown"), message: j.error.message ?? "" }
        : { code: "OK", message: "" };
    } else if (protocol === "grpc-web" && flags & 0x80) {
      const t = Object.fromEntries(
        payload
          .toString("utf8")
          .split("\r\n")
          .filter((l) => l.includes(":"))
          .map((l) => [l.slice(0, l.indexOf(":")).trim().toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]),
      );
      end = grpcEnd(t["grpc-status"], t["grpc-message"]);
    } else {
      messages.push(
        codec === "json"
          ? fromJsonString(ControlMessageSchema, payload.toString("utf8"))
          : fromBinary(ControlMessageSchema, payload),
      );
    }
  }
  if (!end) {
    const st = trailers["grpc-status"] ?? head["grpc-status"];
    const msg = trailers["grpc-message"] ?? head["grpc-message"];
    if (st !== undefined) end = grpcEnd(String(st), msg === undefined ? undefined : String(msg));
  }
  if (!end && protocol === "connect" && status !== 200 && status !== 0) {
    // A Connect error before the stream started is a unary-style JSON body.
    let j: { code?: string; message?: string } = {};
    try {
      j = JSON.parse(body.toString("utf8"));
    } catch {
      // not JSON
    }
    end = { code: connectCodeName(j.code ?? `http ${status}`), message: j.message ?? "" };
  }
  if (!end) {
    throw new Error(
      `the stream ended without a status (HTTP ${status}, RST ${rstCode}, ${body.length} bytes of body)`,
    );
  }
  return { ...end, messages };
}

function grpcEnd(status: string | undefined, message: string | undefined): { code: string; message: string } {
  const n = Number(status);
  return {
    code: n === 0 ? "OK" : (Code[n] ?? `grpc-status ${status}`),
    message: message ? decodeURIComponent(message) : "",
  };
}

/** "invalid_argument" → "InvalidArgument". */
function connectCodeName(code: string): string {
  return code
    .split("_")
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join("");
}
