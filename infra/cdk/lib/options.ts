// Deployment options: the stack's props, and how they are read from CDK
// context (`cdk deploy -c key=value` or the `context` of cdk.json).

import * as path from 'node:path';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';

/** Lambda CPU architecture of the deployed `bootstrap` binaries. */
export type Architecture = 'arm64' | 'x86_64';

/** What happens to the table and the log groups when the stack is deleted. */
export type Removal = 'retain' | 'destroy';

export interface ExecutorOptions {
  /**
   * Directory holding one `<binary>/bootstrap` per function, as written by
   * `cargo lambda build --lambda-dir target/lambda-functions`. Relative paths
   * are relative to the working directory (infra/cdk for the CDK CLI).
   * @default ../../target/lambda-functions
   */
  readonly assetDir?: string;
  /** @default 'arm64' */
  readonly architecture?: Architecture;
  /** Table and log groups on stack deletion. @default 'retain' */
  readonly removalPolicy?: Removal;
  /**
   * The sources file (TOML, see executor.example.toml). It ships as a Lambda
   * layer with the spec files it names (paths below its directory);
   * `EXECUTOR_CONFIG` points at it inside the layer. Every Secrets Manager ARN
   * it names must be in `secretArns`.
   * @default - no sources
   */
  readonly config?: string;
  /**
   * Secrets Manager secret ARNs the sources file refers to (complete ARNs,
   * with the random suffix). The MCP and approval functions may read exactly
   * these.
   * @default - none
   */
  readonly secretArns?: string[];
  /** Custom domain for the API; needs `certificateArn` (ACM, same region). */
  readonly domainName?: string;
  readonly certificateArn?: string;
  /** OIDC bearer tokens: issuer and audience go together (`EXECUTOR_OIDC_*`). */
  readonly oidcIssuer?: string;
  readonly oidcAudience?: string;
  /** @default - `<issuer>/.well-known/openid-configuration`'s jwks_uri */
  readonly oidcJwksUrl?: string;
  /** @default 'sub' */
  readonly oidcOwnerClaim?: string;
  /** Timing knobs of the session lifecycle (docs/lifecycle.md); one value for all three functions. */
  readonly sessionTimeoutMs?: number;
  readonly pausedLeaseMs?: number;
  readonly approvalWindowMs?: number;
  /**
   * How long `resume` and the approval API wait for a browser decision
   * (`EXECUTOR_APPROVAL_WAIT_MS`), at most 25 s so that API Gateway's 30 s holds.
   * @default - the functions' own (20 s)
   */
  readonly approvalWaitMs?: number;
  /**
   * How approvals reach a human when the MCP URL has no `?elicitation_mode=`
   * (`EXECUTOR_ELICITATION_MODE`): model, browser or native.
   * @default 'model'
   */
  readonly elicitationMode?: string;
  /** @default 30 */
  readonly logRetentionDays?: number;
}

/** The context keys read by `optionsFromContext`, one per option. */
export const CONTEXT_KEYS = [
  'assetDir',
  'architecture',
  'removalPolicy',
  'config',
  'secretArns',
  'domainName',
  'certificateArn',
  'oidcIssuer',
  'oidcAudience',
  'oidcJwksUrl',
  'oidcOwnerClaim',
  'sessionTimeoutMs',
  'pausedLeaseMs',
  'approvalWindowMs',
  'approvalWaitMs',
  'elicitationMode',
  'logRetentionDays',
] as const;

const NUMBER_KEYS = new Set([
  'sessionTimeoutMs',
  'pausedLeaseMs',
  'approvalWindowMs',
  'approvalWaitMs',
  'logRetentionDays',
]);

/**
 * Options from context values. `-c` always gives strings, cdk.json may give
 * numbers and arrays: both are accepted. Empty strings count as unset.
 */
export function optionsFromContext(get: (key: string) => unknown): ExecutorOptions {
  const options: Record<string, unknown> = {};
  for (const key of CONTEXT_KEYS) {
    const raw = get(key);
    if (raw === undefined || raw === null || raw === '') continue;
    if (key === 'secretArns') {
      options[key] = toList(raw);
    } else if (NUMBER_KEYS.has(key)) {
      const value = typeof raw === 'number' ? raw : Number(String(raw).trim());
      if (!Number.isInteger(value) || value <= 0) {
        throw new Error(`context ${key}: expected a positive whole number, got ${JSON.stringify(raw)}`);
      }
      options[key] = value;
    } else {
      options[key] = String(raw).trim();
    }
  }
  return options as ExecutorOptions;
}

/** A JSON array, or a comma-separated string. */
function toList(raw: unknown): string[] {
  if (Array.isArray(raw)) return raw.map((v) => String(v).trim()).filter(Boolean);
  const text = String(raw).trim();
  if (text.startsWith('[')) return toList(JSON.parse(text));
  return text
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);
}

