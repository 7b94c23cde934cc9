// biome-ignore-all lint/suspicious/noExplicitAny: manifests are loosely typed YAML, checked by the assertions
/**
 * deploy/kubernetes cannot be applied here (no cluster), so it is checked
 * the way docker-compose.yml is: every object against the Kubernetes API
 * schemas (kubernetes-models, offline), the shape (gateway Deployment,
 * Service and PodDisruptionBudget; two reconcilers; the API; the agent
 * DaemonSet on GPU nodes; NATS from the official chart's values), and every
 * container's llmgw command, flags and LLMGW_* variables against the real CLI.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { DaemonSet, Deployment } from "kubernetes-models/apps/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { Service } from "kubernetes-models/v1";
import { parse, parseAllDocuments } from "yaml";
import { invocationProblems } from "../support/cli-spec.js";

const DIR = join(import.meta.dirname, "../../deploy/kubernetes");

/** The kinds the manifests use, each with the model that validates it against the Kubernetes schema. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  "apps/v1 Deployment": Deployment,
  "apps/v1 DaemonSet": DaemonSet,
  "v1 Service": Service,
  "policy/v1 PodDisruptionBudget": PodDisruptionBudget,
};

interface Container {
  name: string;
  image?: string;
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: unknown }>;
  ports?: Array<{ name?: string; containerPort: number }>;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
}
type Probe = { httpGet?: { port: string | number }; tcpSocket?: { port: string | number } };
interface PodSpec {
  containers: Container[];
  nodeSelector?: Record<string, string>;
  tolerations?: Array<{ key?: string }>;
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec: any;
}

function load(): Array<K8sObject & { file: string }> {
  const out: Array<K8sObject & { file: string }> = [];
  for (const file of readdirSync(DIR).filter((f) => f.endsWith(".yaml") && f !== "nats-values.yaml")) {
    for (const d of parseAllDocuments(readFileSync(join(DIR, file), "utf8"))) {
      assert.deepEqual(d.errors, [], `${file}: ${d.errors.join("; ")}`);
      const obj = d.toJS() as K8sObject | null;
      if (obj) out.push({ ...obj, file });
    }
  }
  return out;
}

const key = (o: K8sObject) => `${o.kind}/${o.metadata.name}`;
const workloads = (objs: K8sObject[]) =>
  objs.filter((o) => o.kind === "Deployment" || o.kind === "DaemonSet");
const podSpec = (o: K8sObject): PodSpec => o.spec.template.spec;
const podLabels = (o: K8sObject): Record<string, string> => o.spec.template.metadata.labels ?? {};
const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

function find(objs: K8sObject[], kind: string, name: string): K8sObject {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
  assert.ok(o, `no ${kind} ${name} in deploy/kubernetes`);
  return o;
}

/** The port of `--flag host:port` in a container's arguments. */
function portOf(c: Container, flag: string): number | undefined {
  const args = c.args ?? [];
  const i = args.indexOf(flag);
  return i < 0 ? undefined : Number(args[i + 1]?.split(":").pop());
}

