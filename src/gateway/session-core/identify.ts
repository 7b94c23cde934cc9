import { Code } from "@connectrpc/connect";
import type { PeerIdentity } from "./peer-identity.js";

/** The certificate decides who the agent is, not the message. */
export function identify(
  peer: PeerIdentity,
  nodeId: string,
  insecureDev: boolean,
): { identity: "mtls" | "insecure-dev" } | { refused: { code: Code; detail: string } } {
  const refuse = (code: Code, detail: string) => ({ refused: { code, detail } });
  switch (peer.kind) {
    case "plaintext":
      if (insecureDev) return { identity: "insecure-dev" };
      return refuse(Code.Unauthenticated, "no TLS: the agent's identity cannot be verified");
    case "none":
      return refuse(
        Code.Unauthenticated,
        "no client certificate: an agent must present a certificate signed by the client CA whose CN is its node_id",
      );
    case "unverified":
      return refuse(
        Code.Unauthenticated,
        `client certificate${peer.commonName ? ` (CN ${JSON.stringify(peer.commonName)})` : ""} did not verify: ${peer.reason}`,
      );
    case "verified":
      if (peer.commonName !== nodeId) {
        return refuse(
          Code.PermissionDenied,
          `certificate authorizes node ${JSON.stringify(peer.commonName)}, not ${JSON.stringify(nodeId)}`,
        );
      }
      return { identity: "mtls" };
    default: {
      const never: never = peer;
      return refuse(Code.Internal, `unknown peer identity ${JSON.stringify(never)}`);
    }
  }
}
