/**
 * The Kubernetes Secrets of a deployment's NATS authentication, from the
 * files `llmgw nats-auth init` writes: `nats-auth` (the server's auth.conf,
 * public keys only, which the NATS StatefulSet of deploy/kubernetes
 * includes) and one `llmgw-nats-<role>` per role holding its `<role>.nk`
 * seed (mounted as the role's --nats-creds). Pure text in, YAML out.
 */
import { stringify } from "yaml";
import { NATS_ROLES, type NatsRole, NKEY_SEED_EXTENSION } from "../nats-auth/index.js";

/** The Secret holding the server's authorization block (key auth.conf). */
export const NATS_AUTH_SECRET = "nats-auth";

/** The Secret of a role's seed file (key `<role>.nk`). */
export function roleSecretName(role: NatsRole): string {
  return `llmgw-nats-${role}`;
}

export interface NatsAuthContents {
  /** The text of auth.conf. */
  serverConfig: string;
  /** Each role's seed file text. */
  seeds: Record<NatsRole, string>;
}

/** Multi-document YAML: the Secret nats-auth, then one Secret per role, in `namespace`. */
export function renderNatsAuthSecrets(contents: NatsAuthContents, namespace: string): string {
  const secret = (name: string, key: string, text: string, what: string) => ({
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name,
      namespace,
      labels: { "app.kubernetes.io/part-of": "llmgw" },
      annotations: { "llmgw.io/contents": what },
    },
    type: "Opaque",
    data: { [key]: Buffer.from(text, "utf8").toString("base64") },
  });
  const docs = [
    secret(
      NATS_AUTH_SECRET,
      "auth.conf",
      contents.serverConfig,
      "nats-server authorization: one NKEY user per llmgw role (public keys only)",
    ),
    ...NATS_ROLES.map((role) =>
      secret(
        roleSecretName(role),
        `${role}${NKEY_SEED_EXTENSION}`,
        contents.seeds[role],
        `NKEY seed of the NATS role ${role} (--nats-creds of its processes)`,
      ),
    ),
  ];
  return docs.map((d) => stringify(d)).join("---\n");
}
