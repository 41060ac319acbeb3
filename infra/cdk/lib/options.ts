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
   * layer with the local files it names (OpenAPI specs, GraphQL schemas, the
   * catalog index, the Cedar policies of `[policy] cedar` and of each
   * toolkit's `cedar`: paths below its directory);
   * `EXECUTOR_CONFIG` points at it inside the layer. Every Secrets Manager ARN
   * it names must be in `secretArns`. The Cedar policies are checked at synth
   * as the functions check them at start (syntax, unique `@id`s, the schema
   * shared/catalog/src/cedar/executor.cedarschema; lib/cedar.ts).
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
  /**
   * The approver's console (/console) signs people in at `oidcIssuer` with this
   * OIDC client (`EXECUTOR_CONSOLE_CLIENT_ID`, on the approval function): a
   * public client (no secret), the authorization code flow with PKCE, redirect
   * URI `<public URL>/console/oidc/callback`. Needs `oidcIssuer`.
   * @default - no OIDC sign-in on the console
   */
  readonly consoleClientId?: string;
  /**
   * How long a console sign-in lasts, in milliseconds (`EXECUTOR_CONSOLE_SESSION_MS`, on the approval function).
   * @default - the function's own (8 h)
   */
  readonly consoleSessionMs?: number;
  /** Timing knobs of the session lifecycle (docs/lifecycle.md); one value for all three functions. */
  readonly sessionTimeoutMs?: number;
  readonly pausedLeaseMs?: number;
  readonly approvalWindowMs?: number;
  /**
   * How long each execution's audit history is kept, by TTL on its items,
   * independent of the execution's own expiry (`EXECUTOR_AUDIT_RETENTION_DAYS`, 1 to 3650).
   * @default - the functions' own (30 days)
   */
  readonly auditRetentionDays?: number;
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
  /**
   * Extra environment variables (e.g. `OTEL_EXPORTER_OTLP_ENDPOINT`,
   * `AWS_LAMBDA_EXEC_WRAPPER`, `EXECUTOR_MAX_CONCURRENT_EXECUTIONS`), for every
   * function (`all`) or one; a function's own entry wins over `all`. A variable
   * the stack sets itself, or one Lambda reserves, is refused.
   * @default - none
   */
  readonly environment?: PerFunction<Record<string, string>>;
  /**
   * Extra layer version ARNs (e.g. the ADOT collector), for every function
   * (`all`, listed first) or one. At most 5 layers per function, the sources
   * layer included.
   * @default - none
   */
  readonly layerArns?: PerFunction<string[]>;
  /** Reserved concurrency per function (`all` for each that has no own entry). @default - unreserved */
  readonly reservedConcurrency?: PerFunction<number>;
  /** X-Ray active tracing on the three functions. @default false */
  readonly tracing?: boolean;
  /**
   * Run the functions in a VPC: its subnets (private, spread over AZs) and
   * security groups, both or neither. The functions then reach DynamoDB,
   * Scheduler and Secrets Manager through VPC endpoints or a NAT gateway
   * (docs/deploy.md, "VPC").
   * @default - no VPC
   */
  readonly vpcSubnetIds?: string[];
  readonly vpcSecurityGroupIds?: string[];
  /** The API stage's steady requests per second and burst, both or neither. @default - the account's limits */
  readonly throttleRateLimit?: number;
  readonly throttleBurstLimit?: number;
  /** CloudWatch alarms and the dashboard (docs/deploy.md, "Alarms"). @default true */
  readonly alarms?: boolean;
  /** An SNS topic the alarms notify (alarm and OK). @default - none */
  readonly alarmTopicArn?: string;
  /**
   * Create an API key for this owner at deploy time: the hash in the table,
   * the token in a Secrets Manager secret (output `InitialKeySecretArn`).
   * @default - no key
   */
  readonly initialKeyOwner?: string;
  /** Change (e.g. increment) to replace the initial key: a new token, the old key revoked. @default 1 */
  readonly initialKeyGeneration?: number;
  /**
   * Create an EventBridge bus for lifecycle events (docs/events.md): the three
   * functions put `Execution Paused`, ... on it (`EXECUTOR_EVENT_BUS`), and
   * only they may. Whoever can read the bus can approve (events carry links).
   * @default false
   */
  readonly eventBus?: boolean;
  /**
   * Also POST each event to this https URL (`EXECUTOR_EVENT_WEBHOOK`), from the three functions.
   * @default - none
   */
  readonly eventWebhook?: string;
  /**
   * E-mail this address an approval request for each browser-mode pause: an
   * SNS topic with this subscription (confirm it from the first message), and
   * a rule on the event bus turning `Execution Paused` into a readable message
   * with the approval link. Creates the bus.
   * @default - none
   */
  readonly approvalEmail?: string;
  /**
   * Memory (MB) per function (`all` for each that has no own entry), 128 to
   * 10240. Lambda's CPU share grows with memory, and the sandbox is CPU-bound.
   * @default - 1024 for mcp and approval, 256 for alarm
   */
  readonly memorySize?: PerFunction<number>;
  /**
   * Publish a version of each function on every change and point an alias
   * (`aliasName`) at it; the API's routes, the continuations and the session
   * alarms then invoke the alias instead of `$LATEST`.
   * @default false
   */
  readonly versions?: boolean;
  /** The alias of each function, with `versions`. @default 'live' */
  readonly aliasName?: string;
  /**
   * An SQS dead-letter queue for the approval function's asynchronous
   * invocations (the continuations of long runs): a continuation that failed,
   * timed out or was dropped is kept there for 14 days. Retries stay at 0.
   * @default false
   */
  readonly continuationDeadLetterQueue?: boolean;
  /**
   * Alarms on the MCP and approval functions' `Errors` (any) and `Duration`
   * (the maximum over 90 % of the function's timeout). Needs `alarms`.
   * @default false
   */
  readonly functionAlarms?: boolean;
  /**
   * Create a customer-managed KMS key (yearly rotation) for the table, the
   * secrets, the log groups and the dead-letter queue. Not with `kmsKeyArn`.
   * @default false (AWS-owned and AWS-managed keys)
   */
  readonly kmsKey?: boolean;
  /**
   * An existing customer-managed KMS key for the same resources. Its key
   * policy must let the account's IAM policies grant it and let CloudWatch
   * Logs use it (docs/deploy.md, "Encryption").
   * @default - none
   */
  readonly kmsKeyArn?: string;
  /** A managed policy ARN set as the permissions boundary of every role the stack creates. @default - none */
  readonly permissionsBoundaryArn?: string;
  /**
   * Name every role the stack creates `<prefix><stack>-<role>` (mcp, approval,
   * alarm, scheduler, initial-key) instead of a generated name.
   * @default - generated names
   */
  readonly roleNamePrefix?: string;
  /**
   * Change (e.g. increment) to replace the native-mode request-state key: a
   * new secret with a new value, and the MCP function updated with it.
   * @default 1
   */
  readonly requestStateKeyGeneration?: number;
}

