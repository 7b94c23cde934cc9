/**
 * Who is on the other end of a stream, as the TLS layer proved it. The
 * certificate decides who an agent is, not the message. The core's input:
 * the shell (`gateway/identity.ts`) reads it from the TLS socket.
 */
export type PeerIdentity =
  /** Plain h2c (insecure development mode): nothing was proved. */
  | { kind: "plaintext" }
  /** TLS without a client certificate. */
  | { kind: "none" }
  /** A certificate that did not verify against the client CA. */
  | { kind: "unverified"; reason: string; commonName: string | undefined }
  /** `serial`: the certificate's serial number in hex, as the TLS layer reports it. */
  | { kind: "verified"; commonName: string; serial?: string };
