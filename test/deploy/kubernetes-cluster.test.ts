// deploy/kubernetes-cluster: the HPA owns the Deployment's count, the pod reads the Secret it ships, and its config with the args
// the Deployment passes (the Secret's values replaced by test ones) passes `floodgate check` and serves two pods on a TLS Redis Cluster.
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { cleanEnv, root } from '../packaging/npm.js';
import { freePort, startRedis, startRedisSentinel, type RedisServer } from '../support/redis-server.js';
import { TestCertificateAuthority } from '../support/test-certificates.js';

const manifests = join(root, 'deploy/kubernetes-cluster');
const floodgate = join(root, 'bin/floodgate.mjs');

/** The parts of the manifests these tests read. */
interface Manifest {
  kind: string;
  metadata: { name: string };
  [field: string]: unknown;
}
interface Container {
  args: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  ports: { name: string; containerPort: number }[];
  resources: { requests: { cpu: string }; limits: { cpu: string } };
  volumeMounts: { name: string; mountPath: string }[];
  startupProbe?: { httpGet: { port: string } };
  livenessProbe: { httpGet: { path: string; port: string } };
  readinessProbe: { httpGet: { path: string; port: string } };
}
interface Volume {
  name: string;
  configMap?: { name: string };
  secret?: { secretName: string; items?: { key: string; path: string }[] };
  emptyDir?: object;
}
interface PodSpec {
  containers: Container[];
  volumes: Volume[];
}

/** Every resource the kustomization lists, by kind. */
function resources(): Map<string, Manifest> {
  const kustomization = parse(readFileSync(join(manifests, 'kustomization.yaml'), 'utf8')) as { resources: string[] };
  const byKind = new Map<string, Manifest>();
  for (const file of kustomization.resources) {
    for (const doc of parseAllDocuments(readFileSync(join(manifests, file), 'utf8'))) {
      const manifest = doc.toJS() as Manifest;
      byKind.set(manifest.kind === 'Service' ? `Service/${manifest.metadata.name}` : manifest.kind, manifest);
    }
  }
  return byKind;
}

const all = resources();
const get = <T>(kind: string): Manifest & T => {
  const manifest = all.get(kind);
  assert.ok(manifest, `deploy/kubernetes-cluster has no ${kind}`);
  return manifest as Manifest & T;
};
const deployment = get<{ spec: { replicas?: number; template: { spec: PodSpec } } }>('Deployment');
const pod = deployment.spec.template.spec;
const container = pod.containers[0]!;
const secret = get<{ stringData: Record<string, string> }>('Secret');
const configMap = get<{ data: Record<string, string> }>('ConfigMap');

test('the HPA owns the count: no replicas in the Deployment, autoscaling/v2 on CPU of a request that is set, 2 at least, a scale-down window', () => {
  assert.equal(deployment.spec.replicas, undefined, 'a fixed replicas would reset the HPA on every kubectl apply');
  const hpa = get<{
    apiVersion: string;
    spec: {
      scaleTargetRef: { kind: string; name: string };
      minReplicas: number;
      maxReplicas: number;
      metrics: { type: string; resource: { name: string; target: { type: string; averageUtilization: number } } }[];
      behavior: { scaleDown: { stabilizationWindowSeconds: number } };
    };
  }>('HorizontalPodAutoscaler');
  assert.equal(hpa.apiVersion, 'autoscaling/v2');
  assert.deepEqual(hpa.spec.scaleTargetRef.kind, 'Deployment');
  assert.equal(hpa.spec.scaleTargetRef.name, deployment.metadata.name);
  assert.ok(hpa.spec.minReplicas >= 2 && hpa.spec.maxReplicas > hpa.spec.minReplicas);
  const cpu = hpa.spec.metrics.find((m) => m.type === 'Resource' && m.resource.name === 'cpu');
  assert.ok(cpu && cpu.resource.target.type === 'Utilization', 'a CPU utilisation target');
  // A utilisation is a share of the request: without one the HPA cannot compute it.
  assert.ok(container.resources.requests.cpu && container.resources.limits.cpu, 'CPU request and limit');
  assert.ok(hpa.spec.behavior.scaleDown.stabilizationWindowSeconds > 0);
  const pdb = get<{ spec: { maxUnavailable?: number; minAvailable?: number } }>('PodDisruptionBudget');
  assert.ok(pdb.spec.maxUnavailable === 1 || (pdb.spec.minAvailable ?? 0) < hpa.spec.minReplicas, 'drains can evict a pod at the minimum');
  // Probes on the admin listener, as the base's.
  for (const probe of [container.startupProbe, container.livenessProbe, container.readinessProbe])
    assert.equal(probe?.httpGet.port, 'admin');
});

