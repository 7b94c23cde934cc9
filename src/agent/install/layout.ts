/**
 * What `llmgw agent install` lays out on a GPU host: the systemd unit, the
 * user it runs as, the config skeleton and the state directory. Pure: the
 * files as data, written by ./write.ts under a root.
 */
import { CONFIG_PLACEHOLDER } from "../config.js";

/** The service's user and group, its unit and its state directory's name. */
export const AGENT_SERVICE = "llmgw-agent";
export const AGENT_STATE_DIR = `/var/lib/${AGENT_SERVICE}`;

export interface HostInstallOptions {
  /** The agent's config file, as the unit names it (absolute). */
  config: string;
  /** The llmgw launcher the unit runs (absolute): bin/llmgw of the unpacked host package. */
  bin: string;
  /** The directory of the node's certificate, key and CA (absolute). */
  tlsDir: string;
  /** --metrics-listen of the unit. */
  metricsListen: string;
}

export type LayoutEntry =
  | { kind: "dir"; path: string; mode: number }
  /** keep: an existing file is left as it is (the operator's config survives a reinstall). */
  | { kind: "file"; path: string; mode: number; content: string; keep: boolean };

export function hostInstallLayout(o: HostInstallOptions): LayoutEntry[] {
  const configDir = o.config.slice(0, o.config.lastIndexOf("/")) || "/";
  return [
    { kind: "dir", path: configDir, mode: 0o755 },
    { kind: "dir", path: o.tlsDir, mode: 0o750 },
    { kind: "file", path: o.config, mode: 0o640, content: configSkeleton(), keep: true },
    // systemd makes it 0700 and the service user's at every start (StateDirectoryMode); made here too so
    // that the layout is complete before the first start.
    { kind: "dir", path: AGENT_STATE_DIR, mode: 0o700 },
    {
      kind: "file",
      path: `/etc/sysusers.d/${AGENT_SERVICE}.conf`,
      mode: 0o644,
      content: sysusersConf(),
      keep: false,
    },
    {
      kind: "file",
      path: `/etc/systemd/system/${AGENT_SERVICE}.service`,
      mode: 0o644,
      content: systemdUnit(o),
      keep: false,
    },
  ];
}

/** The dedicated user (systemd-sysusers creates it, with its group of the same name). */
export function sysusersConf(): string {
  return [
    "# The llmgw node agent's user; `systemd-sysusers` creates it.",
    `u ${AGENT_SERVICE} - "llmgw node agent" ${AGENT_STATE_DIR}`,
    "",
  ].join("\n");
}

export function systemdUnit(o: HostInstallOptions): string {
  const exec = [
    o.bin,
    "agent",
    "--config",
    o.config,
    "--tls-cert",
    `${o.tlsDir}/node.crt`,
    "--tls-key",
    `${o.tlsDir}/node.key`,
    "--ca",
    `${o.tlsDir}/ca.crt`,
    "--metrics-listen",
    o.metricsListen,
  ].join(" ");
  return `# Written by \`llmgw agent install\` (docs/agent.md, "Installing on a GPU host").
[Unit]
Description=llmgw node agent
After=network-online.target nvidia-persistenced.service
Wants=network-online.target

[Service]
Type=exec
User=${AGENT_SERVICE}
Group=${AGENT_SERVICE}
ExecStart=${exec}
# Engines run in process groups of their own and must outlive the agent: a
# stop, restart or upgrade signals the agent alone, and the next agent adopts
# the engines from the state directory. systemd's default (control-group)
# would kill them with it. \`systemctl kill ${AGENT_SERVICE}\` still stops
# everything.
KillMode=process
Restart=on-failure
RestartSec=2
# Engine records and logs; 0700, owned by ${AGENT_SERVICE}.
StateDirectory=${AGENT_SERVICE}
StateDirectoryMode=0700
UMask=0077
# Xid errors are read from /dev/kmsg, which needs CAP_SYSLOG: the one
# capability the agent (and the engines it starts) holds.
AmbientCapabilities=CAP_SYSLOG
CapabilityBoundingSet=CAP_SYSLOG
NoNewPrivileges=yes
# Engines inherit this sandbox: GPUs (/dev/nvidia*, /dev/infiniband) stay
# reachable, the system read-only, homes unreadable.
ProtectSystem=full
ProtectHome=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
RestrictSUIDSGID=yes
LockPersonality=yes
# NCCL over InfiniBand / RoCE pins memory.
LimitMEMLOCK=infinity
LimitNOFILE=1048576

[Install]
WantedBy=multi-user.target
`;
}

/** The config skeleton (../config.ts): valid once every CONFIG_PLACEHOLDER is replaced; refused before. */
export function configSkeleton(): string {
  const p = CONFIG_PLACEHOLDER;
  return `# The llmgw node agent's config (docs/agent.md). Replace every ${p}:
# the agent refuses to start while one is left.
# The node id is the CN of the node's certificate (--tls-cert in the unit).
gateways:
  - https://${p}-gateway-1.example:7443
  - https://${p}-gateway-2.example:7443
stateDir: ${AGENT_STATE_DIR}
labels: {}
hardware: {}
# Each shard's log is rotated past maxFileBytes, keepFiles kept; a removed
# shard's logs are deleted removedRetentionMs after their last write.
engineLogs: { maxFileBytes: 10485760, keepFiles: 3, removedRetentionMs: 86400000 }
engines:
  # The catalog's profiles run the engine "default" unless they name another.
  default:
    command:
      [
        "/${p}/bin/vllm",
        "serve",
        "{model}",
        "--port",
        "{port}",
        "--tensor-parallel-size",
        "{gpu_count}",
      ]
    ready: { http: "http://127.0.0.1:{port}/health" }
    stopGraceSeconds: 30
    portRange: [8000, 8999]
`;
}