describe("deploy/kubernetes", () => {
  it("is valid against the Kubernetes API schemas", () => {
    const objs = load();
    assert.ok(objs.length >= 7, `only ${objs.length} objects`);
    for (const o of objs) {
      const Model = MODELS[`${o.apiVersion} ${o.kind}`];
      assert.ok(Model, `${o.file}: ${o.apiVersion} ${o.kind} is not a kind this check knows`);
      const { file: _f, ...data } = o;
      assert.doesNotThrow(() => new Model(data as never).validate(), `${o.file}: ${key(o)}`);
      assert.equal(o.metadata.namespace, "llmgw", `${key(o)} is not in the llmgw namespace`);
    }
    // The validator itself refuses a broken object (so the check above means something).
    const broken = {
      metadata: { name: "x" },
      spec: { selector: {}, template: { spec: { containers: [{}] } } },
    };
    assert.throws(() => new Deployment(broken as never).validate());
  });

  it("has the production shape", () => {
    const objs = load();
    find(objs, "Service", "llmgw-gateway");
    assert.ok(find(objs, "Deployment", "llmgw-gateway").spec.replicas >= 2, "one gateway is a single point");
    assert.equal(find(objs, "Deployment", "llmgw-reconciler").spec.replicas, 2);
    find(objs, "Deployment", "llmgw-api");
    find(objs, "Service", "llmgw-api");
    // Voluntary disruptions leave a gateway serving.
    const pdb = find(objs, "PodDisruptionBudget", "llmgw-gateway");
    assert.ok(
      selects(pdb.spec.selector.matchLabels, podLabels(find(objs, "Deployment", "llmgw-gateway"))),
      "the gateway PodDisruptionBudget selects no gateway pod",
    );
    assert.ok(pdb.spec.minAvailable >= 1);
    // The agent runs on every GPU node and only there.
    const agent = podSpec(find(objs, "DaemonSet", "llmgw-agent"));
    assert.ok(
      Object.keys(agent.nodeSelector ?? {}).some((k) => k.startsWith("nvidia.com/gpu")),
      "the agent DaemonSet selects no GPU nodes",
    );
    assert.ok(
      (agent.tolerations ?? []).some((t) => t.key === "nvidia.com/gpu"),
      "the agent does not tolerate the GPU taint",
    );
  });

  it("selects its own pods, and every Service reaches a port that exists", () => {
    const objs = load();
    for (const w of workloads(objs)) {
      assert.ok(
        selects(w.spec.selector.matchLabels, podLabels(w)),
        `${key(w)}'s selector misses its own pods`,
      );
    }
    for (const s of objs.filter((o) => o.kind === "Service")) {
      const targets = workloads(objs).filter((w) => selects(s.spec.selector, podLabels(w)));
      assert.equal(targets.length, 1, `${key(s)} selects ${targets.length} workloads`);
      const ports = podSpec(targets[0]!).containers.flatMap((c) => c.ports ?? []);
      for (const p of s.spec.ports as Array<{ name: string; targetPort: string | number }>) {
        assert.ok(
          ports.some((cp) => cp.name === p.targetPort || cp.containerPort === p.targetPort),
          `${key(s)} port ${p.name} targets ${p.targetPort}, which no container of ${key(targets[0]!)} has`,
        );
      }
    }
    for (const p of objs.filter((o) => o.kind === "PodDisruptionBudget")) {
      const n = workloads(objs).filter((w) => selects(p.spec.selector.matchLabels, podLabels(w))).length;
      assert.equal(n, 1, `${key(p)} selects ${n} workloads`);
    }
  });

  it("runs llmgw commands, flags and variables that exist, on the ports it declares", () => {
    for (const w of workloads(load())) {
      for (const c of podSpec(w).containers) {
        assert.match(c.image ?? "", /^llmgw:/, `${key(w)}/${c.name} does not run the llmgw image`);
        const args = c.args ?? [];
        const env = (c.env ?? []).map((e) => e.name);
        const problems = invocationProblems(args, env);
        assert.deepEqual(problems, [], `${key(w)}/${c.name}: ${problems.join("; ")}`);
        // A variable that is not llmgw's must be used in the arguments ($(NAME)) or it does nothing.
        for (const v of env.filter((n) => !n.startsWith("LLMGW_"))) {
          assert.ok(
            args.some((a) => a.includes(`$(${v})`)),
            `${key(w)}/${c.name} sets ${v}, which nothing reads`,
          );
        }
        const declared = new Map((c.ports ?? []).map((p) => [p.name, p.containerPort]));
        for (const flag of ["--listen", "--metrics-listen"]) {
          const port = portOf(c, flag);
          if (port === undefined) continue;
          assert.ok(
            [...declared.values()].includes(port),
            `${key(w)}/${c.name} listens on ${port} (${flag}) but declares no such port`,
          );
        }
        for (const probe of [c.readinessProbe, c.livenessProbe]) {
          const port = probe?.httpGet?.port ?? probe?.tcpSocket?.port;
          if (port === undefined) continue;
          assert.ok(
            declared.has(String(port)) || [...declared.values()].includes(Number(port)),
            `${key(w)}/${c.name} probes port ${port}, which it does not declare`,
          );
        }
      }
    }
  });

  it("points every part at the NATS cluster the chart values describe", () => {
    const values = parse(readFileSync(join(DIR, "nats-values.yaml"), "utf8"));
    assert.equal(values.config.jetstream.enabled, true, "NATS without JetStream");
    assert.equal(values.config.jetstream.fileStore.enabled, true, "the log must be on disk");
    assert.equal(
      values.config.jetstream.merge?.sync_interval,
      "always",
      "every write must be on disk before it is acknowledged (docs/RELIABILITY.md)",
    );
    assert.match(String(values.container?.image?.tag), /^2\.(1[5-9]|[2-9]\d)\./, "nats-server >= 2.15");
    assert.equal(values.config.cluster.enabled, true);
    const servers = values.config.cluster.replicas as number;
    assert.ok(servers >= 3, "a JetStream cluster needs 3 servers to lose one");
    const url = `nats://${values.fullnameOverride}:4222`;
    for (const w of workloads(load())) {
      for (const c of podSpec(w).containers) {
        const env = new Map((c.env ?? []).map((e) => [e.name, e.value]));
        const isAgent = (c.args ?? [])[0] === "sim";
        if (isAgent) {
          // Agents speak only to gateways, never to NATS.
          assert.equal(env.get("LLMGW_NATS_URL"), undefined, `${key(w)}: the agent is given NATS`);
          assert.match((c.args ?? []).join(" "), /--gateway https:\/\/llmgw-gateway[.:]/);
          continue;
        }
        assert.equal(env.get("LLMGW_NATS_URL"), url, `${key(w)}/${c.name} is not pointed at ${url}`);
        // The router only reads: it creates no stream and takes no replica count.
        if ((c.args ?? [])[0] === "router") continue;
        assert.equal(
          env.get("LLMGW_STREAM_REPLICAS"),
          String(servers),
          `${key(w)}: one log replica per server`,
        );
      }
    }
  });
});
