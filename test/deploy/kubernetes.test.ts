// biome-ignore-all lint/suspicious/noExplicitAny: manifests are loosely typed YAML, checked by the assertions
/**
 * deploy/kubernetes cannot be applied here (no cluster), so it is rendered
 * the way an installer renders it (scripts/render-deploy: `kubectl
 * kustomize` of scripts/ensure-kubectl, offline) for the defaults and for
 * the external-NATS overlay, and every rendered object is checked: against
 * the Kubernetes API schemas (kubernetes-models, offline; cert-manager and
 * Prometheus Operator objects for their required fields), every llmgw
 * container's command, flags and LLMGW_* variables against the real CLI,
 * Pod Security "restricted", every Secret referenced (made by cert-manager,
 * rendered by `llmgw nats-auth kubernetes`, or listed as user-provided in
 * docs/deployment.md), NetworkPolicies, and no anonymous access to NATS.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { Deployment, StatefulSet } from "kubernetes-models/apps/v1";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ConfigMap, Namespace, Secret, Service, ServiceAccount } from "kubernetes-models/v1";
import { parseAllDocuments } from "yaml";
import { NATS_ROLES } from "../../src/nats-auth/index.js";
import { tempDir } from "../harness/nats.js";
import { runCli } from "../support/cli.js";
import { invocationProblems } from "../support/cli-spec.js";

const ROOT = join(import.meta.dirname, "../..");
const DOCS = join(ROOT, "docs/deployment.md");

/** The kinds of the Kubernetes API the package uses, each with the model that validates it. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  "v1 Namespace": Namespace,
  "v1 ServiceAccount": ServiceAccount,
  "v1 ConfigMap": ConfigMap,
  "v1 Secret": Secret,
  "v1 Service": Service,
  "apps/v1 Deployment": Deployment,
  "apps/v1 StatefulSet": StatefulSet,
  "policy/v1 PodDisruptionBudget": PodDisruptionBudget,
  "networking.k8s.io/v1 NetworkPolicy": NetworkPolicy,
};

/**
 * Custom resources: what their CRDs require (cert-manager v1, Prometheus
 * Operator v1). No schema package exists for them offline; these are the
 * fields without which the API server refuses the object or the operator does nothing.
 */
const CUSTOM: Record<string, (spec: any) => string[]> = {
  "cert-manager.io/v1 Certificate": (s) => [
    ...(typeof s?.secretName === "string" ? [] : ["spec.secretName"]),
    ...(typeof s?.issuerRef?.name === "string" ? [] : ["spec.issuerRef.name"]),
    ...(s?.isCA || s?.dnsNames?.length || s?.commonName ? [] : ["spec.dnsNames or spec.commonName"]),
  ],
  "cert-manager.io/v1 Issuer": (s) =>
    ["selfSigned", "ca", "acme", "vault", "venafi"].some((k) => s?.[k] !== undefined)
      ? typeof s?.ca === "object" && typeof s.ca.secretName !== "string"
        ? ["spec.ca.secretName"]
        : []
      : ["one issuer type (spec.ca, spec.selfSigned, …)"],
  "monitoring.coreos.com/v1 ServiceMonitor": (s) => [
    ...(s?.selector ? [] : ["spec.selector"]),
    ...(Array.isArray(s?.endpoints) && s.endpoints.length > 0 ? [] : ["spec.endpoints"]),
  ],
  "monitoring.coreos.com/v1 PrometheusRule": (s) =>
    Array.isArray(s?.groups) &&
    s.groups.every(
      (g: any) =>
        typeof g.name === "string" &&
        Array.isArray(g.rules) &&
        g.rules.every((r: any) => typeof r.expr === "string" && (r.alert || r.record)),
    )
      ? []
      : ["spec.groups[].name and rules[].expr with alert or record"],
};

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec: any;
  data?: Record<string, string>;
}
interface Container {
  name: string;
  image?: string;
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: any }>;
  ports?: Array<{ name?: string; containerPort: number }>;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  securityContext?: any;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}
