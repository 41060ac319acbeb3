// The sources file (EXECUTOR_CONFIG): what must ship with it, and which
// Secrets Manager secrets it names. Read at synth time so that a mistake
// (a spec file that is not there, a secret nobody may read, a Cedar policy
// the functions would refuse) fails the deploy instead of the first request.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse } from 'smol-toml';

import { checkCedar } from './cedar';

export interface Sources {
  /**
   * The files to ship, relative to the sources file's directory: the file
   * itself and every local file it names (`FILE_FIELDS`, `index`, the Cedar
   * policies of `[policy] cedar` and of each `[[toolkits]] cedar`).
   */
  files: string[];
  /** Every `arn:...:secretsmanager:...` value in the file (auth, headers). */
  secretRefs: string[];
}

/**
 * The fields of a source that name a local file (shared/catalog/src/config.rs),
 * and whether an http(s) URL may stand instead: OpenAPI `spec` (a file or a
 * URL), GraphQL `schema` (an introspection result, a file only).
 */
export const FILE_FIELDS: Record<string, boolean> = { spec: true, schema: false };

/**
 * The sources file `file` in `dir`: what ships with it and the secrets it
 * names. Throws (`config: ...`) when a file it names is missing or not below
 * `dir`, or when its Cedar policies would not load (lib/cedar.ts).
 */
export function readSources(dir: string, file: string): Sources {
  const where = path.join(dir, file);
  if (!fs.statSync(where, { throwIfNoEntry: false })?.isFile()) {
    throw new Error(`config: no sources file at ${where}`);
  }
  let toml: Record<string, unknown>;
  try {
    toml = parse(fs.readFileSync(where, 'utf8'));
  } catch (e) {
    throw new Error(`config: ${where} is not valid TOML: ${(e as Error).message}`);
  }
  const files = [file];
  // The function sees the layer's copy under /opt/executor, so a file must sit
  // below the sources file's directory, where the relative path still holds.
  const shipped = (what: string, name: string, hint: string) => {
    const relative = path.normalize(name);
    if (path.isAbsolute(name) || relative.startsWith('..')) {
      throw new Error(
        `config: ${what} ${JSON.stringify(name)} must be a path below ${dir}${hint} to be deployed with the sources file`,
      );
    }
    if (!fs.statSync(path.join(dir, relative), { throwIfNoEntry: false })?.isFile()) {
      throw new Error(`config: ${what} file ${path.join(dir, relative)} does not exist`);
    }
    files.push(relative);
    return relative;
  };
  const sources = Array.isArray(toml.sources) ? (toml.sources as Record<string, unknown>[]) : [];
  for (const source of sources) {
    for (const [field, url] of Object.entries(FILE_FIELDS)) {
      const value = source[field];
      if (typeof value !== 'string' || (url && /^https?:\/\//.test(value))) continue;
      shipped(`source ${String(source.namespace)}: ${field}`, value, url ? ' (or an http(s) URL)' : '');
    }
  }
  // The catalog index (`executor catalog build`), built before deploying: the
  // functions load it instead of parsing the specs, and refuse it if stale.
  if (typeof toml.index === 'string') {
    shipped('catalog index', toml.index, '');
  }
  // Cedar policies (shared/catalog/src/config/load.rs): the executor's, and
  // each toolkit's. Checked as the functions check them at start.
  const cedar = (what: string, value: unknown) => {
    if (value === undefined) return;
    if (typeof value !== 'string') {
      throw new Error(`config: ${what}: expected the path of a Cedar policy file, relative to the sources file`);
    }
    checkCedar(path.join(dir, shipped(what, value, '')));
  };
  const policy = toml.policy;
  if (policy && typeof policy === 'object' && !Array.isArray(policy)) {
    cedar('[policy] cedar', (policy as Record<string, unknown>).cedar);
  }
  const toolkits = Array.isArray(toml.toolkits) ? (toml.toolkits as Record<string, unknown>[]) : [];
  for (const toolkit of toolkits) {
    cedar(`toolkit ${String(toolkit.name)}: cedar`, toolkit.cedar);
  }
  const secretRefs = new Set<string>();
  const collect = (value: unknown) => {
    if (typeof value === 'string' && /^arn:aws[a-z-]*:secretsmanager:/.test(value)) secretRefs.add(value);
    else if (Array.isArray(value)) value.forEach(collect);
    else if (value && typeof value === 'object') Object.values(value).forEach(collect);
  };
  collect(toml);
  return { files: [...new Set(files)], secretRefs: [...secretRefs] };
}

/**
 * Whether `ref` (as written in the sources file: a complete ARN, or one
 * without the random suffix) names one of the `granted` complete ARNs.
 */
export function isGranted(ref: string, granted: string[]): boolean {
  return granted.some((arn) => arn === ref || (arn.startsWith(`${ref}-`) && arn.length === ref.length + 7));
}
