// A directory laid out as kubelet mounts a ConfigMap (a timestamped directory, `..data` linked to it, each key linked through `..data`), and its update by the same steps.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A ConfigMap volume in a temp directory. */
export interface ConfigMapVolume {
  /** The mount point (`/etc/floodgate` in a pod). */
  readonly dir: string;
  /** Replaces the data as kubelet does: new directory, `..data_tmp` linked to it and renamed over `..data`, new keys linked, removed ones unlinked, old directory removed. */
  update(files: Readonly<Record<string, string>>): void;
  /** The timestamped directory `..data` points at now. */
  current(): string;
}

let serial = 0;

/** Lays out `files` (key → content) as a mounted ConfigMap. */
export function configMapVolume(files: Readonly<Record<string, string>>): ConfigMapVolume {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-configmap-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const data = join(dir, '..data');
  const update = (next: Readonly<Record<string, string>>): void => {
    const old = existsSync(data) ? readlinkSync(data) : undefined;
    serial += 1;
    const stamp = `..2026_11_27_13_00_00.${String(serial).padStart(9, '0')}`;
    mkdirSync(join(dir, stamp));
    for (const [key, text] of Object.entries(next)) writeFileSync(join(dir, stamp, key), text);
    symlinkSync(stamp, join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), data);
    for (const key of Object.keys(next)) if (!existsSync(join(dir, key))) symlinkSync(join('..data', key), join(dir, key));
    if (old === undefined) return;
    for (const key of readdirSync(join(dir, old))) if (!(key in next)) rmSync(join(dir, key), { force: true });
    rmSync(join(dir, old), { recursive: true, force: true });
  };
  update(files);
  return { dir, update, current: () => readlinkSync(data) };
}
