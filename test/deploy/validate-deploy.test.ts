// scripts/validate-deploy.mjs: both Kubernetes kustomizations pass kubeconform (strict, two Kubernetes versions) and the Dockerfile passes hadolint; broken copies of both are rejected; without the tools it fails naming the install command.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { root } from '../packaging/npm.js';

const script = join(root, 'scripts/validate-deploy.mjs');
let scratch: string | undefined;

interface Run {
  code: number;
  output: string;
}

function validate(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [script, ...args], { cwd: root, env, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, output: stdout + stderr });
    });
  });
}

const dir = (): string => {
  assert.ok(scratch, 'no scratch directory');
  return scratch;
};

/** A copy of `source` (deploy/kubernetes unless named) in which `edit` has changed one file. */
function brokenManifests(name: string, file: string, edit: (text: string) => string, source = 'deploy/kubernetes'): string {
  const copy = join(dir(), name);
  cpSync(join(root, source), copy, { recursive: true });
  const path = join(copy, file);
  const before = readFileSync(path, 'utf8');
  const after = edit(before);
  assert.notEqual(after, before, `the edit did not change ${file}`);
  writeFileSync(path, after);
  return copy;
}

let installed: Run | undefined;

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'floodgate-validate-deploy-'));
  // Whether the tools are here decides every test below: without them each fails with the install command.
  installed = await validate([]);
});

after(() => {
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
});

/** Fails the test with the install command when the validator's tools are missing (exit 3). */
function requireTools(): void {
  assert.ok(installed, 'the first run did not happen');
  assert.notEqual(
    installed.code,
    3,
    `kubeconform, the Kubernetes schemas or hadolint are missing; run: node scripts/validate-deploy.mjs --install\n${installed.output}`,
  );
}

test('deploy/kubernetes, deploy/kubernetes-cluster and the Dockerfile pass kubeconform (strict, Kubernetes 1.29 and 1.37) and hadolint', () => {
  requireTools();
  const run = installed!;
  assert.equal(run.code, 0, run.output);
  for (const manifests of ['deploy/kubernetes', 'deploy/kubernetes-cluster']) {
    for (const version of ['1.29.0', '1.37.0']) {
      // Each directory's own summary line: a directory left out, or one of its resources skipped, fails here.
      const summary = new RegExp(`kubeconform ${manifests} \\(Kubernetes ${version.replaceAll('.', '\\.')}\\):\n\\s+(Summary: [^\n]*)`);
      const line = summary.exec(run.output)?.[1];
      assert.ok(line, `no kubeconform summary for ${manifests} on Kubernetes ${version}:\n${run.output}`);
      assert.match(line, /^Summary: [1-9]\d* resources found in \d+ files - Valid: \d+, Invalid: 0, Errors: 0, Skipped: 0$/);
    }
  }
  assert.match(run.output, /hadolint [^\n]*Dockerfile:\n\s+no findings/);
});

test('a Deployment with a mistyped field and a string replica count is rejected, naming both', async () => {
  requireTools();
  const manifests = brokenManifests('typo', 'deployment.yaml', (text) =>
    text.replace('replicas: 2', 'replicas: two').replace('readinessProbe:', 'readinesProbe:'),
  );
  const run = await validate(['--manifests', manifests]);
  assert.equal(run.code, 1, run.output);
  assert.match(run.output, /deployment\.yaml - Deployment floodgate is invalid/);
  assert.match(run.output, /\/spec\/replicas': got string/);
  assert.match(run.output, /additional properties 'readinesProbe' not allowed/);
});

test('--manifests checks the one directory named: deploy/kubernetes-cluster with a mistyped HPA field is rejected, naming it', async () => {
  requireTools();
  const manifests = brokenManifests(
    'hpa',
    'hpa.yaml',
    (text) => text.replace('averageUtilization: 70', 'averageUtilisation: 70'),
    'deploy/kubernetes-cluster',
  );
  const run = await validate(['--manifests', manifests]);
  assert.equal(run.code, 1, run.output);
  assert.match(run.output, /hpa\.yaml - HorizontalPodAutoscaler floodgate is invalid/);
  assert.match(run.output, /additional properties 'averageUtilisation' not allowed/);
  assert.doesNotMatch(run.output, /kubeconform deploy\/kubernetes /, 'the default directories are not checked too');
});

test('a manifest of an unknown kind is an error, not skipped; a file left out of kustomization.yaml is reported', async () => {
  requireTools();
  const manifests = brokenManifests('kind', 'pdb.yaml', (text) => text.replace('kind: PodDisruptionBudget', 'kind: PodDisruptionBudgett'));
  writeFileSync(join(manifests, 'extra.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: extra }\n');
  const run = await validate(['--manifests', manifests]);
  assert.equal(run.code, 1, run.output);
  assert.match(run.output, /could not find schema for PodDisruptionBudgett/);
  assert.match(run.output, /extra\.yaml: not listed in kustomization\.yaml resources/);
});

test('a Dockerfile on an unpinned base image running as root is rejected by hadolint', async () => {
  requireTools();
  const dockerfile = join(dir(), 'Dockerfile');
  writeFileSync(
    dockerfile,
    readFileSync(join(root, 'Dockerfile'), 'utf8')
      .replace(/^FROM node:[^\s]+$/m, 'FROM node:latest')
      .replace(/^USER .*$/m, 'USER root'),
  );
  const run = await validate(['--dockerfile', dockerfile]);
  assert.equal(run.code, 1, run.output);
  assert.match(run.output, /DL3007/, 'the latest tag');
  assert.match(run.output, /DL3002/, 'the last USER is root');
});

test('without the tools it exits 3 and names the install command', async () => {
  const run = await validate([], {
    ...process.env,
    FLOODGATE_DEPLOY_TOOLS: join(dir(), 'no-tools'),
    PATH: '/nonexistent',
    KUBECONFORM: '',
    HADOLINT: '',
  });
  assert.equal(run.code, 3, run.output);
  assert.match(run.output, /Install them with: node scripts\/validate-deploy\.mjs --install/);
});