/** The three functions. */
export const FUNCTIONS = ['mcp', 'approval', 'alarm'] as const;
export type FunctionName = (typeof FUNCTIONS)[number];

/** A setting for every function (`all`) and/or for one of them. */
export type PerFunction<T> = { all?: T } & { [F in FunctionName]?: T };

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
  'consoleClientId',
  'consoleSessionMs',
  'sessionTimeoutMs',
  'pausedLeaseMs',
  'approvalWindowMs',
  'auditRetentionDays',
  'approvalWaitMs',
  'elicitationMode',
  'logRetentionDays',
  'environment',
  'layerArns',
  'reservedConcurrency',
  'tracing',
  'vpcSubnetIds',
  'vpcSecurityGroupIds',
  'throttleRateLimit',
  'throttleBurstLimit',
  'alarms',
  'alarmTopicArn',
  'initialKeyOwner',
  'initialKeyGeneration',
  'eventBus',
  'eventWebhook',
  'approvalEmail',
  'memorySize',
  'versions',
  'aliasName',
  'continuationDeadLetterQueue',
  'functionAlarms',
  'kmsKey',
  'kmsKeyArn',
  'permissionsBoundaryArn',
  'roleNamePrefix',
  'requestStateKeyGeneration',
] as const;

const NUMBER_KEYS = new Set([
  'consoleSessionMs',
  'sessionTimeoutMs',
  'pausedLeaseMs',
  'approvalWindowMs',
  'auditRetentionDays',
  'approvalWaitMs',
  'logRetentionDays',
  'throttleRateLimit',
  'throttleBurstLimit',
  'initialKeyGeneration',
  'requestStateKeyGeneration',
]);
const LIST_KEYS = new Set(['secretArns', 'vpcSubnetIds', 'vpcSecurityGroupIds']);
const BOOLEAN_KEYS = new Set([
  'tracing',
  'alarms',
  'eventBus',
  'versions',
  'continuationDeadLetterQueue',
  'functionAlarms',
  'kmsKey',
]);
/** Per-function numbers: a plain number is for every function. */
const PER_FUNCTION_NUMBER_KEYS = new Set(['reservedConcurrency', 'memorySize']);

