import { Code, ConnectError } from "@connectrpc/connect";
import { type Compression, compressionNegotiate } from "@connectrpc/connect/protocol";
import * as connectProtocol from "@connectrpc/connect/protocol-connect";
import * as grpcProtocol from "@connectrpc/connect/protocol-grpc";
import * as grpcWebProtocol from "@connectrpc/connect/protocol-grpc-web";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { END_STREAM_FLAG } from "./envelopes.js";

/**
 * The two protocols an agent stream is served in directly, and how each
 * one frames the end of a call. Their texts and codes are Connect's own
 * (its exported protocol helpers write them), so an agent cannot tell this
 * path from Connect's handler.
 */
export type AgentCallProtocol = "grpc" | "connect";

/** Request headers as Node hands them over (lower-case names). */
export type NodeRequestHeaders = Record<string, string | string[] | undefined>;

/**
 * Which protocol serves a request directly, or undefined when Connect's
 * handler must: anything but a binary, uncompressed, untimed gRPC or
 * Connect streaming POST (gRPC-Web, JSON, compression, a deadline, a
 * malformed header) goes there and is answered as Connect answers it.
 */
export function directProtocol(
  method: string | undefined,
  headers: NodeRequestHeaders,
): AgentCallProtocol | undefined {
  if (method !== "POST") return undefined;
  const type = headers["content-type"];
  if (typeof type !== "string") return undefined;
  if (grpcProtocol.parseContentType(type)?.binary === true) {
    if (!identity(headers["grpc-encoding"]) || headers["grpc-timeout"] !== undefined) return undefined;
    return "grpc";
  }
  const connect = connectProtocol.parseContentType(type);
  if (connect?.stream === true && connect.binary) {
    if (!identity(headers["connect-content-encoding"]) || headers["connect-timeout-ms"] !== undefined) {
      return undefined;
    }
    return "connect";
  }
  return undefined;
}

/**
 * The protocol of a request by its content type, read with Connect's own
 * parsers (for the metric of streams Connect's handler serves).
 */
export function protocolFamily(contentType: string | string[] | undefined): string {
  if (typeof contentType !== "string") return "other";
  if (grpcWebProtocol.parseContentType(contentType)) return "grpc-web";
  if (grpcProtocol.parseContentType(contentType)) return "grpc";
  if (connectProtocol.parseContentType(contentType)) return "connect";
  return "other";
}

function identity(encoding: string | string[] | undefined): boolean {
  return encoding === undefined || encoding === "identity";
}

/** What Connect's Node adapter compresses with unless told otherwise, in its order. */
const COMPRESSIONS: Compression[] = [compressionGzip, compressionBrotli];

/**
 * The compression of the replies, as Connect's handler negotiates it: the
 * first encoding of the client's accept header that it supports (gzip,
 * br), with the header that names it. None when the client accepts none.
 */
export function responseCompression(
  p: AgentCallProtocol,
  headers: NodeRequestHeaders,
): { compression: Compression; header: string } | undefined {
  const names =
    p === "grpc"
      ? ["grpc-encoding", "grpc-accept-encoding"]
      : ["connect-content-encoding", "connect-accept-encoding"];
  const accepted = headers[names[1]!];
  const { response } = compressionNegotiate(
    COMPRESSIONS,
    null,
    typeof accepted === "string" ? accepted : null,
    names[1]!,
  );
  return response ? { compression: response, header: names[0]! } : undefined;
}

/** The response's content type. */
export function responseContentType(p: AgentCallProtocol): string {
  return p === "grpc" ? grpcProtocol.contentTypeProto : connectProtocol.contentTypeStreamProto;
}

/**
 * Whether an envelope with `flags` is skipped rather than parsed: a
 * Connect request's end-stream envelope is (Connect's handler skips it
 * too); gRPC has none and parses every envelope.
 */
export function skipsEnvelope(p: AgentCallProtocol, flags: number): boolean {
  return p === "connect" && (flags & END_STREAM_FLAG) === END_STREAM_FLAG;
}

const endStream = connectProtocol.createEndStreamSerialization(undefined);

/**
 * How the call ends: the gRPC trailers (status and message), or the
 * Connect end-stream envelope (the error, if any, as JSON) and no trailers.
 * A thrown value that is not a ConnectError is Internal "internal error",
 * as Connect reports it.
 */
export function callEnd(
  p: AgentCallProtocol,
  err: unknown,
  responseTrailer: Headers,
): { endStream?: Uint8Array; trailers?: Record<string, string> } {
  const error =
    err === undefined
      ? undefined
      : err instanceof ConnectError
        ? err
        : new ConnectError("internal error", Code.Internal, undefined, undefined, err);
  if (p === "grpc") {
    grpcProtocol.setTrailerStatus(responseTrailer, error);
    return { trailers: nodeHeaders(responseTrailer) };
  }
  const data = endStream.serialize(
    error ? { metadata: responseTrailer, error } : { metadata: responseTrailer },
  );
  return { endStream: data };
}

/** Web Headers as Node's header object (lower-case names, as Connect's adapter writes them). */
export function nodeHeaders(h: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  h.forEach((value, key) => {
    out[key] = value;
  });
  return out;
}
