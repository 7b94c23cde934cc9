import { constants as h2 } from "node:http2";
import type { TLSSocket } from "node:tls";
import { type ContextValues, createContextKey, createContextValues } from "@connectrpc/connect";
import type { ConnectNodeAdapterOptions } from "@connectrpc/connect-node";
import type { PeerIdentity } from "./session-core/index.js";

/** A request as the Node adapter hands it over (HTTP/2 here). */
export type NodeServerRequest = Parameters<NonNullable<ConnectNodeAdapterOptions["contextValues"]>>[0];

export const peerKey = createContextKey<PeerIdentity>(
  { kind: "none" },
  { description: "llmgw peer identity" },
);

/**
 * Ends the HTTP/2 stream under a call. Used when a stream must go but the
 * handler cannot finish on its own (an agent that stopped reading keeps the
 * last write blocked by flow control).
 */
export const resetKey = createContextKey<() => void>(() => {}, { description: "llmgw stream reset" });

/** The peer's identity from the TLS socket of a request. */
export function peerFromRequest(req: NodeServerRequest): PeerIdentity {
  const socket = req.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerCertificate !== "function") return { kind: "plaintext" };
  const cert = socket.getPeerCertificate();
  if (!cert || Object.keys(cert).length === 0) return { kind: "none" };
  const cn = firstOf(cert.subject?.CN);
  if (socket.authorized !== true) {
    return { kind: "unverified", reason: whyUnverified(socket.authorizationError, cert), commonName: cn };
  }
  if (cn === undefined)
    return { kind: "unverified", reason: "the certificate has no CN", commonName: undefined };
  return { kind: "verified", commonName: cn, ...(cert.serialNumber ? { serial: cert.serialNumber } : {}) };
}

/** The certificate serial of a peer, when it presented a verified certificate. */
export function peerSerial(peer: PeerIdentity): string | undefined {
  return peer.kind === "verified" ? peer.serial : undefined;
}

/** The peer's address as host:port ("" when the socket no longer knows it). */
export const remoteAddressKey = createContextKey<string>("", { description: "llmgw peer address" });

function remoteAddressOf(req: NodeServerRequest): string {
  const { remoteAddress, remotePort } = req.socket;
  if (remoteAddress === undefined) return "";
  return remoteAddress.includes(":") ? `[${remoteAddress}]:${remotePort}` : `${remoteAddress}:${remotePort}`;
}

export function contextValuesFor(req: NodeServerRequest): ContextValues {
  return createContextValues()
    .set(peerKey, peerFromRequest(req))
    .set(remoteAddressKey, remoteAddressOf(req))
    .set(resetKey, () => {
      const stream = (req as { stream?: { destroyed: boolean; close(code: number): void } }).stream;
      if (stream && !stream.destroyed) stream.close(h2.NGHTTP2_CANCEL);
      else req.destroy();
    });
}

/**
 * What the agent's operator should do about a certificate that did not
 * verify, with the TLS library's code for searching. The codes are
 * OpenSSL's verify errors as Node reports them.
 */
function whyUnverified(error: unknown, cert: { valid_from?: string; valid_to?: string }): string {
  // Typed as an Error, but Node hands over the verify error's code as a string.
  const code =
    typeof error === "string"
      ? error
      : error instanceof Error
        ? String((error as { code?: unknown }).code ?? error.message)
        : "";
  switch (code) {
    case "CERT_HAS_EXPIRED":
      return `it expired on ${cert.valid_to ?? "an earlier date"} (CERT_HAS_EXPIRED); issue the agent a new certificate`;
    case "CERT_NOT_YET_VALID":
      return `it is not valid before ${cert.valid_from ?? "a later date"} (CERT_NOT_YET_VALID); check the clocks`;
    case "UNABLE_TO_VERIFY_LEAF_SIGNATURE":
    case "UNABLE_TO_GET_ISSUER_CERT":
    case "UNABLE_TO_GET_ISSUER_CERT_LOCALLY":
    case "SELF_SIGNED_CERT_IN_CHAIN":
    case "DEPTH_ZERO_SELF_SIGNED_CERT":
    case "CERT_SIGNATURE_FAILURE":
      return `it is not signed by the gateway's client CA (${code}); use a certificate from the fleet's CA`;
    case "":
      return "not signed by the client CA";
    default:
      return code;
  }
}

function firstOf(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