/**
 * Options from context values. `-c` always gives strings, cdk.json may give
 * numbers and arrays: both are accepted. Empty strings count as unset.
 */
export function optionsFromContext(get: (key: string) => unknown): ExecutorOptions {
  const options: Record<string, unknown> = {};
  for (const key of CONTEXT_KEYS) {
    const raw = get(key);
    if (raw === undefined || raw === null || raw === '') continue;
    if (LIST_KEYS.has(key)) {
      options[key] = toList(raw);
    } else if (BOOLEAN_KEYS.has(key)) {
      const value = typeof raw === 'boolean' ? raw : String(raw).trim();
      if (value !== true && value !== false && value !== 'true' && value !== 'false') {
        throw new Error(`context ${key}: expected true or false, got ${JSON.stringify(raw)}`);
      }
      options[key] = value === true || value === 'true';
    } else if (key === 'environment') {
      options[key] = toObject(key, raw);
    } else if (key === 'layerArns') {
      // A plain list is for every function.
      options[key] = Array.isArray(raw) || !String(raw).trim().startsWith('{') ? { all: toList(raw) } : toObject(key, raw);
    } else if (PER_FUNCTION_NUMBER_KEYS.has(key)) {
      // A plain number is for every function.
      options[key] = typeof raw === 'number' || /^\s*\d+\s*$/.test(String(raw)) ? { all: Number(raw) } : toObject(key, raw);
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

/** A JSON object, or one given as a string (`-c name='{"mcp": ...}'`). */
function toObject(key: string, raw: unknown): Record<string, unknown> {
  let value = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      throw new Error(`context ${key}: expected a JSON object, got ${JSON.stringify(raw)}`);
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error(`context ${key}: expected a JSON object, got ${JSON.stringify(raw)}`);
  }
  return value as Record<string, unknown>;
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
  /** The console's OIDC client, with `oidc`. */
  consoleClientId?: string;
  consoleSessionMs?: number;
  sessionTimeoutMs: number;
  pausedLeaseMs: number;
  approvalWindowMs: number;
  auditRetentionDays?: number;
  approvalWaitMs?: number;
  elicitationMode?: string;
  logRetentionDays: number;
  functions: Record<FunctionName, FunctionSettings>;
  tracing: boolean;
  vpc?: { subnetIds: string[]; securityGroupIds: string[] };
  throttle?: { rateLimit: number; burstLimit: number };
  alarms: boolean;
  alarmTopicArn?: string;
  initialKey?: { owner: string; generation: number };
  /** Lifecycle events: on when a bus or a webhook is set. */
  events?: { bus: boolean; webhook?: string; approvalEmail?: string };
  /** Published versions and one alias per function, with `versions`. */
  versions?: { aliasName: string };
  continuationDeadLetterQueue: boolean;
  functionAlarms: boolean;
  /** A customer-managed key: created by the stack, or an existing one. */
  encryption?: { create: true } | { keyArn: string };
  permissionsBoundaryArn?: string;
  roleNamePrefix?: string;
  requestStateKeyGeneration: number;
}

/** What one function gets from `environment`, `layerArns`, `reservedConcurrency` and `memorySize`. */
export interface FunctionSettings {
  environment: Record<string, string>;
  layerArns: string[];
  reservedConcurrency?: number;
  memorySize: number;
}

/**
 * Memory (MB) of each function by default. The HTTP functions run the sandbox
 * (64 MiB per execution), which is CPU-bound, and Lambda's CPU share grows
 * with memory; the alarm function only makes a few store calls.
 */
export const DEFAULT_MEMORY_MB: Record<FunctionName, number> = { mcp: 1024, approval: 1024, alarm: 256 };
/** What Lambda accepts. */
export const MIN_MEMORY_MB = 128;
export const MAX_MEMORY_MB = 10_240;

/** The alias with `versions`. */
export const DEFAULT_ALIAS_NAME = 'live';

/** The roles the stack may create, by the suffix of their name with `roleNamePrefix`. */
export const ROLE_SUFFIXES = ['mcp', 'approval', 'alarm', 'scheduler', 'initial-key'] as const;
/** IAM role names are at most 64 characters. */
export const MAX_ROLE_NAME = 64;

/**
 * Variables Lambda sets itself and refuses in a function's configuration.
 * `AWS_LAMBDA_EXEC_WRAPPER` (what the ADOT layer needs) is not among them.
 */
export const LAMBDA_RESERVED_VARIABLES = new Set([
  '_HANDLER',
  '_X_AMZN_TRACE_ID',
  'AWS_DEFAULT_REGION',
  'AWS_REGION',
  'AWS_EXECUTION_ENV',
  'AWS_LAMBDA_FUNCTION_NAME',
  'AWS_LAMBDA_FUNCTION_MEMORY_SIZE',
  'AWS_LAMBDA_FUNCTION_VERSION',
  'AWS_LAMBDA_INITIALIZATION_TYPE',
  'AWS_LAMBDA_LOG_GROUP_NAME',
  'AWS_LAMBDA_LOG_STREAM_NAME',
  'AWS_ACCESS_KEY',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_LAMBDA_RUNTIME_API',
  'LAMBDA_TASK_ROOT',
  'LAMBDA_RUNTIME_DIR',
]);

/** Event settings that have an option of their own (it grants what they need). */
const EVENT_OPTIONS: Record<string, string> = {
  EXECUTOR_EVENT_BUS: 'eventBus',
  EXECUTOR_EVENT_WEBHOOK: 'eventWebhook',
};

/** Lambda allows five layers per function. */
export const MAX_LAYERS = 5;

// The session lifecycle's timing (docs/lifecycle.md). Set explicitly on every
// function so that the MCP and alarm functions can never disagree about them.
// The same values as the functions' own defaults (shared/core/src/alarm.rs).
export const DEFAULT_SESSION_TIMEOUT_MS = 1_800_000;
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
  if (options.consoleClientId !== undefined) {
    if (typeof options.consoleClientId !== 'string' || options.consoleClientId.trim() === '') {
      throw new Error(`consoleClientId: expected an OIDC client id, got ${JSON.stringify(options.consoleClientId)}`);
    }
    if (!options.oidcIssuer) {
      throw new Error('consoleClientId needs oidcIssuer and oidcAudience: the console signs people in at that issuer');
    }
  }
  if (
    options.consoleSessionMs !== undefined &&
    !(Number.isInteger(options.consoleSessionMs) && options.consoleSessionMs > 0)
  ) {
    throw new Error(
      `consoleSessionMs: expected a positive whole number of milliseconds, got ${JSON.stringify(options.consoleSessionMs)}`,
    );
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
  if (options.auditRetentionDays !== undefined && !(options.auditRetentionDays >= 1 && options.auditRetentionDays <= 3650)) {
    throw new Error(`auditRetentionDays: ${options.auditRetentionDays} is outside 1 to 3650 days`);
  }
  const logRetentionDays = options.logRetentionDays ?? 30;
  if (!(Object.values(RetentionDays) as unknown[]).includes(logRetentionDays)) {
    throw new Error(
      `logRetentionDays: ${logRetentionDays} is not a CloudWatch Logs retention (1, 3, 5, 7, 14, 30, 60, 90, ...)`,
    );
  }
  const functions = resolveFunctions(options);
  if (!!options.vpcSubnetIds?.length !== !!options.vpcSecurityGroupIds?.length) {
    throw new Error('vpcSubnetIds and vpcSecurityGroupIds go together: set both or neither');
  }
  for (const id of options.vpcSubnetIds ?? []) {
    if (!/^subnet-[0-9a-f]{8,17}$/.test(id)) throw new Error(`vpcSubnetIds: ${JSON.stringify(id)} is not a subnet ID (subnet-0123abcd...)`);
  }
  for (const id of options.vpcSecurityGroupIds ?? []) {
    if (!/^sg-[0-9a-f]{8,17}$/.test(id)) {
      throw new Error(`vpcSecurityGroupIds: ${JSON.stringify(id)} is not a security group ID (sg-0123abcd...)`);
    }
  }
  if ((options.throttleRateLimit === undefined) !== (options.throttleBurstLimit === undefined)) {
    throw new Error('throttleRateLimit and throttleBurstLimit go together: set both or neither');
  }
  const wholeNumbers = ['throttleRateLimit', 'throttleBurstLimit', 'initialKeyGeneration', 'requestStateKeyGeneration'] as const;
  for (const key of wholeNumbers) {
    const value = options[key];
    if (value !== undefined && !(Number.isInteger(value) && value > 0)) {
      throw new Error(`${key}: expected a positive whole number, got ${JSON.stringify(value)}`);
    }
  }
  const alarms = options.alarms ?? true;
  if (options.alarmTopicArn !== undefined) {
    if (!alarms) throw new Error('alarmTopicArn needs the alarms (alarms=false turns them off)');
    if (!/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$/.test(options.alarmTopicArn)) {
      throw new Error(`alarmTopicArn: ${JSON.stringify(options.alarmTopicArn)} is not an SNS topic ARN`);
    }
  }
  if (options.initialKeyGeneration !== undefined && !options.initialKeyOwner) {
    throw new Error('initialKeyGeneration needs initialKeyOwner');
  }
  // The owner names `executor keys create --owner` accepts.
  if (options.initialKeyOwner !== undefined && !/^[A-Za-z0-9._@+-]{1,64}$/.test(options.initialKeyOwner)) {
    throw new Error(
      `initialKeyOwner: expected up to 64 letters, digits and . _ - @ +, got ${JSON.stringify(options.initialKeyOwner)}`,
    );
  }
  // An https URL with a host and no credentials: events carry approval links (the functions check it too).
  if (options.eventWebhook !== undefined && !/^https:\/\/[^/@\s]+(\/\S*)?$/.test(options.eventWebhook)) {
    throw new Error(`eventWebhook: expected an https:// URL, got ${JSON.stringify(options.eventWebhook)}`);
  }
  if (options.approvalEmail !== undefined && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(options.approvalEmail)) {
    throw new Error(`approvalEmail: expected an e-mail address, got ${JSON.stringify(options.approvalEmail)}`);
  }
  const versions = options.versions ?? false;
  if (options.aliasName !== undefined) {
    if (!versions) throw new Error('aliasName needs versions=true');
    // Lambda's alias names: letters, digits, - and _, not only digits.
    if (!/^[A-Za-z0-9_-]{1,128}$/.test(options.aliasName) || /^\d+$/.test(options.aliasName)) {
      throw new Error(
        'aliasName: expected up to 128 letters, digits, - and _ (not only digits), ' +
          `got ${JSON.stringify(options.aliasName)}`,
      );
    }
  }
  const functionAlarms = options.functionAlarms ?? false;
  if (functionAlarms && !alarms) throw new Error('functionAlarms needs the alarms (alarms=false turns them off)');
  if (options.kmsKey && options.kmsKeyArn !== undefined) {
    throw new Error('kmsKey and kmsKeyArn exclude each other: create a key, or name an existing one');
  }
  if (
    options.kmsKeyArn !== undefined &&
    !/^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/.test(options.kmsKeyArn)
  ) {
    throw new Error(
      `kmsKeyArn: ${JSON.stringify(options.kmsKeyArn)} is not a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/KEY-ID)`,
    );
  }
  if (
    options.permissionsBoundaryArn !== undefined &&
    !/^arn:aws[a-z-]*:iam::(\d{12}|aws):policy\/[A-Za-z0-9+=,.@_/-]+$/.test(options.permissionsBoundaryArn)
  ) {
    throw new Error(
      `permissionsBoundaryArn: ${JSON.stringify(options.permissionsBoundaryArn)} is not a managed policy ARN ` +
        '(arn:aws:iam::ACCOUNT:policy/NAME)',
    );
  }
  if (options.roleNamePrefix !== undefined && !/^[A-Za-z0-9+=,.@_-]{1,32}$/.test(options.roleNamePrefix)) {
    throw new Error(
      `roleNamePrefix: expected up to 32 letters, digits and + = , . @ _ -, got ${JSON.stringify(options.roleNamePrefix)}`,
    );
  }
  const bus = (options.eventBus ?? false) || options.approvalEmail !== undefined;
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
    consoleClientId: options.consoleClientId?.trim(),
    consoleSessionMs: options.consoleSessionMs,
    sessionTimeoutMs: options.sessionTimeoutMs ?? DEFAULT_SESSION_TIMEOUT_MS,
    pausedLeaseMs: options.pausedLeaseMs ?? DEFAULT_PAUSED_LEASE_MS,
    approvalWindowMs: options.approvalWindowMs ?? DEFAULT_APPROVAL_WINDOW_MS,
    auditRetentionDays: options.auditRetentionDays,
    approvalWaitMs: options.approvalWaitMs,
    elicitationMode: options.elicitationMode,
    logRetentionDays,
    functions,
    tracing: options.tracing ?? false,
    vpc: options.vpcSubnetIds?.length
      ? { subnetIds: [...new Set(options.vpcSubnetIds)], securityGroupIds: [...new Set(options.vpcSecurityGroupIds)] }
      : undefined,
    throttle:
      options.throttleRateLimit !== undefined
        ? { rateLimit: options.throttleRateLimit, burstLimit: options.throttleBurstLimit! }
        : undefined,
    alarms,
    alarmTopicArn: options.alarmTopicArn,
    initialKey: options.initialKeyOwner
      ? { owner: options.initialKeyOwner, generation: options.initialKeyGeneration ?? 1 }
      : undefined,
    events:
      bus || options.eventWebhook
        ? { bus, webhook: options.eventWebhook, approvalEmail: options.approvalEmail }
        : undefined,
    versions: versions ? { aliasName: options.aliasName ?? DEFAULT_ALIAS_NAME } : undefined,
    continuationDeadLetterQueue: options.continuationDeadLetterQueue ?? false,
    functionAlarms,
    encryption: options.kmsKey ? { create: true } : options.kmsKeyArn ? { keyArn: options.kmsKeyArn } : undefined,
    permissionsBoundaryArn: options.permissionsBoundaryArn,
    roleNamePrefix: options.roleNamePrefix,
    requestStateKeyGeneration: options.requestStateKeyGeneration ?? 1,
  };
}

/** `environment`, `layerArns`, `reservedConcurrency` and `memorySize` per function, `all` merged in, checked. */
function resolveFunctions(options: ExecutorOptions): Record<FunctionName, FunctionSettings> {
  const targets = ['all', ...FUNCTIONS];
  for (const key of ['environment', 'layerArns', 'reservedConcurrency', 'memorySize'] as const) {
    for (const target of Object.keys(options[key] ?? {})) {
      if (!targets.includes(target)) {
        throw new Error(`${key}: ${JSON.stringify(target)} is not all, mcp, approval or alarm`);
      }
    }
  }
  for (const [target, variables] of Object.entries(options.environment ?? {})) {
    if (variables === null || typeof variables !== 'object' || Array.isArray(variables)) {
      throw new Error(`environment.${target}: expected an object of NAME: value`);
    }
    for (const [name, value] of Object.entries(variables)) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        throw new Error(`environment.${target}: ${JSON.stringify(name)} is not a variable name`);
      }
      if (LAMBDA_RESERVED_VARIABLES.has(name)) {
        throw new Error(`environment.${target}: ${name} is set by Lambda and cannot be configured`);
      }
      // The outbox and the bus need grants that only these options give.
      if (name in EVENT_OPTIONS) {
        throw new Error(`environment.${target}: set ${name} with the ${EVENT_OPTIONS[name]} option instead`);
      }
      if (typeof value !== 'string') {
        throw new Error(`environment.${target}.${name}: expected a string, got ${JSON.stringify(value)}`);
      }
    }
  }
  for (const [target, arns] of Object.entries(options.layerArns ?? {})) {
    if (!Array.isArray(arns)) throw new Error(`layerArns.${target}: expected a list of layer version ARNs`);
    for (const arn of arns) {
      if (!/^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+$/.test(arn)) {
        throw new Error(
          `layerArns.${target}: ${JSON.stringify(arn)} is not a layer version ARN ` +
            '(arn:aws:lambda:REGION:ACCOUNT:layer:NAME:VERSION)',
        );
      }
    }
  }
  for (const [target, value] of Object.entries(options.reservedConcurrency ?? {})) {
    if (!Number.isInteger(value) || (value as number) <= 0) {
      throw new Error(`reservedConcurrency.${target}: expected a positive whole number, got ${JSON.stringify(value)}`);
    }
  }
  for (const [target, value] of Object.entries(options.memorySize ?? {})) {
    if (!Number.isInteger(value) || (value as number) < MIN_MEMORY_MB || (value as number) > MAX_MEMORY_MB) {
      throw new Error(
        `memorySize.${target}: expected a whole number of MB from ${MIN_MEMORY_MB} to ${MAX_MEMORY_MB}, ` +
          `got ${JSON.stringify(value)}`,
      );
    }
  }
  const per = <T>(setting: PerFunction<T> | undefined, fn: FunctionName) => [setting?.all, setting?.[fn]];
  return Object.fromEntries(
    FUNCTIONS.map((fn) => {
      const [allEnv, ownEnv] = per(options.environment, fn);
      const [allLayers, ownLayers] = per(options.layerArns, fn);
      const [allConcurrency, ownConcurrency] = per(options.reservedConcurrency, fn);
      const [allMemory, ownMemory] = per(options.memorySize, fn);
      const layerArns = [...new Set([...(allLayers ?? []), ...(ownLayers ?? [])])];
      return [
        fn,
        {
          environment: { ...allEnv, ...ownEnv },
          layerArns,
          reservedConcurrency: ownConcurrency ?? allConcurrency,
          memorySize: ownMemory ?? allMemory ?? DEFAULT_MEMORY_MB[fn],
        },
      ];
    }),
  ) as Record<FunctionName, FunctionSettings>;
}
