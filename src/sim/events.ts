/** What simulated agents report to the fleet (and to tests, the CLI and benchmarks). */

export type ShardStateName = "starting" | "running" | "draining" | "stopped" | "failed";

export type SimEvent =
  | { type: "connecting"; nodeId: string; url: string }
  | { type: "registered"; nodeId: string; url: string }
  /** The gateway acknowledged message `messageId` of session `sessionId` ("1": the registration): it is in the log. */
  | { type: "acked"; nodeId: string; sessionId: string; messageId: string }
  | { type: "disconnected"; nodeId: string; url: string; reason: string }
  | {
      type: "command";
      nodeId: string;
      command: "start" | "stop" | "drain";
      commandId: string;
      shardId: string;
      ok: boolean;
      error?: string;
      /** A drain's deadline as received (ms since the epoch; 0: none given). */
      deadlineUnixMs?: number;
    }
  | { type: "status"; nodeId: string; shardId: string; state: ShardStateName; sent: boolean; error?: string }
  | { type: "problem"; nodeId: string; problem: string }
  | { type: "partitioned"; nodeId: string }
  | { type: "restarted"; nodeId: string; keepShards: boolean };

export interface AgentCounters {
  /** Streams opened after the first one (failures, Reconnect, partitions, restarts). */
  reconnects: number;
  /** Registrations the gateway acked. */
  registrations: number;
  commandsReceived: number;
  statusesSent: number;
  heartbeatsSent: number;
  /** Shards that went to FAILED. */
  failures: number;
  restarts: number;
}

export function zeroCounters(): AgentCounters {
  return {
    reconnects: 0,
    registrations: 0,
    commandsReceived: 0,
    statusesSent: 0,
    heartbeatsSent: 0,
    failures: 0,
    restarts: 0,
  };
}
