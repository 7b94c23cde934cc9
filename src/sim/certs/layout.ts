/**
 * Where `llmgw certs` writes, and where the simulator and the gateway read:
 *
 *   ca.pem, ca-key.pem               the development CA
 *   gateway.pem, gateway-key.pem     the gateway's server certificate
 *   nodes/<id>.pem, nodes/<id>-key.pem   one client certificate per node (CN = node id)
 */
import { join } from "node:path";

export interface CertsLayout {
  dir: string;
  ca: string;
  caKey: string;
  gatewayCert: string;
  gatewayKey: string;
  nodesDir: string;
  nodeCert(id: string): string;
  nodeKey(id: string): string;
}

export function certsLayout(dir: string): CertsLayout {
  const nodesDir = join(dir, "nodes");
  return {
    dir,
    ca: join(dir, "ca.pem"),
    caKey: join(dir, "ca-key.pem"),
    gatewayCert: join(dir, "gateway.pem"),
    gatewayKey: join(dir, "gateway-key.pem"),
    nodesDir,
    nodeCert: (id) => join(nodesDir, `${id}.pem`),
    nodeKey: (id) => join(nodesDir, `${id}-key.pem`),
  };
}