test('every Secret key the pod reads is in the example Secret, which holds placeholders only', () => {
  const read = [
    ...(container.env ?? []).flatMap((e) => (e.valueFrom?.secretKeyRef ? [e.valueFrom.secretKeyRef] : [])),
    ...pod.volumes.flatMap((v) =>
      v.secret?.secretName === secret.metadata.name ? (v.secret.items ?? []).map((i) => ({ name: v.secret!.secretName, key: i.key })) : [],
    ),
  ].filter((ref) => ref.name === secret.metadata.name);
  assert.ok(read.length >= 2, 'the Redis endpoint and its password come from the Secret');
  for (const ref of read) assert.ok(ref.key in secret.stringData, `the pod reads ${ref.key}, which the example Secret lacks`);
  for (const [key, value] of Object.entries(secret.stringData)) assert.match(value, /REPLACE/, `${key} is not marked as a placeholder`);
  assert.ok(container.args.includes('$(REDIS_NODES)'), 'the nodes are expanded from the environment into --redis-cluster');
});

/** A TLS Redis Cluster of three masters that requires a password, and its CA. */
interface TlsCluster {
  nodes: string[];
  password: string;
  ca: string;
  plain: RedisServer[];
}

let authority: TestCertificateAuthority;
let dir: string;
let cluster: TlsCluster | undefined;
let upstream: Server;
const children: ChildProcess[] = [];

async function startTlsCluster(): Promise<TlsCluster> {
  // No extendedKeyUsage: with tls-cluster the nodes also present this certificate as clients on the cluster bus.
  authority.sign('server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\n', 'redis');
  const plain: RedisServer[] = [];
  const tlsPorts: number[] = [];
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    tlsPorts.push(port);
    // The plain port is the fixture's PING; with tls-cluster the nodes announce their TLS ports and talk TLS on the bus.
    plain.push(
      await startRedis({
        args: [
          ...['--tls-port', String(port), '--tls-cluster', 'yes', '--tls-auth-clients', 'no'],
          ...['--tls-cert-file', join(dir, 'server.crt'), '--tls-key-file', join(dir, 'server.key')],
          ...['--tls-ca-cert-file', join(dir, 'ca.crt'), '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`],
        ],
      }),
    );
  }
  const nodes = tlsPorts.map((port) => `127.0.0.1:${port}`);
  const tlsCli = ['--tls', '--cacert', join(dir, 'ca.crt')];
  const create = spawnSync('redis-cli', [...tlsCli, '--cluster', 'create', ...nodes, '--cluster-yes'], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(create.status, 0, `redis-cli --cluster create: ${create.stdout}${create.stderr}`);
  const deadline = Date.now() + 30_000;
  for (const server of plain) {
    for (;;) {
      const info = spawnSync('redis-cli', ['-p', String(server.port), 'CLUSTER', 'INFO'], { encoding: 'utf8' }).stdout;
      if (info.includes('cluster_state:ok') && info.includes('cluster_known_nodes:3')) break;
      assert.ok(Date.now() < deadline, `node ${server.port}: ${info}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  // Only now: redis-cli made the cluster without one. The bus does not authenticate, so the nodes keep agreeing.
  const password = `test-${process.pid}-${Date.now().toString(36)}`;
  for (const server of plain) execFileSync('redis-cli', ['-p', String(server.port), 'CONFIG', 'SET', 'requirepass', password]);
  return { nodes, password, ca: readFileSync(join(dir, 'ca.crt'), 'utf8'), plain };
}

before(async () => {
  authority = new TestCertificateAuthority('k8s-cluster');
  dir = authority.dir;
  cluster = await startTlsCluster();
  upstream = createServer((_req, res) => res.end('upstream ok'));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
});

after(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await Promise.all((cluster?.plain ?? []).map((server) => server.stop()));
  await new Promise<void>((resolve) => (upstream ? upstream.close(() => resolve()) : resolve()));
  authority?.close();
});

/** Kubernetes' `$(VAR)` expansion of a container's args from its env (an undefined name stays as written). */
const expand = (arg: string, env: Record<string, string>): string =>
  arg.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => env[name] ?? whole);

/**
 * The pod laid out in `podDir` as the kubelet would mount it, with `secretValues` as the Secret's data: each volume a
 * directory, the mount paths in the args and the config mapped to them. Returns the args after `serve`, expanded.
 */
function layOutPod(
  podDir: string,
  secretValues: Record<string, string>,
  configEdit: (text: string) => string,
  spec: { container: Container; volumes: Volume[] } = { container, volumes: pod.volumes },
): string[] {
  const { volumes } = spec;
  const mounts: [string, string][] = [];
  for (const mount of spec.container.volumeMounts) {
    const volume = volumes.find((v) => v.name === mount.name);
    assert.ok(volume, `volume ${mount.name} is mounted but not declared`);
    const local = join(podDir, mount.name);
    mkdirSync(local, { recursive: true });
    mounts.push([mount.mountPath, local]);
    if (volume.configMap) {
      assert.equal(volume.configMap.name, configMap.metadata.name);
      for (const [key, text] of Object.entries(configMap.data)) writeFileSync(join(local, key), text);
    } else if (volume.secret?.secretName === secret.metadata.name) {
      for (const item of volume.secret.items ?? []) {
        assert.ok(item.key in secretValues, `the pod mounts the Secret's ${item.key}, which the test did not fill`);
        writeFileSync(join(local, item.path), secretValues[item.key]!);
      }
    } else if (volume.secret) {
      // The admin token's Secret, which the user creates with kubectl.
      writeFileSync(join(local, 'admin-token'), 'a'.repeat(64));
    }
  }
  // One pass, so a local directory under /tmp is not mapped again by the pod's /tmp mount.
  const mountPaths = new RegExp(`(${mounts.map(([from]) => from.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})/`, 'g');
  const local = (text: string): string => text.replace(mountPaths, (_, from: string) => `${mounts.find(([f]) => f === from)![1]}/`);
  const config = spec.container.args[spec.container.args.indexOf('--config') + 1]!;
  const file = local(config);
  writeFileSync(file, configEdit(local(readFileSync(file, 'utf8'))));
  const env: Record<string, string> = {};
  for (const e of spec.container.env ?? []) {
    const ref = e.valueFrom?.secretKeyRef;
    if (ref !== undefined) {
      assert.equal(ref.name, secret.metadata.name);
      assert.ok(ref.key in secretValues, `the pod reads the Secret's ${ref.key}, which the test did not fill`);
      env[e.name] = secretValues[ref.key]!;
    } else if (e.value !== undefined) env[e.name] = e.value;
  }
  return spec.container.args.map((arg) => local(expand(arg, env)));
}

function run(args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [floodgate, ...args], { env: cleanEnv(), timeout: 30_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : Number(error.code), output: stdout + stderr }),
    );
  });
}

