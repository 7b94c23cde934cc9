/**
 * The `authorization` block of nats-server's configuration for llmgw's
 * roles: one NKEY user per role (only its public key is in the file; the
 * seed stays in the role's `.nk` seed file) with the role's permissions.
 * Pure text; `llmgw nats-auth init` writes it.
 */
import { type NatsLayout, type NatsRole, rolePermissions } from "./permissions.js";

export interface RoleUser {
  role: NatsRole;
  /** The user's public nkey (U…). */
  publicKey: string;
}

/** A config file nats-server takes with `include`, holding the authorization block. */
export function renderServerAuth(users: RoleUser[], layout: NatsLayout): string {
  const q = (s: string) => JSON.stringify(s);
  const list = (xs: string[], indent: string) =>
    `[\n${xs.map((x) => `${indent}  ${q(x)}`).join("\n")}\n${indent}]`;
  const lines = [
    "# llmgw NATS users, one per role (llmgw nats-auth init). Public keys only: the",
    "# seeds are in the <role>.nk files. Include this file from nats-server.conf:",
    '#   include "auth.conf"',
    `# stream ${layout.stream}, subjects ${layout.prefix}.>, buckets ${Object.values(layout.buckets).join(", ")}`,
    "authorization {",
    "  users = [",
  ];
  for (const u of users) {
    const p = rolePermissions(u.role, layout);
    lines.push(
      "    {",
      `      # role: ${u.role}`,
      `      nkey: ${q(u.publicKey)}`,
      "      permissions: {",
      "        publish: {",
      `          allow: ${list(p.publish.allow, "          ")}`,
      `          deny: ${list(p.publish.deny, "          ")}`,
      "        }",
      `        subscribe: { allow: ${list(p.subscribe.allow, "        ")} }`,
      "      }",
      "    }",
    );
  }
  lines.push("  ]", "}");
  return `${lines.join("\n")}\n`;
}