type Probe = { httpGet?: { path: string; port: string | number }; tcpSocket?: { port: string | number } };

/** Each llmgw command's readiness and liveness endpoints. */
const PROBE_PATHS: Record<string, [string, string]> = {
  gateway: ["/readyz", "/livez"],
  reconciler: ["/readyz", "/livez"],
  api: ["/readyz", "/healthz"],
  // The router's /healthz is 503 until the routing table is loaded.
  router: ["/healthz", "/metrics"],
  archiver: ["/readyz", "/livez"],
};

/** scripts/render-deploy OUTDIR OVERLAY, parsed. */
function render(overlay: string): K8sObject[] {
  const out = tempDir(`render-${overlay}`);
  execFileSync(join(ROOT, "scripts/render-deploy"), [out, overlay], { stdio: ["ignore", "ignore", "pipe"] });
  assert.deepEqual(readdirSync(out), ["llmgw.yaml"], "render-deploy wrote something else");
  return parseAllDocuments(readFileSync(join(out, "llmgw.yaml"), "utf8")).map((d) => {
    assert.deepEqual(d.errors, [], `${overlay}: ${d.errors.join("; ")}`);
    return d.toJS() as K8sObject;
  });
}

const key = (o: K8sObject) => `${o.kind}/${o.metadata.name}`;
const workloads = (objs: K8sObject[]) =>
  objs.filter((o) => ["Deployment", "StatefulSet", "DaemonSet"].includes(o.kind));
const podSpec = (o: K8sObject): any => o.spec.template.spec;
const podLabels = (o: K8sObject): Record<string, string> => o.spec.template.metadata.labels ?? {};
const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);
const isLlmgw = (o: K8sObject) => podLabels(o)["app.kubernetes.io/name"] === "llmgw";
const llmgwContainers = (objs: K8sObject[]) =>
  workloads(objs)
    .filter(isLlmgw)
    .flatMap((w) => (podSpec(w).containers as Container[]).map((c) => ({ w, c })));

function find(objs: K8sObject[], kind: string, name: string): K8sObject {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
  assert.ok(o, `no ${kind} ${name} rendered`);
  return o;
}

/** The port of `--flag host:port` in a container's arguments. */
function portOf(c: Container, flag: string): number | undefined {
  const args = c.args ?? [];
  const i = args.indexOf(flag);
  return i < 0 ? undefined : Number(args[i + 1]?.split(":").pop());
}

const envValue = (c: Container, name: string) => c.env?.find((e) => e.name === name);