/** Starts one pod's gateway; resolves once /readyz answers 200. */
async function startPod(
  name: string,
  secretValues: Record<string, string>,
  spec?: Parameters<typeof layOutPod>[3],
): Promise<{ proxy: string; admin: string; log: () => string }> {
  const [proxyPort, adminPort] = [await freePort(), await freePort()];
  const port = (upstream.address() as { port: number }).port;
  const args = layOutPod(
    join(dir, name),
    secretValues,
    (text) =>
      text
        .replace(/^upstream: .*$/m, `upstream: http://127.0.0.1:${port}`)
        .replace(/^listen: .*$/m, `listen: 127.0.0.1:${proxyPort}`)
        .replace(/^ {2}listen: 0\.0\.0\.0:9090$/m, `  listen: 127.0.0.1:${adminPort}`),
    spec,
  );
  let output = '';
  const child = spawn(process.execPath, [floodgate, 'serve', ...args], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const admin = `http://127.0.0.1:${adminPort}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    assert.equal(child.exitCode, null, `pod ${name} exited:\n${output}`);
    const ready = await fetch(`${admin}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ready) break;
    assert.ok(Date.now() < deadline, `pod ${name} not ready within 30 s:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { proxy: `http://127.0.0.1:${proxyPort}`, admin, log: () => output };
}

test("the ConfigMap's config with the Deployment's args passes floodgate check", async () => {
  assert.ok(cluster);
  const args = layOutPod(join(dir, 'check'), { nodes: cluster.nodes.join(','), password: 'p', 'ca.crt': cluster.ca }, (t) => t);
  assert.deepEqual(args.slice(0, 1), ['--config']);
  const result = await run(['check', ...args]);
  assert.equal(result.code, 0, result.output);
  assert.match(result.output, /valid; 5 rule\(s\): login, search-capacity, per-address, api, everyone-else/);
});

test('two pods of the Deployment, the Secret holding a TLS Cluster: both ready, sharing one count in the Cluster', async (t) => {
  assert.ok(cluster);
  const values = { nodes: cluster.nodes.slice(0, 2).join(','), password: cluster.password, 'ca.crt': cluster.ca };
  const pods = [await startPod('pod-a', values), await startPod('pod-b', values)];
  for (const p of pods) {
    // Described without the password, over TLS, from the Secret's nodes.
    assert.match(p.log(), new RegExp(`redis-cluster ${cluster.nodes[0]},${cluster.nodes[1]} \\(password \\*\\*\\*, tls\\)`), p.log());
    assert.ok(!p.log().includes(cluster.password), 'the password is never logged');
  }
  // The login rule (5 a minute per address), asked of the two pods in turn: counted once for both, never past the limit
  // (local-first may hold a unit in the other pod's lease: fewer, never more).
  const statuses: number[] = [];
  for (let i = 0; i < 12; i++) {
    const response = await fetch(`${pods[i % 2]!.proxy}/login`, { method: 'POST' });
    await response.arrayBuffer();
    statuses.push(response.status);
  }
  const admitted = statuses.filter((s) => s === 200).length;
  t.diagnostic(`admitted ${admitted} of 12 POST /login sent to the two pods in turn (limit 5)`);
  assert.ok(admitted >= 1 && admitted <= 5, `admitted ${admitted} of 12 (limit 5 for both pods): ${statuses.join(' ')}`);
  assert.equal(statuses.filter((s) => s === 429).length, 12 - admitted, statuses.join(' '));
  const keys = cluster.plain.flatMap((server) =>
    spawnSync(
      'redis-cli',
      ['-p', String(server.port), '-a', cluster!.password, '--no-auth-warning', '--scan', '--pattern', '*fg:gw:login:*'],
      {
        encoding: 'utf8',
      },
    )
      .stdout.split('\n')
      .filter(Boolean),
  );
  assert.ok(keys.length > 0, 'the login counter is in the Cluster');
});

/** The Deployment changed for Sentinel as its comment says: REDIS_SENTINEL for REDIS_NODES, --redis-sentinel, no TLS. */
function sentinelVariant(): { container: Container; volumes: Volume[] } {
  const args = [...container.args];
  args.splice(args.indexOf('--redis-cluster'), 2, '--redis-sentinel', '$(REDIS_SENTINEL)');
  args.splice(args.indexOf('--redis-ca'), 2);
  const env = (container.env ?? []).map((e) =>
    e.name === 'REDIS_NODES' ? { name: 'REDIS_SENTINEL', valueFrom: { secretKeyRef: { name: secret.metadata.name, key: 'sentinel' } } } : e,
  );
  const volumes = pod.volumes.map((v) =>
    v.secret?.secretName === secret.metadata.name
      ? { ...v, secret: { ...v.secret, items: v.secret.items?.filter((i) => i.key !== 'ca.crt') } }
      : v,
  );
  return { container: { ...container, args, env }, volumes };
}

test("the Deployment's Sentinel variant, made as its comment says: two pods through 3 sentinels to a master with a password", async (t) => {
  const text = readFileSync(join(manifests, 'deployment.yaml'), 'utf8');
  assert.match(text, /REDIS_SENTINEL below in place of REDIS_NODES/);
  assert.match(text, /--redis-sentinel \$\(REDIS_SENTINEL\) in place of --redis-cluster \$\(REDIS_NODES\)/);
  assert.match(text, /Without TLS: drop --redis-ca and the Secret's ca\.crt/);
  const set = await startRedisSentinel();
  try {
    const password = `test-${process.pid}-${Date.now().toString(36)}`;
    const cli = (port: number, ...args: string[]): string => execFileSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' });
    for (const s of set.sentinels) assert.match(cli(s.port, 'SENTINEL', 'SET', set.name, 'auth-pass', password), /OK/);
    for (const server of [...set.replicas, set.master]) {
      cli(server.port, 'CONFIG', 'SET', 'masterauth', password);
      cli(server.port, 'CONFIG', 'SET', 'requirepass', password);
    }
    const values = { sentinel: set.spec, password };
    const pods = [await startPod('sentinel-a', values, sentinelVariant()), await startPod('sentinel-b', values, sentinelVariant())];
    for (const p of pods) assert.match(p.log(), /redis-sentinel [^\n]*\(password \*\*\*\)/, p.log());
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const response = await fetch(`${pods[i % 2]!.proxy}/login`, { method: 'POST' });
      await response.arrayBuffer();
      statuses.push(response.status);
    }
    const admitted = statuses.filter((s) => s === 200).length;
    t.diagnostic(`admitted ${admitted} of 12 POST /login sent to the two pods in turn (limit 5)`);
    assert.ok(admitted >= 1 && admitted <= 5, `admitted ${admitted} of 12 (limit 5 for both pods): ${statuses.join(' ')}`);
    const keys = cli(set.master.port, '-a', password, '--no-auth-warning', '--scan', '--pattern', '*fg:gw:login:*');
    assert.ok(keys.trim() !== '', 'the login counter is in the master');
  } finally {
    await set.stop();
  }
});
