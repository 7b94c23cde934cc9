import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { toBinary } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  createHandlerContext,
  type HandlerContext,
} from "@connectrpc/connect";
import {
  type AgentMessage,
  AgentService,
  type ControlMessage,
  ControlMessageSchema,
} from "../../gen/llmgw/v1/agent_pb.js";
import { COMPRESSED_FLAG, END_STREAM_FLAG, envelope } from "./envelopes.js";
import {
  type AgentCallProtocol,
  callEnd,
  nodeHeaders,
  responseCompression,
  responseContentType,
} from "./protocol.js";
import { readRequests } from "./requests.js";

/** The agent stream's implementation: what Connect's router calls, and what this path calls. */
export type AgentStreamHandler = (
  requests: AsyncIterable<AgentMessage>,
  ctx: HandlerContext,
) => AsyncIterable<ControlMessage>;

export interface AgentCallOptions {
  readMaxBytes: number;
  /** Aborting it aborts the call's signal (the server is shutting down). */
  shutdownSignal: AbortSignal;
  contextValues: (req: Http2ServerRequest) => ContextValues;
}

/** Connect's default: smaller replies are not worth compressing. */
const COMPRESS_MIN_BYTES = 1024;

/**
 * Serves one agent stream (AgentService.Connect) in gRPC or Connect
 * streaming, binary and uncompressed requests, on Node's HTTP/2 request and
 * response.
 *
 * Connect's handler runs every message through a chain of async generators
 * (split, decompress, parse, invoke, serialize, join), about ten promises
 * per message in each direction, and each idle stream keeps one such chain
 * waiting for its next message. At 10,000 streams those waiting chains would
 * be most of what each heartbeat leaves alive past a young-generation
 * collection (the fan-in bench, docs/PERFORMANCE.md): here a message is
 * decoded as its bytes arrive and
 * handed to the handler's one waiting read. The handler, its context, its
 * errors and the way a call ends are Connect's (its context, its protocol
 * helpers); only the framing is done here.
 */
export async function serveAgentCall(
  req: Http2ServerRequest,
  res: Http2ServerResponse,
  protocol: AgentCallProtocol,
  handler: AgentStreamHandler,
  opts: AgentCallOptions,
): Promise<void> {
  const requestAbort = new AbortController();
  const compressed = responseCompression(protocol, req.headers);
  // Replies of this size or more are compressed when the client accepts it
  // (Connect's default threshold); the rest are framed without a promise.
  const wire = (flags: number, data: Uint8Array): Uint8Array | Promise<Uint8Array> =>
    compressed && data.length >= COMPRESS_MIN_BYTES
      ? compressed.compression.compress(data).then((z) => envelope(flags | COMPRESSED_FLAG, z))
      : envelope(flags, data);
  const ctx = createHandlerContext({
    service: AgentService,
    method: AgentService.method.connect,
    protocolName: protocol,
    requestMethod: "POST",
    url: `${"encrypted" in req.socket && req.socket.encrypted ? "https" : "http"}://${req.authority}${req.url}`,
    shutdownSignal: opts.shutdownSignal,
    requestSignal: requestAbort.signal,
    requestHeader: webHeaders(req.headers),
    responseHeader: {
      "content-type": responseContentType(protocol),
      ...(compressed ? { [compressed.header]: compressed.compression.name } : {}),
    },
    contextValues: opts.contextValues(req),
  });
  // Connect's reading of a reset: a code other than NO_ERROR aborts with a reason.
  const requests = readRequests(req, protocol, opts.readMaxBytes, (rstCode) =>
    requestAbort.abort(
      rstCode === 0
        ? undefined
        : new ConnectError(`the agent reset the stream (HTTP/2 error ${rstCode})`, Code.Canceled),
    ),
  );
  let failure: unknown;
  try {
    for await (const m of handler(requests, ctx)) {
      if (gone(res)) throw new ConnectError("the stream is closed", Code.Canceled);
      writeHead(res, ctx);
      let bytes = wire(0, serialized(m));
      if (bytes instanceof Promise) {
        bytes = await bytes;
        if (gone(res)) throw new ConnectError("the stream is closed", Code.Canceled);
      }
      if (!res.write(bytes)) await drained(res);
    }
  } catch (err) {
    failure = err;
  }
  // The handler reads no more: the rest of the request is read unheeded, so the stream can close.
  void requests.return();
  ctx.abort(failure);
  if (gone(res)) return;
  const end = callEnd(protocol, failure, ctx.responseTrailer);
  writeHead(res, ctx);
  if (end.endStream) {
    const bytes = await wire(END_STREAM_FLAG, end.endStream);
    if (gone(res)) return;
    res.write(bytes);
  }
  if (end.trailers) res.addTrailers(end.trailers);
  await new Promise<void>((resolve) => {
    res.once("close", resolve);
    res.end(resolve);
  });
}

/** A reply's bytes; a message that does not serialize fails the call as Connect's serializer does. */
function serialized(m: ControlMessage): Uint8Array {
  try {
    return toBinary(ControlMessageSchema, m);
  } catch (err) {
    throw new ConnectError(
      `serialize binary: ${err instanceof Error ? err.message : String(err)}`,
      Code.Internal,
    );
  }
}

/** The response cannot be written any more (the stream closed, or was reset by either side). */
function gone(res: Http2ServerResponse): boolean {
  return res.writableEnded || res.stream.destroyed || res.stream.closed;
}

function writeHead(res: Http2ServerResponse, ctx: HandlerContext): void {
  if (!res.headersSent) res.writeHead(200, nodeHeaders(ctx.responseHeader));
}

/** Resolves when `res` can take more, or has closed (the next write sees it). */
function drained(res: Http2ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.once("drain", done);
    res.once("close", done);
  });
}

/** Node's request headers as web Headers, without HTTP/2 pseudo-headers (as Connect's adapter reads them). */
function webHeaders(h: Http2ServerRequest["headers"]): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(h)) {
    if (k.startsWith(":") || v === undefined) continue;
    if (Array.isArray(v)) for (const one of v) out.append(k, one);
    else out.append(k, v);
  }
  return out;
}