/** The options with defaults applied, checked; throws a message naming the option. */
export interface Resolved {
  assetDir: string;
  architecture: Architecture;
  removalPolicy: Removal;
  config?: { dir: string; file: string };
  secretArns: string[];
  domain?: { name: string; certificateArn: string };
  oidc?: { issuer: string; audience: string; jwksUrl?: string; ownerClaim?: string };
  sessionTimeoutMs: number;
  pausedLeaseMs: number;
  approvalWindowMs: number;
  approvalWaitMs?: number;
  elicitationMode?: string;
  logRetentionDays: number;
}

// The session lifecycle's timing (docs/lifecycle.md). Set explicitly on every
// function so that the MCP and alarm functions can never disagree about them.
export const DEFAULT_SESSION_TIMEOUT_MS = 300_000;
export const DEFAULT_PAUSED_LEASE_MS = 600_000;
export const DEFAULT_APPROVAL_WINDOW_MS = 600_000;
/** The HTTP functions time out at 29 s; a wait leaves room for the rest of the request. */
export const MAX_APPROVAL_WAIT_MS = 25_000;

export function resolve(options: ExecutorOptions): Resolved {
  const architecture = options.architecture ?? 'arm64';
  if (architecture !== 'arm64' && architecture !== 'x86_64') {
    throw new Error(`architecture: expected arm64 or x86_64, got ${JSON.stringify(architecture)}`);
  }
  const removalPolicy = options.removalPolicy ?? 'retain';
  if (removalPolicy !== 'retain' && removalPolicy !== 'destroy') {
    throw new Error(`removalPolicy: expected retain or destroy, got ${JSON.stringify(removalPolicy)}`);
  }
  const secretArns = [...new Set(options.secretArns ?? [])];
  for (const arn of secretArns) {
    // The complete ARN: IAM matches it exactly, and a partial one (no random suffix) would match nothing.
    if (!/^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$/.test(arn)) {
      throw new Error(
        `secretArns: ${JSON.stringify(arn)} is not a complete Secrets Manager secret ARN ` +
          '(arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-SUFFIX)',
      );
    }
  }
  if (!!options.domainName !== !!options.certificateArn) {
    throw new Error('domainName and certificateArn go together: set both or neither');
  }
  if (
    options.certificateArn &&
    !/^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate\/[A-Za-z0-9-]+$/.test(options.certificateArn)
  ) {
    throw new Error(`certificateArn: ${JSON.stringify(options.certificateArn)} is not an ACM certificate ARN`);
  }
  if (!!options.oidcIssuer !== !!options.oidcAudience) {
    throw new Error('oidcIssuer and oidcAudience go together: set both or neither');
  }
  if ((options.oidcJwksUrl || options.oidcOwnerClaim) && !options.oidcIssuer) {
    throw new Error('oidcJwksUrl and oidcOwnerClaim need oidcIssuer and oidcAudience');
  }
  if (options.approvalWaitMs !== undefined && options.approvalWaitMs > MAX_APPROVAL_WAIT_MS) {
    throw new Error(
      `approvalWaitMs: ${options.approvalWaitMs} is over ${MAX_APPROVAL_WAIT_MS}; a waiting request must end ` +
        "well inside API Gateway's 30 s",
    );
  }
  if (options.elicitationMode !== undefined && !['model', 'browser', 'native'].includes(options.elicitationMode)) {
    throw new Error(`elicitationMode: expected model, browser or native, got ${JSON.stringify(options.elicitationMode)}`);
  }
  const logRetentionDays = options.logRetentionDays ?? 30;
  if (!(Object.values(RetentionDays) as unknown[]).includes(logRetentionDays)) {
    throw new Error(
      `logRetentionDays: ${logRetentionDays} is not a CloudWatch Logs retention (1, 3, 5, 7, 14, 30, 60, 90, ...)`,
    );
  }
  let config: Resolved['config'];
  if (options.config) {
    const file = path.resolve(options.config);
    config = { dir: path.dirname(file), file: path.basename(file) };
  }
  return {
    assetDir: path.resolve(options.assetDir ?? path.join('..', '..', 'target', 'lambda-functions')),
    architecture,
    removalPolicy,
    config,
    secretArns,
    domain: options.domainName ? { name: options.domainName, certificateArn: options.certificateArn! } : undefined,
    oidc: options.oidcIssuer
      ? {
          issuer: options.oidcIssuer,
          audience: options.oidcAudience!,
          jwksUrl: options.oidcJwksUrl,
          ownerClaim: options.oidcOwnerClaim,
        }
      : undefined,
    sessionTimeoutMs: options.sessionTimeoutMs ?? DEFAULT_SESSION_TIMEOUT_MS,
    pausedLeaseMs: options.pausedLeaseMs ?? DEFAULT_PAUSED_LEASE_MS,
    approvalWindowMs: options.approvalWindowMs ?? DEFAULT_APPROVAL_WINDOW_MS,
    approvalWaitMs: options.approvalWaitMs,
    elicitationMode: options.elicitationMode,
    logRetentionDays,
  };
}
