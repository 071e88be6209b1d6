// A throwaway certificate authority for TLS tests: openssl makes a CA and certificates it signs in a temp dir, removed on close.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The PEM files of one certificate: its path and its key's path. */
export interface CertificateFiles {
  readonly cert: string;
  readonly key: string;
}

/** What a test server's certificate says: valid for 127.0.0.1 and localhost, for servers. */
export const SERVER_EXTENSIONS = 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n';
/** What a test client's certificate says. */
export const CLIENT_EXTENSIONS = 'extendedKeyUsage=clientAuth\n';

/** A CA in a temp dir (`ca.crt`, `ca.key`), valid for two days, and the certificates it signs. */
export class TestCertificateAuthority {
  /** The temp dir holding every file. */
  readonly dir: string;
  /** The CA's certificate (PEM). */
  readonly ca: string;

  /** Makes the CA; `label` names the temp dir. */
  constructor(label: string) {
    this.dir = mkdtempSync(join(tmpdir(), `floodgate-${label}-`));
    this.openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '2',
      '-subj',
      '/CN=test ca',
    );
    this.ca = join(this.dir, 'ca.crt');
  }

  /** A key and a certificate for `name` (its file names) with common name `cn`, signed by the CA, with `extensions` (SAN, usage). */
  sign(name: string, extensions: string, cn = name): CertificateFiles {
    this.openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
    writeFileSync(join(this.dir, `${name}.ext`), extensions);
    this.openssl(
      ...['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2'],
      ...['-out', `${name}.crt`, '-extfile', `${name}.ext`],
    );
    return { cert: join(this.dir, `${name}.crt`), key: join(this.dir, `${name}.key`) };
  }

  /** A self-signed key and certificate for `name`: one no CA here vouches for. */
  selfSigned(name: string): CertificateFiles {
    this.openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
    );
    return { cert: join(this.dir, `${name}.crt`), key: join(this.dir, `${name}.key`) };
  }

  /** Removes the temp dir. */
  close(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private openssl(...args: string[]): void {
    execFileSync('openssl', args, { cwd: this.dir, stdio: 'ignore' });
  }
}
