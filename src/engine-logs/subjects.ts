/**
 * Where the API asks a gateway for an engine's output, and where the answer
 * comes back: core NATS subjects beside the log, never in it (the stream
 * takes `<prefix>.>`; these are under `<prefix>-enginelogs`). Engine output
 * is untrusted text in bulk: it must not become events.
 *
 *   <root>.ask.<gateway>    the API's request (JSON, EngineLogAsk), reply subject <root>.reply.<id>
 *   <root>.ctl.<gateway>    the API's keepalive or cancel of a request it made (JSON, EngineLogControl)
 *   <root>.reply.<id>       the gateway's answer: accepted, output chunks, the end
 */
import { invalidIdReason } from "../ids/index.js";

export class EngineLogSubjects {
  readonly root: string;

  constructor(prefix: string) {
    this.root = `${prefix}-enginelogs`;
  }

  ask(gatewayId: string): string {
    return `${this.root}.ask.${token(gatewayId)}`;
  }
  control(gatewayId: string): string {
    return `${this.root}.ctl.${token(gatewayId)}`;
  }
  reply(requestId: string): string {
    return `${this.root}.reply.${token(requestId)}`;
  }
  /** What the gateways subscribe to and the API publishes to (permissions). */
  get asks(): string {
    return `${this.root}.ask.*`;
  }
  get controls(): string {
    return `${this.root}.ctl.*`;
  }
  /** What the gateways publish to and the API subscribes to (permissions). */
  get replies(): string {
    return `${this.root}.reply.*`;
  }
  /** Everything under the root (denied to the roles that take no part). */
  get all(): string {
    return `${this.root}.>`;
  }
}

function token(id: string): string {
  const why = invalidIdReason(id);
  if (why) throw new RangeError(`cannot build a subject: ${why}`);
  return id;
}