/** Secret names the "Secrets you provide" table of docs/deployment.md lists (rows "| `name` | …"). */
function documentedSecrets(): Set<string> {
  const text = readFileSync(DOCS, "utf8");
  const section = text.split(/^#{2,3} /m).find((s) => s.startsWith("Secrets you provide"));
  assert.ok(section, 'docs/deployment.md has no section "Secrets you provide"');
  return new Set([...section.matchAll(/^\| `([a-z0-9.-]+)` +\|/gm)].map((m) => m[1] as string));
}

/** Secrets `llmgw nats-auth kubernetes` renders: name → keys. */
async function natsAuthSecrets(): Promise<Map<string, Set<string>>> {
  const dir = tempDir("nats-auth-k8s");
  const r = await runCli(["nats-auth", "kubernetes", "--dir", join(dir, "keys")]);
  assert.equal(r.code, 0, r.stderr);
  const out = new Map<string, Set<string>>();
  for (const d of parseAllDocuments(r.stdout)) {
    const o = d.toJS() as K8sObject;
    assert.doesNotThrow(() => new Secret(o as never).validate(), `nats-auth kubernetes: ${key(o)}`);
    assert.equal(o.metadata.namespace, "llmgw");
    out.set(o.metadata.name, new Set(Object.keys(o.data ?? {})));
  }
  return out;
}

/** Every Secret a pod or an Issuer reads, with the keys read where the reference names them. */
function referencedSecrets(objs: K8sObject[]): Array<{ by: string; name: string; keys: string[] }> {
  const refs: Array<{ by: string; name: string; keys: string[] }> = [];
  for (const w of workloads(objs)) {
    const spec = podSpec(w);
    for (const v of spec.volumes ?? []) {
      if (v.secret) {
        const mounts = (spec.containers as Container[]).flatMap((c) =>
          (c.volumeMounts ?? []).filter((m) => m.name === v.name).map((m) => ({ c, m })),
        );
        // Keys named by the volume's items, or by a variable pointing into its mount.
        const keys: string[] = (v.secret.items ?? []).map((i: any) => i.key as string);
        for (const { c, m } of mounts) {
          for (const e of c.env ?? []) {
            if (e.value?.startsWith(`${m.mountPath}/`)) keys.push(e.value.slice(m.mountPath.length + 1));
          }
          for (const a of c.args ?? []) {
            if (a.startsWith(`${m.mountPath}/`)) keys.push(a.slice(m.mountPath.length + 1));
          }
        }
        refs.push({ by: key(w), name: v.secret.secretName, keys });
      }
    }
    for (const c of spec.containers as Container[]) {
      for (const e of c.env ?? []) {
        const ref = e.valueFrom?.secretKeyRef;
        if (ref) refs.push({ by: `${key(w)}/${c.name}`, name: ref.name, keys: [ref.key] });
      }
    }
  }
  for (const m of objs.filter((o) => o.kind === "ServiceMonitor")) {
    for (const e of m.spec.endpoints) {
      const c = e.authorization?.credentials ?? e.bearerTokenSecret;
      if (c) refs.push({ by: key(m), name: c.name, keys: [c.key] });
    }
  }
  for (const i of objs.filter((o) => o.kind === "Issuer" && o.spec.ca)) {
    refs.push({ by: key(i), name: i.spec.ca.secretName, keys: [] });
  }
  return refs;
}

for (const overlay of ["default", "external-nats"] as const) {
  describe(`deploy/kubernetes, overlay ${overlay} (rendered by scripts/render-deploy)`, () => {
    let objs: K8sObject[] = [];
    before(() => {
      objs = render(overlay);
    });

    it("is valid against the Kubernetes API schemas and the custom resources' required fields", () => {
      assert.ok(objs.length >= 25, `only ${objs.length} objects`);
      for (const o of objs) {
        const k = `${o.apiVersion} ${o.kind}`;
        const Model = MODELS[k];
        const custom = CUSTOM[k];
        assert.ok(Model || custom, `${key(o)}: ${k} is not a kind this check knows`);
        if (Model) assert.doesNotThrow(() => new Model(o as never).validate(), key(o));
        if (custom) assert.deepEqual(custom(o.spec), [], `${key(o)} misses required fields`);
        if (o.kind !== "Namespace") assert.equal(o.metadata.namespace, "llmgw", `${key(o)}: namespace`);
      }
      // The validators refuse broken objects (so the checks above mean something).
      const broken = {
        metadata: { name: "x" },
        spec: { selector: {}, template: { spec: { containers: [{}] } } },
      };
      assert.throws(() => new Deployment(broken as never).validate());
      assert.notDeepEqual(CUSTOM["cert-manager.io/v1 Certificate"]?.({ dnsNames: ["a"] }), []);
    });

    it("has the production shape, and no agent and no simulator", () => {
      assert.ok(
        find(objs, "Deployment", "llmgw-gateway").spec.replicas >= 2,
        "one gateway is a single point",
      );
      assert.equal(find(objs, "Deployment", "llmgw-reconciler").spec.replicas, 2);
      find(objs, "Deployment", "llmgw-api");
      find(objs, "Deployment", "llmgw-router");
      assert.equal(find(objs, "Deployment", "llmgw-archiver").spec.replicas, 1, "one archiver per log");
      const lb = find(objs, "Service", "llmgw-gateway");
      assert.ok(
        ["LoadBalancer", "NodePort"].includes(lb.spec.type),
        "agents outside the cluster reach no gateway",
      );
      // TLS passthrough: plain TCP to the gateway's own TLS port.
      assert.deepEqual(
        lb.spec.ports.map((p: any) => [p.protocol ?? "TCP", p.targetPort]),
        [["TCP", "agents"]],
      );
      const pdb = find(objs, "PodDisruptionBudget", "llmgw-gateway");
      assert.ok(selects(pdb.spec.selector.matchLabels, podLabels(find(objs, "Deployment", "llmgw-gateway"))));
      assert.ok(pdb.spec.minAvailable >= 1);
      const cert = find(objs, "Certificate", "llmgw-gateway");
      const gw = podSpec(find(objs, "Deployment", "llmgw-gateway"));
      assert.ok(
        gw.volumes.some((v: any) => v.secret?.secretName === cert.spec.secretName),
        "the gateway does not mount its cert-manager certificate",
      );
      // The agent is a host install (docs/agent.md): nothing here runs it or the simulator.
      assert.equal(objs.filter((o) => o.kind === "DaemonSet").length, 0, "a DaemonSet is rendered");
      for (const w of workloads(objs)) {
        for (const c of podSpec(w).containers as Container[]) {
          const cmd = (c.args ?? [])[0];
          assert.ok(cmd !== "sim" && cmd !== "agent", `${key(w)}/${c.name} runs llmgw ${cmd}`);
        }
      }
    });

    it("selects its own pods, and every Service and PodDisruptionBudget reaches one workload", () => {
      for (const w of workloads(objs)) {
        assert.ok(selects(w.spec.selector.matchLabels, podLabels(w)), `${key(w)}'s selector misses its pods`);
      }
      for (const s of objs.filter((o) => o.kind === "Service")) {
        const targets = workloads(objs).filter((w) => selects(s.spec.selector, podLabels(w)));
        assert.equal(targets.length, 1, `${key(s)} selects ${targets.length} workloads`);
        const ports = (podSpec(targets[0]!).containers as Container[]).flatMap((c) => c.ports ?? []);
        for (const p of s.spec.ports as Array<{ name: string; targetPort: string | number }>) {
          assert.ok(
            ports.some((cp) => cp.name === p.targetPort || cp.containerPort === p.targetPort),
            `${key(s)} port ${p.name} targets ${p.targetPort}, which ${key(targets[0]!)} lacks`,
          );
        }
      }
      for (const p of objs.filter((o) => o.kind === "PodDisruptionBudget")) {
        const n = workloads(objs).filter((w) => selects(p.spec.selector.matchLabels, podLabels(w))).length;
        assert.equal(n, 1, `${key(p)} selects ${n} workloads`);
      }
    });

    it("runs llmgw commands, flags and variables that exist, with probes on ports it declares", () => {
      const commands = new Set<string>();
      for (const { w, c } of llmgwContainers(objs)) {
        assert.match(c.image ?? "", /^llmgw:/, `${key(w)}/${c.name} does not run the llmgw image`);
        const args = c.args ?? [];
        commands.add(args[0] ?? "");
        const env = (c.env ?? []).map((e) => e.name);
        const problems = invocationProblems(args, env);
        assert.deepEqual(problems, [], `${key(w)}/${c.name}: ${problems.join("; ")}`);
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
            `${key(w)}/${c.name} listens on ${port} (${flag}) undeclared`,
          );
        }
        // The endpoints each process serves (tested against real processes in
        // test/health/probes.test.ts, test/operator/api.test.ts and the router's tests).
        const paths = PROBE_PATHS[args[0] ?? ""];
        assert.deepEqual(
          [c.readinessProbe?.httpGet?.path, c.livenessProbe?.httpGet?.path],
          paths,
          `${key(w)}/${c.name}: probes not the process's readiness and liveness endpoints`,
        );
        // Readiness and liveness are HTTP endpoints of the process, on a port it declares.
        for (const [what, probe] of [
          ["readiness", c.readinessProbe],
          ["liveness", c.livenessProbe],
        ] as const) {
          assert.ok(probe?.httpGet, `${key(w)}/${c.name} has no HTTP ${what} probe`);
          const port = probe.httpGet.port;
          assert.ok(
            declared.has(String(port)) || [...declared.values()].includes(Number(port)),
            `${key(w)}/${c.name} probes ${port}`,
          );
        }
      }
      assert.deepEqual([...commands].sort(), ["api", "archiver", "gateway", "reconciler", "router"]);
    });

    it('meets Pod Security "restricted", each workload with its own ServiceAccount and no token', () => {
      const allowedVolumes = new Set([
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
      ]);
      const namespace = find(objs, "Namespace", "llmgw");
      assert.equal(namespace.metadata.labels?.["pod-security.kubernetes.io/enforce"], "restricted");
      const accounts = new Set<string>();
      for (const w of workloads(objs)) {
        const spec = podSpec(w);
        const at = key(w);
        for (const f of ["hostNetwork", "hostPID", "hostIPC"]) assert.ok(!spec[f], `${at}: ${f}`);
        assert.equal(spec.securityContext?.runAsNonRoot, true, `${at}: runAsNonRoot`);
        assert.notEqual(spec.securityContext?.runAsUser, 0, `${at}: runs as root`);
        assert.equal(spec.securityContext?.seccompProfile?.type, "RuntimeDefault", `${at}: seccomp`);
        for (const v of spec.volumes ?? []) {
          const type = Object.keys(v).find((k) => k !== "name") ?? "";
          assert.ok(allowedVolumes.has(type), `${at}: volume ${v.name} is ${type}`);
        }
        for (const c of [...(spec.initContainers ?? []), ...spec.containers] as Container[]) {
          const sc = c.securityContext ?? {};
          assert.equal(sc.allowPrivilegeEscalation, false, `${at}/${c.name}: allowPrivilegeEscalation`);
          assert.ok(!sc.privileged, `${at}/${c.name}: privileged`);
          assert.deepEqual(sc.capabilities?.drop, ["ALL"], `${at}/${c.name}: drop ALL`);
          assert.ok(!sc.capabilities?.add?.length, `${at}/${c.name}: adds capabilities`);
          assert.equal(sc.readOnlyRootFilesystem, true, `${at}/${c.name}: writable root filesystem`);
          assert.ok(sc.runAsUser !== 0, `${at}/${c.name}: runs as root`);
        }
        const sa = spec.serviceAccountName;
        assert.ok(sa && sa !== "default", `${at} runs as the default ServiceAccount`);
        assert.ok(!accounts.has(sa), `${at} shares ServiceAccount ${sa}`);
        accounts.add(sa);
        find(objs, "ServiceAccount", sa);
        assert.equal(spec.automountServiceAccountToken, false, `${at}: mounts a token it does not use`);
      }
    });

    it("references only Secrets that cert-manager or llmgw nats-auth kubernetes make, or that docs/deployment.md lists", async () => {
      const fromCertManager = new Set(
        objs.filter((o) => o.kind === "Certificate").map((o) => o.spec.secretName as string),
      );
      const rendered = new Set(objs.filter((o) => o.kind === "Secret").map((o) => o.metadata.name));
      const natsAuth = await natsAuthSecrets();
      const documented = documentedSecrets();
      for (const ref of referencedSecrets(objs)) {
        const at = `${ref.by} reads Secret ${ref.name}`;
        if (fromCertManager.has(ref.name)) {
          for (const k of ref.keys)
            assert.ok(
              ["tls.crt", "tls.key", "ca.crt"].includes(k),
              `${at}, key ${k}: cert-manager writes no such key`,
            );
          continue;
        }
        if (/^llmgw-nats-(?!external$)|^nats-auth$/.test(ref.name)) {
          // A role's credentials: the command renders the Secret with the key read.
          const keys = natsAuth.get(ref.name);
          assert.ok(
            keys,
            `${at}, which llmgw nats-auth kubernetes does not render (roles: ${NATS_ROLES.join(", ")})`,
          );
          for (const k of ref.keys)
            assert.ok(keys.has(k), `${at}, key ${k}: rendered with ${[...keys].join(", ")}`);
          assert.ok(documented.has(ref.name), `${at}: not in docs/deployment.md's "Secrets you provide"`);
          continue;
        }
        assert.ok(
          rendered.has(ref.name) || documented.has(ref.name),
          `${at}: neither rendered nor documented as user-provided`,
        );
      }
    });

    it("gives NATS to no one anonymously: every llmgw process authenticates with its role over TLS", () => {
      const roleOf: Record<string, string> = {
        gateway: "gateway",
        reconciler: "reconciler",
        api: "api",
        router: "router",
        archiver: "archiver",
      };
      for (const { w, c } of llmgwContainers(objs)) {
        const cmd = (c.args ?? [])[0] ?? "";
        const creds = envValue(c, "LLMGW_NATS_CREDS")?.value;
        assert.equal(
          creds?.split("/").pop(),
          `${roleOf[cmd]}.nk`,
          `${key(w)}: not the ${roleOf[cmd]} role's credentials`,
        );
        assert.ok(envValue(c, "LLMGW_NATS_CA")?.value, `${key(w)}: NATS without TLS`);
        const url = envValue(c, "LLMGW_NATS_URL");
        assert.ok(url, `${key(w)}: no NATS URL`);
        // No credentials inside the URL (they would be printed in the manifest).
        assert.doesNotMatch(url.value ?? "", /@/, `${key(w)}: credentials in the NATS URL`);
        if (overlay === "external-nats") {
          assert.equal(
            url.valueFrom?.secretKeyRef?.name,
            "llmgw-nats-external",
            `${key(w)}: URL not from the Secret`,
          );
        } else assert.equal(url.value, "nats://nats:4222");
        if (cmd !== "router")
          assert.equal(envValue(c, "LLMGW_STREAM_REPLICAS")?.value, "3", `${key(w)}: not R3`);
      }
      const nats = objs.find((o) => o.kind === "StatefulSet" && o.metadata.name === "nats");
      if (overlay === "external-nats") {
        assert.equal(nats, undefined, "the external-NATS overlay runs a NATS");
        return;
      }
      assert.ok(nats, "no NATS StatefulSet");
      assert.equal(nats.spec.replicas, 3, "a JetStream cluster needs 3 servers to lose one");
      const configMap = find(
        objs,
        "ConfigMap",
        podSpec(nats).volumes.find((v: any) => v.name === "config").configMap.name,
      );
      const conf = configMap.data?.["nats.conf"] ?? "";
      assert.match(conf, /^include "auth\/auth\.conf"$/m, "the roles' users are not included");
      assert.doesNotMatch(
        conf,
        /no_auth_user|^\s*(user|password|token)\s*:/m,
        "NATS has a user without a key",
      );
      assert.match(conf, /^tls \{[^}]*cert_file/m, "client connections without TLS");
      assert.match(conf, /cluster \{[\s\S]*tls \{[^}]*verify: true/, "routes without verified TLS");
      const auth = podSpec(nats).volumes.find((v: any) => v.name === "auth");
      assert.equal(auth?.secret?.secretName, "nats-auth");
      const mount = (podSpec(nats).containers[0] as Container).volumeMounts?.find((m) => m.name === "auth");
      assert.equal(mount?.mountPath, "/etc/nats/auth", "auth.conf is not where nats.conf includes it from");
    });

    it("lets only the gateways, reconcilers, API, router and archiver reach NATS clients, and only NATS its routes", () => {
      const policies = objs.filter((o) => o.kind === "NetworkPolicy");
      const deny = policies.find((p) => Object.keys(p.spec.podSelector).length === 0);
      assert.ok(deny?.spec.policyTypes.includes("Ingress") && !deny.spec.ingress, "no default deny");
      if (overlay === "external-nats") return;
      const nats = find(objs, "StatefulSet", "nats");
      const forNats = policies.filter((p) => selects(p.spec.podSelector.matchLabels ?? {}, podLabels(nats)));
      assert.equal(forNats.length, 1);
      const rules = forNats[0]!.spec.ingress as any[];
      const byPort = (port: string) => rules.filter((r) => r.ports.some((p: any) => p.port === port));
      const admitted = (rule: any) =>
        workloads(objs).filter((w) =>
          rule.from.some((f: any) => {
            const sel = f.podSelector;
            if (!sel || f.namespaceSelector || f.ipBlock) return false;
            const labels = podLabels(w);
            const okLabels = Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
            const okExpr = (sel.matchExpressions ?? []).every(
              (e: any) => e.operator === "In" && e.values.includes(labels[e.key]),
            );
            return okLabels && okExpr;
          }),
        );
      const client = byPort("client");
      assert.equal(client.length, 1);
      assert.deepEqual(
        admitted(client[0])
          .map((w) => w.metadata.name)
          .sort(),
        ["llmgw-api", "llmgw-archiver", "llmgw-gateway", "llmgw-reconciler", "llmgw-router"],
      );
      const routes = byPort("cluster");
      assert.equal(routes.length, 1);
      assert.deepEqual(
        admitted(routes[0]).map((w) => w.metadata.name),
        ["nats"],
      );
      assert.equal(rules.length, 2, "another NATS ingress rule");
    });

    it("alerts on no leader, log lag, gateway saturation, replicas below desired and refused forged events", () => {
      const rule = find(objs, "PrometheusRule", "llmgw");
      const alerts = new Map<string, string>(
        rule.spec.groups.flatMap((g: any) => g.rules.map((r: any) => [r.alert, r.expr])),
      );
      const wants: Record<string, RegExp> = {
        LlmgwNoLeader: /llmgw_reconciler_is_leader/,
        LlmgwLogLag: /llmgw_projection_fold_lag_seconds/,
        LlmgwGatewaySaturated: /llmgw_gateway_/,
        LlmgwReplicasBelowDesired: /llmgw_reconciler_replicas_ready[\s\S]*llmgw_reconciler_replicas_desired/,
        LlmgwForgedEventsRefused: /llmgw_projection_events_refused_total/,
      };
      for (const [name, re] of Object.entries(wants))
        assert.match(alerts.get(name) ?? "", re, `alert ${name}`);
      // Every llmgw component is scraped: some ServiceMonitor selects a Service of it on a port it scrapes.
      const components = new Set<string>();
      for (const monitor of objs.filter((o) => o.kind === "ServiceMonitor")) {
        const sel = monitor.spec.selector;
        for (const s of objs.filter((o) => o.kind === "Service")) {
          const labels = s.metadata.labels ?? {};
          const chosen =
            Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v) &&
            (sel.matchExpressions ?? []).every(
              (e: any) => e.operator === "In" && e.values.includes(labels[e.key]),
            );
          const port = s.spec.ports.some((p: any) =>
            monitor.spec.endpoints.some((e: any) => e.port === p.name),
          );
          if (chosen && port && labels["app.kubernetes.io/name"] === "llmgw") {
            components.add(labels["app.kubernetes.io/component"] ?? "");
          }
        }
      }
      assert.deepEqual([...components].sort(), ["api", "gateway", "reconciler", "router"]);
    });
  });
}
